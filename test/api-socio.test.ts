// The socio routes over two Receita months loaded through real pipeline runs: the fixture
// month 2026-10 (with every other fixture, the IBGE list for the municipality crosswalk) and
// a 2026-11 month built by the fixture builder's 'next' variant (one partner leaves, one
// enters). Every field of every answer is checked against direct queries on the serving
// views, with the display rules (contract §3) written out here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ALNUM, buildReceitaMonth, ENTERING_PARTNER, LEAVING_PARTNER, SHARED_CPF_PARTNERS, SHARED_MASKED_CPF } from '../fixtures/receita-cnpj.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import { cpfCheckDigits } from '../src/documents.ts';
import * as catalog from '../src/etl/catalog.ts';
import { applyRetention } from '../src/etl/publish.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { call, expectEnvelope, loadFixtures, newKey, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const SITUACAO: Record<string, string> = { '01': 'nula', '02': 'ativa', '03': 'suspensa', '04': 'inapta', '08': 'baixada' };
const cnae = (c: string | null, d: string | null) => (c ? { codigo: `${c.slice(0, 4)}-${c.slice(4, 5)}/${c.slice(5)}`, descricao: d } : null);
const fmtCnpj = (c: string) => `${c.slice(0, 2)}.${c.slice(2, 5)}.${c.slice(5, 8)}/${c.slice(8, 12)}-${c.slice(12)}`;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const ALNUM_MASKED = '12.ABC.345/01DE-35';
/** A valid CPF whose six middle digits are the shared masked CPF's (***123456**). */
const SHARED_CPF = '123123456' + cpfCheckDigits('123123456');

/** A foreign partner (type 3) with Receita's placeholder document: no person's CPF. */
const FOREIGN_PARTNER = `"13810056";"3";"JOHN FOREIGN SMITH";"***999999**";"37";"20260801";"249";"***000000**";"";"00";"0"`;
/** A sample company's row once more (Empresas may repeat a root: counted, kept), and a partner of it. */
const REPEATED_COMPANY = `"57815224";"57.815.224 IONE APARECIDA DOS SANTOS";"2135";"50";"10000,00";"01";""`;
const REPEATED_COMPANY_PARTNER = `"57815224";"2";"IONE APARECIDA DOS SANTOS";"***424242**";"49";"20241023";"";"***000000**";"";"00";"5"`;
const REPEATED_COMPANY_CNPJ = '57815224000179';
/** A valid CPF whose six middle digits are the placeholder's. */
const NINES_CPF = '123999999' + cpfCheckDigits('123999999');

