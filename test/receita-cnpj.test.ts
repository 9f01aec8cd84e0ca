// receita-cnpj: the official-layout fixture month (fixtures/receita-cnpj.ts: the real sample
// rows of fixtures/samples/receita-cnpj/ plus labelled synthetic rows) loaded end to end.
// Expectations are computed from the sample files with csv-parse (the reference reader) and
// the rules of SOURCES §10 written out here, never from the pipeline's own output.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALNUM, buildReceitaMonth, RECEITA_FIXTURE_MONTH, ENTERING_PARTNER, LEAVING_PARTNER, RECEITA_FIXTURE_ROOT, SAMPLES_DIR, SHARED_CPF_PARTNERS, SHARED_MASKED_CPF, sampleLines, writeZip,
} from '../fixtures/receita-cnpj.ts';
import { ibgeMunicipios } from '../pipelines/ibge-municipios/index.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import { datesBound, referenceDate } from '../pipelines/receita-cnpj/reference-date.ts';
import { RELATIONS } from '../pipelines/receita-cnpj/relations.ts';
import { cnpjCheckDigits, isValidCnpj } from '../src/documents.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { applyRetention } from '../src/etl/publish.ts';
import { fixtureRuns } from '../src/cli/main.ts';
import { createHash } from 'node:crypto';
import { ROOT_DIR } from '../src/sql.ts';
import { createPool } from '../src/db/pool.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

/** A sample file read by the reference parser (latin1, `;`, quoted, no header). */
const sample = (file: string): string[][] =>
  parse(fs.readFileSync(path.join(SAMPLES_DIR, file)).toString('latin1'), { delimiter: ';', quote: '"', relax_column_count: false }) as string[][];

const nul = (s: string) => (s.trim() === '' ? null : s.trim());
const date = (s: string) => (/^\d{8}$/.test(s) && s !== '00000000' ? `${s.slice(0, 4)}-${s.slice(4, 6)}-${s.slice(6)}` : null);

let db: TestDb;
let first: RunOutcome;
const run = (source: string, extra: object = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source, ...extra });
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;

beforeAll(async () => {
  db = await testDatabase({ AGRO_CNPJ_PROGRESS_MS: '100' });
  // The municipality crosswalk needs the IBGE list.
  const ibge = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibgeMunicipios, { source: path.join(ROOT_DIR, 'fixtures', 'ibge-municipios') });
  expect(ibge.status).toBe('published');
  first = await run(RECEITA_FIXTURE_ROOT);
}, 240_000);
afterAll(async () => db?.drop());

