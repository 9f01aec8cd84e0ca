// /socio/search's statement (sql/0075_socio_busca_fast.sql: a walk in CNPJ order, then the
// trigram indexes at a raised threshold) against the definition it must equal, computed by
// brute force over the serving views: every establishment whose legal or trade name scores
// ≥ 0.5 (word similarity on etl.cnpj_busca), best score first, ties by CNPJ, at most `limit`.
// The month is the fixture month plus 12,000 companies in the official layout whose names
// come from a few words (as common words do nationally: thousands of names tie at one score),
// loaded by the pipeline, so the indexes are the pipeline's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildReceitaMonth } from '../fixtures/receita-cnpj.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import { buscaIn } from '../src/api/socio/sql.ts';
import { cnpjCheckDigits } from '../src/documents.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const N = 12_000;
const FIRST = ['JOSE', 'MARIA', 'ANTONIO', 'FRANCISCO', 'ANA', 'JOÃO', 'LUCIANA', 'CONCEIÇÃO', 'SEBASTIÃO', 'ANDRÉ', 'PAULO', 'MÁRCIA'];
const LAST = ['SILVA', 'SANTOS', 'OLIVEIRA', 'SOUZA', 'PEREIRA', 'LIMA', 'CARVALHO', 'GONÇALVES', 'ARAÚJO', 'RIBEIRO', 'FERREIRA', 'ALMEIDA'];
const ACT = ['AGROPECUÁRIA', 'COMÉRCIO', 'TRANSPORTES', 'CONSTRUÇÃO', 'SERVIÇOS', 'INDÚSTRIA', 'FAZENDA', 'ALIMENTAÇÃO'];
const UFS: [string, string][] = [['SP', '7107'], ['MT', '9067'], ['GO', '9373'], ['PR', '7535']];
const CNAES = ['0115600', '0111302', '0151201', '4930202', '4755502'];

const q = (f: (string | number)[]) => f.map((x) => `"${x}"`).join(';');
const hash = (i: number, salt: number) => ((Math.imul(i + 1, 2654435761) ^ Math.imul(salt, 40503)) >>> 0) % 1000;

function rows(): { EMPRECSV: string[]; ESTABELE: string[] } {
  const empresas: string[] = [];
  const estabelecimentos: string[] = [];
  for (let i = 0; i < N; i++) {
    const basico = String(30_000_000 + i);
    const mei = hash(i, 1) < 500;
    const name = mei ? `${FIRST[i % 12]} ${LAST[(i >> 3) % 12]} ${LAST[(i >> 5) % 12]}` : `${ACT[i % 8]} ${LAST[(i >> 2) % 12]} LTDA`;
    empresas.push(q([basico, name, mei ? '2135' : '2062', mei ? '50' : '49', '1000,00', '01', '']));
    // Some companies have two establishments (a branch), so CNPJ ties run across a company.
    for (const ordem of hash(i, 2) < 150 ? ['0001', '0002'] : ['0001']) {
      const [uf, mun] = UFS[hash(i, 3) % 4];
      const fantasia = hash(i, 4) < 400 ? `${ACT[(i >> 1) % 8]} ${LAST[i % 12]}` : '';
      estabelecimentos.push(q([basico, ordem, cnpjCheckDigits(basico + ordem), ordem === '0001' ? '1' : '2', fantasia, hash(i, 5) < 600 ? '02' : '08', '20200115', '00', '', '',
        '20150301', CNAES[hash(i, 6) % 5], '', 'RUA', 'A', '1', '', 'CENTRO', '01310100', uf, mun, '', '', '', '', '', '', '', '', '']));
    }
  }
  return { EMPRECSV: empresas, ESTABELE: estabelecimentos };
}

let db: TestDb;
let out: RunOutcome;
let root: string;

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'socio-search-'));
  await buildReceitaMonth(root, '2026-10', 'base', rows());
  db = await testDatabase();
  out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: root });
  expect(out.status).toBe('published');
}, 300_000);
afterAll(async () => {
  fs.rmSync(root, { recursive: true, force: true });
  await db?.drop();
});