let db: TestDb;
let api: Running;
let key: string;
let next: RunOutcome;
let octoberId: number;
const q = async <T = any>(sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows as T[]; // eslint-disable-line @typescript-eslint/no-explicit-any
const get = (p: string) => call(api.base, p, { key });

beforeAll(async () => {
  db = await testDatabase();
  await loadFixtures(db); // ibge-municipios first, receita-cnpj 2026-10 among them
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'socio-'));
  await buildReceitaMonth(root, '2026-11', 'next', { SOCIOCSV: [FOREIGN_PARTNER, REPEATED_COMPANY_PARTNER], EMPRECSV: [REPEATED_COMPANY] });
  next = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: root });
  fs.rmSync(root, { recursive: true, force: true });
  expect(next.status).toBe('published');
  octoberId = (await q(`SELECT snapshot_id::int AS id FROM serving.snapshots_legiveis WHERE dataset = 'receita-cnpj' AND as_of = '2026-10-01'`))[0].id;
  key = await newKey(db);
  api = await startApi(db.cfg, db.url, db);
}, 400_000);

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** The company record of a CNPJ, from the serving views of the published month. */
async function expectedCompany(cnpj: string) {
  const [e] = await q(
    `SELECT s.cnpj, s.cnpj_basico, s.identificador_matriz_filial, e.razao_social, s.nome_fantasia, s.situacao_cadastral,
            to_char(s.data_inicio_atividade, 'YYYY-MM-DD') AS data_abertura, e.capital_social::float8 AS capital_social,
            e.natureza_juridica, n.descricao AS natureza, s.cnae_fiscal_principal, c.descricao AS cnae, s.municipio_nome, s.municipio,
            s.codigo_municipio_ibge, s.uf, s.cep, s.snapshot_id::int AS snapshot_id
       FROM serving.cnpj_estabelecimentos s
       LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = s.cnpj_basico
       LEFT JOIN serving.cnpj_naturezas n ON n.codigo = e.natureza_juridica
       LEFT JOIN serving.cnpj_cnaes c ON c.codigo = s.cnae_fiscal_principal
      WHERE s.cnpj = $1`, [cnpj]);
  const partners = await q(
    `SELECT p.nome_socio, p.identificador_de_socio, p.cnpj_cpf_do_socio, coalesce(x.descricao, p.qualificacao_socio) AS qualificacao,
            to_char(p.data_entrada_sociedade, 'YYYY-MM-DD') AS data_entrada
       FROM serving.cnpj_socios p LEFT JOIN serving.cnpj_qualificacoes x ON x.codigo = p.qualificacao_socio
      WHERE p.cnpj_basico = $1 ORDER BY p.nome_socio, p.socio_chave`, [e.cnpj_basico]);
  const tipo: Record<string, string> = { '1': 'pessoa_juridica', '2': 'pessoa_fisica', '3': 'estrangeiro' };
  return {
    cnpj: fmtCnpj(e.cnpj), razao_social: e.razao_social, nome_fantasia: e.nome_fantasia,
    situacao: SITUACAO[e.situacao_cadastral] ?? e.situacao_cadastral, data_abertura: e.data_abertura, capital_social: e.capital_social,
    natureza_juridica: e.natureza_juridica === null ? null : e.natureza ? `${e.natureza_juridica} - ${e.natureza}` : e.natureza_juridica,
    cnae_principal: cnae(e.cnae_fiscal_principal, e.cnae), matriz: e.identificador_matriz_filial === '1',
    qsa: partners.map((p) => {
      const doc: string = p.cnpj_cpf_do_socio ?? '';
      const masked = /^\*\*\*(\d{3})(\d{3})\*\*$/.exec(doc);
      return {
        nome: p.nome_socio, tipo: tipo[p.identificador_de_socio] ?? null,
        cpf: p.identificador_de_socio === '2' && masked ? `***.${masked[1]}.${masked[2]}-**` : null,
        cnpj: p.identificador_de_socio === '1' && doc.length === 14 ? fmtCnpj(doc) : null,
        qualificacao: p.qualificacao, participacao: null, data_entrada: p.data_entrada,
      };
    }),
    endereco: { municipio: e.municipio_nome ?? e.municipio, codigo_municipio_ibge: e.codigo_municipio_ibge, uf: e.uf, cep: e.cep },
    fonte: 'Receita Federal CNPJ 2026-11', snapshot_id: e.snapshot_id, as_of: '2026-11-01',
  };
}