describe('receita-cnpj fixture month', () => {
  it('publishes the newest month folder with as_of = its first day', () => {
    expect(first.status).toBe('published');
    expect(first.as_of).toBe('2026-10-01');
    expect(first.gate?.passed).toBe(true);
  });

  it('the templates have exactly the declared columns, in order', async () => {
    for (const rel of RELATIONS) {
      const cols = await q(
        `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
        [`snap.${rel.name}__template`],
      );
      expect(cols.map((c) => c.attname), rel.name).toEqual(rel.columns.map((c) => c.name));
    }
  });

  it('maps every real establishment field by field', async () => {
    const rows = sample('ESTABELE.csv');
    const got = new Map((await q(`SELECT * FROM serving.cnpj_estabelecimentos`)).map((r) => [r.cnpj, r]));
    expect(got.size).toBe(rows.length + 1); // + the synthetic alphanumeric one
    for (const f of rows) {
      const r = got.get(f[0] + f[1] + f[2]);
      expect(r, f.slice(0, 3).join('')).toBeDefined();
      const cep = f[18].length === 7 ? '0' + f[18] : nul(f[18]);
      expect({
        cnpj_basico: r.cnpj_basico, cnpj_ordem: r.cnpj_ordem, cnpj_dv: r.cnpj_dv, identificador_matriz_filial: r.identificador_matriz_filial,
        nome_fantasia: r.nome_fantasia, situacao_cadastral: r.situacao_cadastral, data_situacao_cadastral: r.data_situacao_cadastral,
        motivo_situacao_cadastral: r.motivo_situacao_cadastral, nome_cidade_exterior: r.nome_cidade_exterior, pais: r.pais,
        data_inicio_atividade: r.data_inicio_atividade, cnae_fiscal_principal: r.cnae_fiscal_principal, cnae_fiscal_secundaria: r.cnae_fiscal_secundaria,
        tipo_logradouro: r.tipo_logradouro, logradouro: r.logradouro, numero: r.numero, complemento: r.complemento, bairro: r.bairro, cep: r.cep,
        uf: r.uf, municipio: r.municipio, ddd_1: r.ddd_1, telefone_1: r.telefone_1, ddd_2: r.ddd_2, telefone_2: r.telefone_2, ddd_fax: r.ddd_fax,
        fax: r.fax, correio_eletronico: r.correio_eletronico, situacao_especial: r.situacao_especial, data_situacao_especial: r.data_situacao_especial,
      }).toEqual({
        cnpj_basico: f[0], cnpj_ordem: f[1], cnpj_dv: f[2], identificador_matriz_filial: f[3], nome_fantasia: nul(f[4]), situacao_cadastral: f[5],
        data_situacao_cadastral: date(f[6]), motivo_situacao_cadastral: nul(f[7]), nome_cidade_exterior: nul(f[8]), pais: nul(f[9]),
        data_inicio_atividade: date(f[10]), cnae_fiscal_principal: f[11], cnae_fiscal_secundaria: f[12] ? f[12].split(',') : null,
        tipo_logradouro: nul(f[13]), logradouro: nul(f[14]), numero: nul(f[15]), complemento: nul(f[16]), bairro: nul(f[17]), cep,
        uf: f[19], municipio: nul(f[20]), ddd_1: nul(f[21]), telefone_1: nul(f[22]), ddd_2: nul(f[23]), telefone_2: nul(f[24]), ddd_fax: nul(f[25]),
        fax: nul(f[26]), correio_eletronico: nul(f[27]), situacao_especial: nul(f[28]), data_situacao_especial: date(f[29]),
      });
      expect(isValidCnpj(r.cnpj)).toBe(true);
    }
  });

  it('maps every real company, cutting the owner CPF off MEI/EI legal names (kept masked)', async () => {
    const rows = sample('EMPRECSV.csv');
    const got = new Map((await q(`SELECT * FROM serving.cnpj_empresas`)).map((r) => [r.cnpj_basico, r]));
    let withCpf = 0;
    for (const f of rows) {
      const r = got.get(f[0]);
      const m = /^(.*\D) (\d{11})$/.exec(f[1]);
      if (m) withCpf++;
      expect({ ...r, snapshot_id: undefined }).toEqual({
        cnpj_basico: f[0], razao_social: m ? m[1].trim() : f[1], natureza_juridica: f[2], qualificacao_responsavel: f[3],
        capital_social: Number(f[4].replace(/\./g, '').replace(',', '.')), porte: nul(f[5]), ente_federativo_responsavel: nul(f[6]),
        cpf_titular_mascarado: m ? `***${m[2].slice(3, 9)}**` : null, snapshot_id: undefined,
      });
    }
    expect(withCpf).toBeGreaterThan(100);
    // No served legal name ends with 11 digits.
    expect((await q(`SELECT count(*)::int AS n FROM serving.cnpj_empresas WHERE razao_social ~ '\\d{11}$'`))[0].n).toBe(0);
  });

  it('maps every real partner and Simples row; latin1 accents round-trip in the lookups', async () => {
    const socios = sample('SOCIOCSV.csv');
    const got = await q(`SELECT * FROM serving.cnpj_socios`);
    for (const f of socios) {
      const matches = got.filter((r) => r.cnpj_basico === f[0] && r.nome_socio === nul(f[2]) && r.cnpj_cpf_do_socio === nul(f[3]) && r.qualificacao_socio === f[4]);
      expect(matches.length, `${f[0]} ${f[4]}`).toBeGreaterThanOrEqual(1);
      const r = matches[0];
      expect([r.identificador_de_socio, r.data_entrada_sociedade, r.pais, r.representante_legal, r.nome_do_representante, r.qualificacao_representante_legal, r.faixa_etaria, r.cpf_miolo])
        .toEqual([f[1], date(f[5]), nul(f[6]), nul(f[7]), nul(f[8]), nul(f[9]), Number(f[10]), /^\*{3}\d{6}\*{2}$/.test(f[3]) ? f[3].slice(3, 9) : null]);
    }
    const simples = sample('SIMPLESCSV.csv');
    const s = new Map((await q(`SELECT * FROM serving.cnpj_simples`)).map((r) => [r.cnpj_basico, r]));
    expect(s.size).toBe(simples.length);
    for (const f of simples) {
      const r = s.get(f[0]);
      expect([r.opcao_pelo_simples, r.data_opcao_simples, r.data_exclusao_simples, r.opcao_mei, r.data_opcao_mei, r.data_exclusao_mei])
        .toEqual([nul(f[1]), date(f[2]), date(f[3]), nul(f[4]), date(f[5]), date(f[6])]);
    }
    const cnae = await q(`SELECT descricao FROM serving.cnpj_cnaes WHERE codigo = '0112101'`);
    expect(cnae[0].descricao).toBe('Cultivo de algodão herbáceo');
    const nat = await q(`SELECT descricao FROM serving.cnpj_naturezas WHERE codigo = '3271'`);
    expect(nat[0].descricao).toBe('Órgão de Direção Local de Partido Político');
    expect((await q(`SELECT count(*)::int AS n FROM serving.cnpj_municipios`))[0].n).toBe(sample('MUNICCSV.csv').length);
  });

  it('loads the alphanumeric CNPJ and finds it by CNPJ and by accent-insensitive name', async () => {
    expect(isValidCnpj(ALNUM.cnpj)).toBe(true);
    const e = await q(`SELECT * FROM serving.cnpj_estabelecimentos WHERE cnpj = $1`, [ALNUM.cnpj]);
    expect(e).toHaveLength(1);
    expect(e[0]).toMatchObject({ cnpj_basico: '12ABC345', cnpj_ordem: '01DE', cnpj_dv: '35', nome_fantasia: 'FAZENDA CORAÇÃO', cep: '01310100', municipio: '7107', municipio_nome: 'SAO PAULO', codigo_municipio_ibge: '3550308' });
    const found = await q(
      `SELECT e.cnpj_basico, similarity(etl.cnpj_busca(e.razao_social), etl.cnpj_busca($1)) AS score
         FROM serving.cnpj_empresas e WHERE etl.cnpj_busca(e.razao_social) % etl.cnpj_busca($1) ORDER BY score DESC LIMIT 3`,
      ['agropecuaria sao jose'],
    );
    expect(found[0].cnpj_basico).toBe(ALNUM.basico);
    const ix = await q(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'snap' AND tablename LIKE 'cnpj_%__s' || $1`, [String(first.snapshot_id)]);
    const defs = ix.map((i) => i.indexdef).join('\n');
    expect(defs).toMatch(/gin \(etl\.cnpj_busca\(razao_social\) gin_trgm_ops\)/);
    expect(defs).toMatch(/gin \(etl\.cnpj_busca\(nome_fantasia\) gin_trgm_ops\)/);
    expect(defs).toMatch(/\(cpf_miolo\)/);
  });

  it('keeps every partner sharing one masked CPF in a company, with distinct keys; /socio/cpf digits indexed', async () => {
    const rows = await q(`SELECT nome_socio, socio_chave, cpf_miolo FROM serving.cnpj_socios WHERE cnpj_basico = $1 AND cnpj_cpf_do_socio = $2 ORDER BY nome_socio`, [ALNUM.basico, SHARED_MASKED_CPF]);
    expect(rows.map((r) => r.nome_socio)).toEqual([...SHARED_CPF_PARTNERS]);
    expect(new Set(rows.map((r) => r.socio_chave)).size).toBe(2);
    expect(rows.every((r) => r.cpf_miolo === '123456')).toBe(true);
  });

  it('counts the malformed row, orphan codes, padded CEPs and the crosswalk in the report', async () => {
    const quality = (await q(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [first.snapshot_id]))[0].quality;
    const c = quality.facts.cnpj;
    expect(quality.facts.rejected).toEqual({ malformed_row: 1 });
    expect(c.familias.socios.malformadas).toBe(1);
    // The report's counts add up over every family; the snapshot's rows are its establishments.
    expect(quality.counts.read).toBe(quality.counts.loaded + quality.counts.rejected);
    expect(quality.counts.rejected).toBe(1);
    const tableRows = (await q(`SELECT (SELECT count(*) FROM snap.${'cnpj_estabelecimentos__s' + first.snapshot_id})::int AS est`))[0];
    expect(quality.change.rows).toBe(tableRows.est);
    expect((await q(`SELECT rows FROM etl.snapshots WHERE snapshot_id = $1`, [first.snapshot_id]))[0].rows).toBe(tableRows.est);
    expect(quality.counts.loaded).toBeGreaterThan(tableRows.est);
    expect(c.familias.empresas.arquivos).toHaveLength(10);
    expect(c.familias.empresas.arquivos[3]).toEqual({ arquivo: 'Empresas3.zip', membros: ['K3241.K03200Y3.D61011.EMPRECSV'], linhas: 200 });
    expect(c.familias.empresas.arquivos.reduce((a: number, f: { linhas: number }) => a + f.linhas, 0)).toBe(sample('EMPRECSV.csv').length + 1);
    expect(c.familias.socios.amostras_malformadas[0]).toMatchObject({ fields: 10 });
    expect(c.orfaos.motivo.codigos).toContain('32');
    expect(c.cep_sem_zero_inicial).toBe(sample('ESTABELE.csv').filter((f) => f[18].length === 7).length + 1);
    expect(c.cnpj_alfanumerico).toBe(1);
    expect(c.municipios.ibge_carregado).toBe(true);
    expect(c.municipios.casados).toBeGreaterThanOrEqual(4); // São Paulo, Cuiabá, Brasília, Sorriso at least
    expect(c.municipios.sem_par).toBeGreaterThan(0);
    expect(quality.source.files).toHaveLength(37);
    for (const f of quality.source.files) expect(f.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it("uf 'EX' (abroad) is a valid value: every such establishment of the sample is served with it, the city abroad as published, no IBGE code", async () => {
    const abroad = sample('ESTABELE.csv').filter((f) => f[19] === 'EX');
    expect(abroad.length).toBeGreaterThan(0);
    const rows = await q(`SELECT cnpj, uf, nome_cidade_exterior, pais, codigo_municipio_ibge FROM serving.cnpj_estabelecimentos WHERE uf = 'EX' ORDER BY cnpj`);
    expect(rows).toEqual(abroad.map((f) => ({ cnpj: f[0] + f[1] + f[2], uf: 'EX', nome_cidade_exterior: nul(f[8]), pais: nul(f[9]), codigo_municipio_ibge: null })).sort((a, b) => (a.cnpj < b.cnpj ? -1 : 1)));
  });

  it('serving.ref_municipio carries the Receita TOM code the crosswalk matched (cod_municipio_rf)', async () => {
    const matched = await q(`SELECT codigo, codigo_ibge FROM serving.cnpj_municipios WHERE codigo_ibge IS NOT NULL ORDER BY codigo_ibge`);
    expect(matched.length).toBeGreaterThanOrEqual(4);
    const ref = await q(`SELECT geocodigo, cod_municipio_rf FROM serving.ref_municipio ORDER BY geocodigo`);
    const byIbge = new Map(matched.map((m) => [m.codigo_ibge, m.codigo]));
    for (const r of ref) expect([r.geocodigo, r.cod_municipio_rf]).toEqual([r.geocodigo, byIbge.get(r.geocodigo) ?? null]);
    expect(ref.find((r) => r.geocodigo === '3550308')?.cod_municipio_rf).toBe('7107'); // São Paulo (hand-checked)
  });

  it('an unchanged month is unchanged', async () => {
    const again = await run(RECEITA_FIXTURE_ROOT);
    expect(again.status).toBe('unchanged');
    expect(again.snapshot_id).toBe(first.snapshot_id);
  });
});

describe('receita-cnpj month over month', () => {
  let root: string;
  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-months-'));
    await buildReceitaMonth(root, '2026-10', 'base');
    await buildReceitaMonth(root, '2026-11', 'next');
  });
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

  it('diffs the partner lists: who entered and who left', async () => {
    const next = await run(root);
    expect(next.status).toBe('published');
    expect(next.as_of).toBe('2026-11-01');
    const changes = await q(`SELECT * FROM derived.cnpj_qsa_changes WHERE snapshot_id = $1`, [next.snapshot_id]);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ previous_snapshot_id: first.snapshot_id, cnpj_basico: ALNUM.basico });
    expect(changes[0].entraram.map((p: { nome_socio: string }) => p.nome_socio)).toEqual([ENTERING_PARTNER]);
    expect(changes[0].sairam.map((p: { nome_socio: string }) => p.nome_socio)).toEqual([LEAVING_PARTNER]);
    expect(changes[0].sairam[0].cnpj_cpf_do_socio).toBe('***654321**');
  });

  it('blocks a month whose legal names arrive empty; the previous month stays served', async () => {
    await buildReceitaMonth(root, '2026-12', 'empty-names');
    const bad = await run(root);
    expect(bad.status).toBe('blocked');
    expect(bad.gate?.failures.map((f) => f.rule)).toContain('cnpj_empty_names');
    const served = await q(`SELECT DISTINCT snapshot_id FROM serving.cnpj_empresas`);
    expect(served.map((r) => Number(r.snapshot_id))).not.toContain(bad.snapshot_id);
    expect((await q(`SELECT count(*)::int AS n FROM serving.cnpj_empresas WHERE razao_social IS NULL`))[0].n).toBe(0);
  });

  it('retention that drops a month drops its partner-list diff too; the kept months keep theirs', async () => {
    await buildReceitaMonth(root, '2027-01', 'base');
    const c = await run(root);
    await buildReceitaMonth(root, '2027-02', 'next');
    const d = await run(root);
    expect([c.status, d.status]).toEqual(['published', 'published']);
    const diffs = async () => (await q(`SELECT snapshot_id::int AS id, count(*)::int AS n FROM derived.cnpj_qsa_changes GROUP BY 1 ORDER BY 1`)).map((r) => [r.id, r.n]);
    const nov = (await q(`SELECT snapshot_id::int AS id FROM etl.snapshots WHERE dataset = 'receita-cnpj' AND as_of = '2026-11-01'`))[0].id;
    expect(await diffs()).toEqual(expect.arrayContaining([[nov, 1], [c.snapshot_id, 1], [d.snapshot_id, 1]]));
    // Keep one: the current month (2027-02) and what rollback returns to (2027-01) stay.
    const dropped = await applyRetention(db.pool, 'receita-cnpj', '', 1);
    expect(dropped).toContain(nov);
    expect((await q(`SELECT status FROM etl.snapshots WHERE snapshot_id = $1`, [nov]))[0].status).toBe('dropped');
    const left = await diffs();
    expect(left).toEqual(expect.arrayContaining([[c.snapshot_id, 1], [d.snapshot_id, 1]]));
    expect(left.map(([id]) => id)).not.toContain(nov);
    // What is left belongs to snapshots retention kept (the latest blocked month has its own rule).
    const live = (await q(`SELECT snapshot_id::int AS id FROM etl.snapshots WHERE dataset = 'receita-cnpj' AND status <> 'dropped'`)).map((r) => r.id);
    for (const [id] of left) expect(live).toContain(id);
  });
});