interface Query { q: string; uf: string | null; situacao: string | null; cnae: string | null; limit: number }

/** The definition, by brute force: no index, no walk, no threshold steps. */
async function reference(o: Query): Promise<{ cnpj: string; score: number }[]> {
  const r = await db.pool.query(
    `SELECT cnpj, score FROM (
       SELECT s.cnpj, greatest(coalesce(word_similarity(etl.cnpj_busca($1), etl.cnpj_busca(e.razao_social)), 0),
                               coalesce(word_similarity(etl.cnpj_busca($1), etl.cnpj_busca(s.nome_fantasia)), 0))::float8 AS score
         FROM serving.cnpj_estabelecimentos s LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = s.cnpj_basico
        WHERE ($2::text IS NULL OR s.uf = $2) AND ($3::text IS NULL OR s.situacao_cadastral = $3) AND ($4::text IS NULL OR s.cnae_fiscal_principal = $4)) x
      WHERE score >= 0.5 ORDER BY score DESC, cnpj LIMIT $5`,
    [o.q, o.uf, o.situacao, o.cnae, o.limit],
  );
  return r.rows;
}

const QUERIES: Query[] = [
  // frequent exact words (answered by the walk's first rows scoring 1)
  { q: 'agropecuaria', uf: null, situacao: null, cnae: null, limit: 20 },
  { q: 'comercio silva', uf: 'SP', situacao: '02', cnae: null, limit: 50 },
  { q: 'JOSÉ', uf: null, situacao: null, cnae: null, limit: 1 },
  // two words of a legal name: a few hundred exact matches, sparse in the CNPJ order
  { q: 'maria santos', uf: null, situacao: null, cnae: null, limit: 20 },
  { q: 'andre goncalves', uf: 'MT', situacao: null, cnae: null, limit: 50 },
  { q: 'sebastiao araujo lima', uf: null, situacao: null, cnae: null, limit: 10 },
  // typos and partial words: the best score is below 1 and thousands tie at it
  { q: 'agropecuaria silv', uf: null, situacao: null, cnae: null, limit: 20 },
  { q: 'construcao ribeiro', uf: null, situacao: null, cnae: null, limit: 50 },
  { q: 'maria goncalvez', uf: null, situacao: null, cnae: '0115600', limit: 20 },
  { q: 'transportez', uf: 'GO', situacao: '08', cnae: null, limit: 5 },
  // rare words, selective filters, nothing at all
  { q: 'coracao', uf: null, situacao: null, cnae: null, limit: 20 },
  { q: 'fazenda', uf: 'PR', situacao: '08', cnae: '0151201', limit: 30 },
  { q: 'mercearia', uf: null, situacao: null, cnae: null, limit: 50 },
  { q: 'xyzzy qwerty', uf: null, situacao: null, cnae: null, limit: 20 },
];

describe('/socio/search statement', () => {
  it('equals the brute-force definition (score, ties by CNPJ, filters, limit) on a month full of ties', async () => {
    expect(out.rows_loaded).toBeGreaterThan(N);
    let withTies = 0;
    for (const o of QUERIES) {
      const want = await reference(o);
      const got = (await buscaIn(db.pool, out.snapshot_id!, o)).map((r) => ({ cnpj: r.cnpj, score: r.score }));
      expect(got, JSON.stringify(o)).toEqual(want);
      if (want.length > 1 && want[want.length - 1].score === want[0].score) withTies++;
    }
    expect(withTies).toBeGreaterThan(5); // the comparisons are about ties, not only about scores
  });

  it('a tie group larger than the limit is cut at the smallest CNPJs, and a smaller limit is a prefix', async () => {
    const big = await buscaIn(db.pool, out.snapshot_id!, { q: 'agropecuaria silv', uf: null, situacao: null, cnae: null, limit: 50 });
    for (const limit of [1, 7, 20]) {
      const small = await buscaIn(db.pool, out.snapshot_id!, { q: 'agropecuaria silv', uf: null, situacao: null, cnae: null, limit });
      expect(small).toEqual(big.slice(0, limit));
    }
  });
});