describe('GET /v1/socio/cnpj/{cnpj}', () => {
  test('test keys read the sandbox database only: not loaded here, so 503 on every socio route, never the live rows', async () => {
    const testKey = await newKey(db, 'test');
    for (const p of [`/v1/socio/cnpj/${ALNUM.cnpj}`, `/v1/socio/cpf/${encodeURIComponent(SHARED_MASKED_CPF)}`, '/v1/socio/search?q=agropecuaria']) {
      expectEnvelope(await call(api.base, p, { key: testKey }), 503, 'upstream_unavailable');
    }
  });

  test('the alphanumeric CNPJ, masked or bare in any case: every field against the serving views', async () => {
    const want = await expectedCompany(ALNUM.cnpj);
    expect(want.razao_social).toBe('AGROPECUÁRIA SÃO JOSÉ LTDA');
    for (const form of [ALNUM_MASKED, ALNUM.cnpj, ALNUM.cnpj.toLowerCase()]) {
      const r = await get(`/v1/socio/cnpj/${encodeURIComponent(form)}`);
      expect(r.status, r.text).toBe(200);
      const { consultado_em, ...rest } = r.body;
      expect(consultado_em).toMatch(TIMESTAMP);
      expect(rest).toEqual(want);
    }
    const body = (await get(`/v1/socio/cnpj/${ALNUM.cnpj}`)).body;
    expect(body).toMatchObject({ cnpj: ALNUM_MASKED, situacao: 'ativa', capital_social: 150000.5, cnae_principal: { codigo: '0115-6/00' } });
    expect(body.natureza_juridica).toMatch(/^2062 - /);
    // partners sharing one masked CPF are all listed, the one who entered in 2026-11 too
    expect(body.qsa.map((p: { nome: string }) => p.nome).sort()).toEqual([ENTERING_PARTNER, ...SHARED_CPF_PARTNERS].sort());
    expect(body.qsa.filter((p: { cpf: string }) => p.cpf === '***.123.456-**')).toHaveLength(2);
    for (const p of body.qsa) expect(p.participacao).toBeNull();
  });

  test('every establishment of the month with a partner list (and 50 more): every field', async () => {
    const cnpjs = (await q(`(SELECT s.cnpj FROM serving.cnpj_estabelecimentos s WHERE EXISTS (SELECT 1 FROM serving.cnpj_socios p WHERE p.cnpj_basico = s.cnpj_basico))
                            UNION (SELECT cnpj FROM serving.cnpj_estabelecimentos ORDER BY cnpj LIMIT 50)`)).map((r) => r.cnpj as string);
    expect(cnpjs.length).toBeGreaterThan(50);
    let withQsa = 0;
    for (const cnpj of cnpjs) {
      const r = await get(`/v1/socio/cnpj/${cnpj}`);
      expect(r.status, `${cnpj}: ${r.text}`).toBe(200);
      const { consultado_em: _t, ...rest } = r.body;
      expect(rest, cnpj).toEqual(await expectedCompany(cnpj));
      if (r.body.qsa.length) withQsa++;
      expect(r.text).not.toMatch(/\*\*\*\d{6}\*\*/); // never Receita's raw masked form: always ***.NNN.NNN-**
    }
    expect(withQsa).toBeGreaterThan(0);
  });

  test('as_of answers from the month current on that date', async () => {
    const oct = await get(`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2026-10-20`);
    expect(oct.status, oct.text).toBe(200);
    expect(oct.body).toMatchObject({ snapshot_id: octoberId, as_of: '2026-10-01', fonte: 'Receita Federal CNPJ 2026-10' });
    const names = oct.body.qsa.map((p: { nome: string }) => p.nome);
    expect(names).toContain(LEAVING_PARTNER);
    expect(names).not.toContain(ENTERING_PARTNER);
    expect((await get(`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2026-11-01`)).body).toMatchObject({ snapshot_id: next.snapshot_id, as_of: '2026-11-01' });
    expect((await get(`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2030-01-01`)).body.snapshot_id).toBe(next.snapshot_id);
    const e = expectEnvelope(await get(`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2020-01-01`), 404, 'not_found');
    expect(e.message).toContain('2026-10-01');
  });

  test('wrong check digits → 400 naming cnpj; a valid absent CNPJ → 404 not_found', async () => {
    for (const bad of ['12.ABC.345/01DE-36', '1234', '11222333000182', '00000000000000', '12ABC34501DEXX']) {
      expect(expectEnvelope(await get(`/v1/socio/cnpj/${encodeURIComponent(bad)}`), 400, 'invalid_request').message).toMatch(/^cnpj: /);
    }
    expect(await q(`SELECT 1 FROM serving.cnpj_estabelecimentos WHERE cnpj = '11222333000181'`)).toHaveLength(0);
    expect(expectEnvelope(await get(`/v1/socio/cnpj/${encodeURIComponent('11.222.333/0001-81')}`), 404, 'not_found').message).toContain('11.222.333/0001-81');
  });
});