describe('receita-cnpj: a broken companies file', () => {
  it('fails the run cleanly (the other families do not wait for the companies forever); the published month stays', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-broken-'));
    try {
      await buildReceitaMonth(root, '2027-06', 'base');
      const zip = new yazl.ZipFile();
      zip.addBuffer(Buffer.from('"x";"y"\n', 'latin1'), 'LEIAME.TXT');
      zip.end();
      await pipeline(zip.outputStream, fs.createWriteStream(path.join(root, '2027-06', 'Empresas3.zip')));
      const before = (await q(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'receita-cnpj'`))[0].id;
      const out = await run(root);
      expect(out.status).toBe('failed');
      expect(out.error?.code).toBe('malformed_source');
      expect(out.error?.message).toMatch(/Empresas3\.zip holds no member/);
      expect((await q(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'receita-cnpj'`))[0].id).toBe(before);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('receita-cnpj: CPFs in trade names and other served names', () => {
  // Real-layout rows: real MEI/EI companies of the samples (legal name "NAME 12345678901")
  // given an establishment whose trade name repeats that text as owners type it (as is,
  // CPF first, CPF punctuated after a dash), and a legal-entity partner with such a name.
  const meis = sample('EMPRECSV.csv').filter((f) => /^.*\D \d{11}$/.test(f[1])).slice(0, 30);
  const template = sample('ESTABELE.csv')[0];
  const q1 = (f: string[]) => f.map((x) => `"${x}"`).join(';');
  const tradeName = (razao: string, i: number) => {
    const [, name, cpf] = /^(.*\D) (\d{11})$/.exec(razao)!;
    return [razao, `${cpf} ${name}`, `${name} - ${cpf.slice(0, 3)}.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-${cpf.slice(9)}`][i % 3];
  };
  const establishments = meis.map((f, i) => {
    const e = [...template];
    e[0] = f[0];
    e[1] = '0009';
    e[2] = cnpjCheckDigits(f[0] + '0009');
    e[3] = '2';
    e[4] = tradeName(f[1], i);
    return q1(e);
  });
  const partner = q1([meis[0][0], '1', meis[1][1], '00000000000191', '22', '20210301', '', '***000000**', '', '00', '0']);
  // A partner who entered after the month's last day: an implausible date (contract §3).
  const latePartner = q1([meis[2][0], '2', 'MARIA DA SILVA', '***123456**', '49', '20990101', '', '***000000**', '', '00', '0']);
  let fresh: TestDb;
  let out: RunOutcome;
  let root: string;
  beforeAll(async () => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-cpf-names-'));
    await buildReceitaMonth(root, RECEITA_FIXTURE_MONTH, 'base', { ESTABELE: establishments, SOCIOCSV: [partner, latePartner] });
    fresh = await testDatabase();
    out = await runPipeline({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log }, receitaCnpj, { source: root });
  }, 240_000);
  afterAll(async () => {
    fs.rmSync(root, { recursive: true, force: true });
    await fresh?.drop();
  });

  it('serves the trade name without the owner CPF, counted in the report', async () => {
    expect(out.status).toBe('published');
    const got = new Map((await fresh.pool.query(`SELECT cnpj, nome_fantasia FROM serving.cnpj_estabelecimentos WHERE cnpj_ordem = '0009' AND cnpj_basico = ANY ($1)`, [meis.map((f) => f[0])])).rows.map((r) => [r.cnpj, r.nome_fantasia]));
    expect(got.size).toBe(meis.length);
    meis.forEach((f, i) => {
      const [, name, cpf] = /^(.*\D) (\d{11})$/.exec(f[1])!;
      const masked = `***.${cpf.slice(3, 6)}.${cpf.slice(6, 9)}-**`;
      expect(got.get(f[0] + '0009' + cnpjCheckDigits(f[0] + '0009')), tradeName(f[1], i)).toBe([name, `${masked} ${name}`, name][i % 3]);
    });
    const quality = (await fresh.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].quality;
    expect(quality.facts.cnpj.cpf_em_nomes.nome_fantasia).toBe(meis.length);
    expect(quality.facts.cnpj.cpf_em_nomes.nome_socio).toBe(1);
    expect(quality.facts.cnpj.cpf_em_nomes.razao_social).toBe(quality.facts.cnpj.cpf_no_nome_removido);
    expect(quality.facts.notes.join('\n')).toMatch(/CPF-looking numbers in served names: .*nome_fantasia ×30/);
  });

  it('a date after the month is published as NULL, its text kept in extra, counted and noted in the report', async () => {
    const row = (await fresh.pool.query(`SELECT data_entrada_sociedade, extra FROM "current".cnpj_socios WHERE cnpj_basico = $1 AND nome_socio = 'MARIA DA SILVA'`, [meis[2][0]])).rows;
    expect(row).toHaveLength(1);
    expect(row[0].data_entrada_sociedade).toBeNull();
    expect(JSON.stringify(row[0].extra)).toContain('20990101');
    const quality = (await fresh.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].quality;
    expect(quality.facts.dates.implausible).toEqual({ data_entrada_sociedade: 1 });
    expect(quality.facts.notes.join('\n')).toMatch(/dates before 1800 or after the reference date of the member names \(D61011\) 2026-10-11 loaded as NULL \(text kept in extra\): \{"data_entrada_sociedade":1\}/);
  });

  it('no served name field of a company, establishment or partner holds an 11-digit run', async () => {
    const run11 = `'(^|[^0-9])[0-9]{3}\\.?[0-9]{3}\\.?[0-9]{3}-?[0-9]{2}([^0-9]|$)'`;
    for (const [view, col] of [['cnpj_empresas', 'razao_social'], ['cnpj_estabelecimentos', 'nome_fantasia'], ['cnpj_socios', 'nome_socio'], ['cnpj_socios', 'nome_do_representante']]) {
      const n = (await fresh.pool.query(`SELECT count(*)::int AS n FROM serving.${view} WHERE ${col} ~ ${run11}`)).rows[0].n;
      expect(n, `${view}.${col}`).toBe(0);
    }
    const p = (await fresh.pool.query(`SELECT nome_socio FROM serving.cnpj_socios WHERE cnpj_basico = $1 AND identificador_de_socio = '1'`, [meis[0][0]])).rows;
    expect(p.map((r) => r.nome_socio)).toContain(/^(.*\D) \d{11}$/.exec(meis[1][1])![1]);
  });
});

describe("receita-cnpj: dates after the month's reference date (the D<YMMDD> of its member names, SOURCES §10.2)", () => {
  // Partners of a real sample company who entered on, before and after the reference date
  // 2026-10-11 (D61011) of fixture month 2026-10: the month's data cannot hold a later date.
  const basico = sample('EMPRECSV.csv')[0][0];
  const q1 = (f: string[]) => f.map((x) => `"${x}"`).join(';');
  const partner = (name: string, entered: string) => q1([basico, '2', name, '***123456**', '49', entered, '', '***000000**', '', '00', '0']);
  const PARTNERS = [partner('ANTES DA REFERENCIA', '20261005'), partner('NA REFERENCIA', '20261011'), partner('DEPOIS DA REFERENCIA', '20261020')];
  const entered = async (t: TestDb) => Object.fromEntries((await t.pool.query(
    `SELECT nome_socio, data_entrada_sociedade::text AS d, extra FROM "current".cnpj_socios WHERE cnpj_basico = $1 AND nome_socio LIKE '%REFERENCIA'`, [basico],
  )).rows.map((r) => [r.nome_socio, { d: r.d, extra: r.extra }]));
  const quality = async (t: TestDb, sid: number) => (await t.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [sid])).rows[0].quality;

  it('reads the code as the latest year with that last digit up to the folder; plausible in the folder month or the month before; the latest wins', () => {
    expect(referenceDate('D40810', '2024-08')).toBe('2024-08-10');
    expect(referenceDate('D40731', '2024-08')).toBe('2024-07-31'); // extracted the month before
    expect(referenceDate('D91231', '2030-01')).toBe('2029-12-31'); // across a decade
    expect(referenceDate('D40630', '2024-08')).toBeNull(); // two months before
    expect(referenceDate('D40901', '2024-08')).toBeNull(); // after the folder's month
    expect(referenceDate('D50810', '2024-08')).toBeNull(); // 2015
    expect(referenceDate('D40231', '2024-02')).toBeNull(); // no calendar date
    const members = ['K3241.K03200Y0.D40810.EMPRECSV', 'F.K03200$W.SIMPLES.CSV.D40812', 'F.K03200$Z.D40810.CNAECSV', 'LEIAME.TXT'];
    expect(datesBound(members, '2024-08', '2024-08-01')).toEqual({ data: '2024-08-12', origem: 'data_de_referencia', referencias: ['2024-08-10', '2024-08-12'], recusadas: [] });
    // A forced earlier --as-of keeps its own bound (the last day of its month).
    expect(datesBound(members, '2024-08', '2024-07-01')).toMatchObject({ data: '2024-07-31', origem: 'fim_do_mes' });
    expect(datesBound(['LEIAME.TXT'], '2024-08', '2024-08-01')).toEqual({ data: '2024-08-31', origem: 'fim_do_mes', referencias: [], recusadas: [] });
  });

  it('a date after the reference date, within the month, is NULL with its text kept and counted; one on or before it is kept; members that disagree: the latest', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-reference-'));
    const fresh = await testDatabase();
    try {
      await buildReceitaMonth(root, RECEITA_FIXTURE_MONTH, 'base', { SOCIOCSV: PARTNERS });
      // One lookup extracted two days earlier (D61009): the month's bound is still the latest, the 11th.
      await writeZip(path.join(root, RECEITA_FIXTURE_MONTH, 'Motivos.zip'), 'F.K03200$Z.D61009.MOTICSV', sampleLines('MOTICSV.csv'));
      const out = await runPipeline({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log }, receitaCnpj, { source: root });
      expect(out.status).toBe('published');
      const got = await entered(fresh);
      expect(got['ANTES DA REFERENCIA'].d).toBe('2026-10-05');
      expect(got['NA REFERENCIA'].d).toBe('2026-10-11');
      expect(got['DEPOIS DA REFERENCIA'].d).toBeNull();
      expect(JSON.stringify(got['DEPOIS DA REFERENCIA'].extra)).toContain('20261020');
      const qy = await quality(fresh, out.snapshot_id!);
      expect(qy.facts.dates.implausible).toEqual({ data_entrada_sociedade: 1 });
      expect(qy.facts.cnpj.limite_datas).toEqual({ data: '2026-10-11', origem: 'data_de_referencia', referencias: ['2026-10-09', '2026-10-11'], recusadas: [] });
      expect(qy.facts.notes.join('\n')).toContain('dates before 1800 or after the reference date of the member names (D61011) 2026-10-11 loaded as NULL (text kept in extra): {"data_entrada_sociedade":1}');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
      await fresh.drop();
    }
  }, 120_000);

  it('member names without a reference date plausible for the month: the bound stays the month\'s last day, said in the facts and notes', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-reference-'));
    const fresh = await testDatabase();
    try {
      // D51011 reads as 2025-10-11: a year before folder 2026-10, not this month's extraction.
      await buildReceitaMonth(root, RECEITA_FIXTURE_MONTH, 'base', { SOCIOCSV: PARTNERS }, 'D51011');
      const out = await runPipeline({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log }, receitaCnpj, { source: root });
      expect(out.status).toBe('published');
      const got = await entered(fresh);
      expect(got['DEPOIS DA REFERENCIA'].d).toBe('2026-10-20');
      const qy = await quality(fresh, out.snapshot_id!);
      expect(qy.facts.dates.implausible ?? {}).toEqual({});
      expect(qy.facts.cnpj.limite_datas).toEqual({ data: '2026-10-31', origem: 'fim_do_mes', referencias: [], recusadas: ['D51011'] });
      expect(qy.facts.notes.join('\n')).toContain("no member name gives a reference date plausible for month 2026-10 (D51011 refused): dates are bounded by the month's last day 2026-10-31");
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
      await fresh.drop();
    }
  }, 120_000);
});

