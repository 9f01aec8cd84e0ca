// IBAMA's COD_MUNICIPIO was published as written: a code that lost a digit ('520870'), a letter
// O for a zero ('52O8707') reached the API as the term's municipality code, counted nowhere. The
// column is an IBGE code now (ibge_code): seven digits ('5208707.0', as a spreadsheet writes it,
// is 5208707); anything else is NULL with its text kept in extra and counted.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { IBAMA_TERMS, ibamaCsv } from '../fixtures/ibama-embargos.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ibama-municipio-codes-');

test('a municipality code that is not seven digits is NULL, its text kept in extra and counted; a spreadsheet\'s 5208707.0 is 5208707', async () => {
  const [a, b, c] = IBAMA_TERMS.filter((t) => t.role === 'filler' && t.row.SEQ_TAD && t.row.COD_MUNICIPIO);
  const codes = new Map([[a, '520870'], [b, '52O8707'], [c, ' 5208707.0 ']]);
  const terms = IBAMA_TERMS.map((t) => (codes.has(t) ? { ...t, row: { ...t.row, COD_MUNICIPIO: codes.get(t)! } } : t));
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');
  const row = async (seq: string) =>
    (await db.pool.query(`SELECT cod_municipio_ibge AS code, extra->>'cod_municipio_ibge' AS raw FROM "current".ibama_embargos WHERE seq_tad = $1`, [seq])).rows[0];
  expect(await row(a.row.SEQ_TAD)).toEqual({ code: null, raw: '520870' });
  expect(await row(b.row.SEQ_TAD)).toEqual({ code: null, raw: '52O8707' });
  expect(await row(c.row.SEQ_TAD)).toEqual({ code: '5208707', raw: null });
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.unparsed).toMatchObject({ cod_municipio_ibge: 2 });
  expect(q.facts.notes.join('\n')).toMatch(/cod_municipio_ibge: 2 value\(s\) are not 7-digit IBGE municipality codes/);
}, 120_000);