describe('GET /v1/socio/cpf/{cpf}', () => {
  test('partners sharing the six visible digits are all listed; nome is null when names differ', async () => {
    const r = await get(`/v1/socio/cpf/${SHARED_CPF}`);
    expect(r.status, r.text).toBe(200);
    const want = await q(
      `SELECT p.nome_socio, e.razao_social, coalesce(x.descricao, p.qualificacao_socio) AS qualificacao, s.cnpj, s.situacao_cadastral
         FROM serving.cnpj_socios p
         LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = p.cnpj_basico
         LEFT JOIN serving.cnpj_qualificacoes x ON x.codigo = p.qualificacao_socio
         LEFT JOIN LATERAL (SELECT cnpj, situacao_cadastral FROM serving.cnpj_estabelecimentos t WHERE t.cnpj_basico = p.cnpj_basico
                             ORDER BY identificador_matriz_filial, cnpj_ordem LIMIT 1) s ON true
        WHERE p.cpf_miolo = '123456' ORDER BY p.cnpj_basico, p.nome_socio, p.socio_chave`);
    expect(want).toHaveLength(2);
    const { consultado_em, ...rest } = r.body;
    expect(consultado_em).toMatch(TIMESTAMP);
    expect(rest).toEqual({
      cpf_mascarado: '***.123.456-**', nome: null, total: 2,
      vinculos: want.map((w) => ({
        cnpj: fmtCnpj(w.cnpj), razao_social: w.razao_social, qualificacao: w.qualificacao, participacao: null,
        situacao_pj: SITUACAO[w.situacao_cadastral] ?? w.situacao_cadastral, nome: w.nome_socio,
      })),
      fonte: 'Receita Federal CNPJ 2026-11', snapshot_id: next.snapshot_id, as_of: '2026-11-01',
    });
    expect(r.text).not.toContain(SHARED_CPF);
    // Receita's masked form is accepted as well
    expect((await get(`/v1/socio/cpf/${encodeURIComponent('***.123.456-**')}`)).body.total).toBe(2);
    expect((await get(`/v1/socio/cpf/${encodeURIComponent('***123456**')}`)).body.total).toBe(2);
  });

  test('nome narrows, accent- and case-insensitive; a single name is the top-level nome', async () => {
    const maria = (await get(`/v1/socio/cpf/${SHARED_CPF}?nome=maria`)).body;
    expect(maria).toMatchObject({ nome: SHARED_CPF_PARTNERS[0], total: 1 });
    expect(maria.vinculos[0].nome).toBe(SHARED_CPF_PARTNERS[0]);
    const mario = (await get(`/v1/socio/cpf/${SHARED_CPF}?nome=${encodeURIComponent('Mário da Silva')}`)).body;
    expect(mario).toMatchObject({ nome: SHARED_CPF_PARTNERS[1], total: 1 });
    expect((await get(`/v1/socio/cpf/${SHARED_CPF}?nome=ninguem`)).body).toMatchObject({ nome: null, total: 0, vinculos: [] });
  });

  test('every masked person partner of the month: links counted as the view counts them', async () => {
    const rows = await q(`SELECT cpf_miolo, count(*)::int AS n FROM serving.cnpj_socios WHERE cpf_miolo IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT 100`);
    expect(rows.length).toBeGreaterThan(10);
    for (const { cpf_miolo, n } of rows) {
      const r = await get(`/v1/socio/cpf/${encodeURIComponent(`***${cpf_miolo}**`)}`);
      expect(r.status, r.text).toBe(200);
      expect(r.body.total, cpf_miolo).toBe(n);
      expect(r.body.cpf_mascarado).toBe(`***.${cpf_miolo.slice(0, 3)}.${cpf_miolo.slice(3)}-**`);
    }
  });

  test('as_of reads the older month (the partner who left is there)', async () => {
    const leaving = (await q(`SELECT cpf_miolo FROM snap.${'cnpj_socios__s' + octoberId} WHERE nome_socio = $1`, [LEAVING_PARTNER]))[0].cpf_miolo;
    const now = (await get(`/v1/socio/cpf/${encodeURIComponent(`***${leaving}**`)}`)).body;
    expect(now.vinculos.map((v: { nome: string }) => v.nome)).not.toContain(LEAVING_PARTNER);
    const then = (await get(`/v1/socio/cpf/${encodeURIComponent(`***${leaving}**`)}?as_of=2026-10-31`)).body;
    expect(then).toMatchObject({ snapshot_id: octoberId, nome: LEAVING_PARTNER });
  });

  test("a foreign partner's placeholder document (***999999**) is no CPF: a person whose digits are 999999 is not linked to it", async () => {
    const [foreign] = await q(`SELECT cnpj_cpf_do_socio, cpf_miolo FROM serving.cnpj_socios WHERE nome_socio = 'JOHN FOREIGN SMITH'`);
    expect(foreign).toEqual({ cnpj_cpf_do_socio: '***999999**', cpf_miolo: null });
    const r = await get(`/v1/socio/cpf/${NINES_CPF}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ total: 0, nome: null, vinculos: [] });
  });

  test('a company whose root Empresas repeats: its partner link and its search hit listed once', async () => {
    expect((await q(`SELECT count(*)::int AS n FROM serving.cnpj_empresas WHERE cnpj_basico = '57815224'`))[0].n).toBe(2);
    const s = await get(`/v1/socio/search?q=${encodeURIComponent('ione aparecida dos santos')}`);
    expect(s.status, s.text).toBe(200);
    const cnpjs = s.body.results.map((x: { cnpj: string }) => x.cnpj);
    expect(cnpjs).toContain(fmtCnpj(REPEATED_COMPANY_CNPJ));
    expect(new Set(cnpjs).size).toBe(cnpjs.length);
    const r = await get(`/v1/socio/cpf/${encodeURIComponent('***424242**')}`);
    expect(r.body).toMatchObject({ total: 1, nome: 'IONE APARECIDA DOS SANTOS', vinculos: [{ cnpj: fmtCnpj(REPEATED_COMPANY_CNPJ) }] });
  });

  test('a CPF with wrong check digits → 400 naming cpf', async () => {
    const wrong = SHARED_CPF.slice(0, 9) + String((Number(SHARED_CPF[9]) + 1) % 10) + SHARED_CPF[10];
    for (const bad of [wrong, '11111111111', '123', '***.12.456-**']) {
      expect(expectEnvelope(await get(`/v1/socio/cpf/${encodeURIComponent(bad)}`), 400, 'invalid_request').message).toMatch(/^cpf: /);
    }
    const e = expectEnvelope(await get(`/v1/socio/cpf/${wrong}`), 400, 'invalid_request');
    expect(e.message).not.toContain(wrong);
  });
});

describe('GET /v1/socio/search', () => {
  test('an accent-less lower-case query finds the company, with a score; fields against the views', async () => {
    const r = await get(`/v1/socio/search?q=${encodeURIComponent('agropecuaria sao jose')}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body.count).toBe(r.body.results.length);
    const top = r.body.results[0];
    expect(top.cnpj).toBe(ALNUM_MASKED);
    expect(top.score).toBeGreaterThan(0.9);
    for (let i = 1; i < r.body.results.length; i++) expect(r.body.results[i].score).toBeLessThanOrEqual(r.body.results[i - 1].score);
    for (const res of r.body.results) {
      const raw = res.cnpj.replace(/[./-]/g, '');
      const [w] = await q(
        `SELECT e.razao_social, s.nome_fantasia, s.situacao_cadastral, s.uf, s.municipio_nome, s.cnae_fiscal_principal, c.descricao
           FROM serving.cnpj_estabelecimentos s LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = s.cnpj_basico
           LEFT JOIN serving.cnpj_cnaes c ON c.codigo = s.cnae_fiscal_principal WHERE s.cnpj = $1`, [raw]);
      const [sim] = await q(
        `SELECT greatest(coalesce(word_similarity(etl.cnpj_busca($1), etl.cnpj_busca($2)), 0), coalesce(word_similarity(etl.cnpj_busca($1), etl.cnpj_busca($3)), 0))::float8 AS s`,
        ['agropecuaria sao jose', w.razao_social, w.nome_fantasia]);
      expect(res).toEqual({
        cnpj: fmtCnpj(raw), razao_social: w.razao_social, nome_fantasia: w.nome_fantasia, situacao: SITUACAO[w.situacao_cadastral] ?? w.situacao_cadastral,
        uf: w.uf, municipio: w.municipio_nome, cnae_principal: cnae(w.cnae_fiscal_principal, w.descricao), score: Math.round(sim.s * 1e4) / 1e4,
      });
    }
  });

  test('by trade name, and the filters uf, situacao, cnae, limit', async () => {
    expect((await get(`/v1/socio/search?q=${encodeURIComponent('FAZENDA CORACAO')}`)).body.results[0].cnpj).toBe(ALNUM_MASKED);
    const cnpjs = async (p: string) => (await get(`/v1/socio/search?q=agropecuaria${p}`)).body.results.map((x: { cnpj: string }) => x.cnpj);
    expect(await cnpjs('&uf=sp')).toContain(ALNUM_MASKED);
    expect(await cnpjs('&uf=RJ')).not.toContain(ALNUM_MASKED);
    expect(await cnpjs('&situacao=ativa')).toContain(ALNUM_MASKED);
    expect(await cnpjs('&situacao=baixada')).not.toContain(ALNUM_MASKED);
    expect(await cnpjs('&cnae=0115-6/00')).toEqual([ALNUM_MASKED]);
    for (const s of (await get('/v1/socio/search?q=mercearia&situacao=baixada&limit=50')).body.results) expect(s.situacao).toBe('baixada');
    const all = (await get('/v1/socio/search?q=mercearia&limit=50')).body;
    expect(all.count).toBeGreaterThan(2);
    expect((await get('/v1/socio/search?q=mercearia&limit=2')).body.results).toEqual(all.results.slice(0, 2));
    const raw = (c: string) => c.replace(/[./-]/g, '');
    for (let i = 1; i < all.results.length; i++) { // score descending, ties by CNPJ
      const [a, b] = [all.results[i - 1], all.results[i]];
      expect(a.score > b.score || (a.score === b.score && raw(a.cnpj) < raw(b.cnpj)), `${a.cnpj} ${a.score} / ${b.cnpj} ${b.score}`).toBe(true);
    }
  });

  test('bad parameters → 400 naming them', async () => {
    for (const [p, name] of [['q=ab', 'q'], ['q=%20%20ab%20', 'q'], ['', 'q'], ['q=abc&limit=51', 'limit'], ['q=abc&limit=0', 'limit'], ['q=abc&uf=XX', 'uf'],
      ['q=abc&situacao=ativo', 'situacao'], ['q=abc&cnae=0115600', 'cnae'], ['q=abc&as_of=2026-02-30', 'as_of']]) {
      expect(expectEnvelope(await get(`/v1/socio/search?${p}`), 400, 'invalid_request').message, p).toMatch(new RegExp(`^${name}\\b`));
    }
  });

  test('the search predicates are the ones the pipeline\'s trigram indexes serve', async () => {
    const c = await db.pool.connect();
    try {
      await c.query('BEGIN');
      await c.query('SET LOCAL enable_seqscan = off'); // a 2,000-row month is too small to prefer an index by itself
      for (const [rel, col, ix] of [['cnpj_empresas', 'razao_social', 'razao_trgm'], ['cnpj_estabelecimentos', 'nome_fantasia', 'fantasia_trgm']]) {
        const plan = (await c.query(`EXPLAIN SELECT 1 FROM snap.${rel}__s${next.snapshot_id} WHERE 'agropecuaria' <% etl.cnpj_busca(${col})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
        expect(plan, plan).toMatch(new RegExp(`Bitmap Index Scan on \\S*${ix}`));
      }
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  });
});

describe('GET /v1/car/by-document/{cnpj}: titular', () => {
  test("a CNPJ's holder is Receita's legal name of the month read", async () => {
    const r = await get(`/v1/car/by-document/${encodeURIComponent(ALNUM_MASKED)}`);
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ titular: 'AGROPECUÁRIA SÃO JOSÉ LTDA', count: 1 });
    expect(r.body.snapshots['receita-cnpj']).toBe(next.snapshot_id);
    // a CNPJ Receita does not have keeps the declared name
    expect((await get('/v1/car/by-document/45723174000110')).body.titular).toBe('Agropecuária Boa Vista Ltda');
  });
});

describe('as_of on a month retention dropped', () => {
  test('a 404 naming the dropped month and the months kept, never the older kept month', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'socio-history-'));
    try {
      // September backfilled and kept (a historical series); November loaded again (other bytes)
      await buildReceitaMonth(root, '2026-09', 'base');
      const sep = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: path.join(root, '2026-09'), asOf: '2026-09-01', backfill: true, force: true });
      expect(sep.status).toBe('loaded');
      await catalog.setKept(db.pool, sep.snapshot_id!, true);
      await buildReceitaMonth(root, '2026-11', 'next', { SOCIOCSV: [FOREIGN_PARTNER], EMPRECSV: [REPEATED_COMPANY] });
      const again = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: path.join(root, '2026-11') });
      expect(again.status).toBe('published');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
    // October goes: kept are the current month, the one rollback returns to and September
    expect(await applyRetention(db.pool, 'receita-cnpj', '', 1)).toEqual([octoberId]);
    for (const p of [`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2026-10-20`, `/v1/socio/cpf/${encodeURIComponent(SHARED_MASKED_CPF)}?as_of=2026-10-20`, '/v1/socio/search?q=agro&as_of=2026-10-20']) {
      const e = expectEnvelope(await get(p), 404, 'not_found');
      expect(e.message, p).toMatch(new RegExp(`month current on 2026-10-20 \\(snapshot ${octoberId}, as of 2026-10-01\\) was dropped by retention`));
      expect(e.message, p).toContain('available as-of dates: 2026-11-01, 2026-09-01');
    }
    // September itself still answers
    expect((await get(`/v1/socio/cnpj/${ALNUM.cnpj}?as_of=2026-09-15`)).body).toMatchObject({ as_of: '2026-09-01' });
  });
});