describe('receita-cnpj on a small pool', () => {
  it('loads with a pool of 4 connections (the run lock client included): parallelism fits the pool instead of deadlocking', async () => {
    const fresh = await testDatabase();
    const small = createPool(fresh.url, 4);
    try {
      const out = await runPipeline({ cfg: fresh.cfg, pool: small, log: fresh.log }, receitaCnpj, { source: path.join(ROOT_DIR, 'fixtures', 'receita-cnpj') });
      expect(out.status).toBe('published');
      expect(out.rows_loaded).toBeGreaterThan(0);
    } finally {
      await small.end();
      await fresh.drop();
    }
  }, 120_000);
});

describe('receita-cnpj committed fixture', () => {
  it('matches a fresh build byte for byte (rerun fixtures/receita-cnpj.ts if not) and is a fixture run', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-fresh-'));
    try {
      const fresh = await buildReceitaMonth(tmp, RECEITA_FIXTURE_MONTH, 'base');
      expect(fresh).toHaveLength(37);
      const hash = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex');
      for (const f of fresh) expect(hash(f), path.basename(f)).toBe(hash(path.join(RECEITA_FIXTURE_ROOT, RECEITA_FIXTURE_MONTH, path.basename(f))));
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    expect(fixtureRuns()).toContainEqual({ pipeline: 'receita-cnpj', source: RECEITA_FIXTURE_ROOT });
  });
});

describe('receita-cnpj: codes that arrive without their leading zeros (SOURCES §10.5, §1.3), a state in lower case', () => {
  it("situacao_cadastral '2' and porte '1' are served as '02' and '01' (the codes the API maps: 02 → ativa), TOM '1' as '0001', uf 'ro' as RO, counted; other codes as published", async () => {
    const q1 = (f: string[]) => f.map((x) => `"${x}"`).join(';');
    const [company] = sample('EMPRECSV.csv');
    const basico = '99887766';
    const emp = [...company];
    emp[0] = basico;
    emp[5] = '1';
    const est = [...sample('ESTABELE.csv')[0]];
    est[0] = basico;
    est[1] = '0001';
    est[2] = cnpjCheckDigits(basico + '0001');
    est[5] = '2';
    est[19] = 'ro';
    est[20] = '1'; // 0001 GUAJARA-MIRIM in the sample's Municipios
    const odd = [...est];
    odd[1] = '0002';
    odd[2] = cnpjCheckDigits(basico + '0002');
    odd[5] = '2A';
    odd[19] = 'RO';
    odd[20] = '0001';
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-codes-'));
    const fresh = await testDatabase();
    try {
      await buildReceitaMonth(root, RECEITA_FIXTURE_MONTH, 'base', { EMPRECSV: [q1(emp)], ESTABELE: [q1(est), q1(odd)] });
      const out = await runPipeline({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log }, receitaCnpj, { source: root });
      expect(out.status).toBe('published');
      const e = (await fresh.pool.query(`SELECT cnpj_ordem, situacao_cadastral, uf, municipio FROM serving.cnpj_estabelecimentos WHERE cnpj_basico = $1 ORDER BY 1`, [basico])).rows;
      expect(e).toEqual([
        { cnpj_ordem: '0001', situacao_cadastral: '02', uf: 'RO', municipio: '0001' },
        { cnpj_ordem: '0002', situacao_cadastral: '2A', uf: 'RO', municipio: '0001' },
      ]);
      // the padded code finds its municipality in the month's lookup
      const m = (await fresh.pool.query(`SELECT descricao FROM serving.cnpj_municipios WHERE codigo = '0001'`)).rows;
      expect(m).toEqual([{ descricao: 'GUAJARA-MIRIM' }]);
      const c = (await fresh.pool.query(`SELECT porte FROM serving.cnpj_empresas WHERE cnpj_basico = $1`, [basico])).rows;
      expect(c).toEqual([{ porte: '01' }]);
      const quality = (await fresh.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].quality;
      expect(quality.facts.cnpj.codigo_sem_zero_inicial).toEqual({ situacao_cadastral: 1, porte: 1, municipio: 1 });
      expect(quality.facts.cnpj.uf_em_minusculas).toBe(1);
      expect(quality.facts.notes.join('\n')).toContain("1 establishments' uf written in lower case: upper-cased");
      expect(quality.facts.cnpj.situacao_desconhecida).toBe(1); // '2A'
      expect(quality.facts.notes.join('\n')).toContain("codes that lost their leading zeros, left-padded (to 2: '2' is '02'; TOM municipality codes to 4: '643' is '0643'): municipio ×1, porte ×1, situacao_cadastral ×1");
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
      await fresh.drop();
    }
  }, 120_000);
});
