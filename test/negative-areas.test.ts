// An area of '-5' hectares was published as -5, counted nowhere (a fuzz audit of the fixtures):
// no land measures less than nothing. A source area column is an `area` now: a negative value is
// NULL with its text kept in extra and counted, as a value that is no number.
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
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'negative-areas-');

test('a negative embargoed area is NULL, its text kept in extra and counted; zero and Brazilian decimals load', async () => {
  const [a, b, c] = IBAMA_TERMS.filter((t) => t.role === 'filler' && t.row.SEQ_TAD);
  const areas = new Map([[a, '-5'], [b, '0'], [c, '12,5']]);
  const terms = IBAMA_TERMS.map((t) => (areas.has(t) ? { ...t, row: { ...t.row, QTD_AREA_EMBARGADA: areas.get(t)! } } : t));
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');
  const row = async (seq: string) =>
    (await db.pool.query(`SELECT area_embargada_ha AS ha, extra->>'area_embargada_ha' AS raw FROM "current".ibama_embargos WHERE seq_tad = $1`, [seq])).rows[0];
  expect(await row(a.row.SEQ_TAD)).toEqual({ ha: null, raw: '-5' });
  expect(await row(b.row.SEQ_TAD)).toEqual({ ha: 0, raw: null });
  expect(await row(c.row.SEQ_TAD)).toEqual({ ha: 12.5, raw: null });
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.unparsed).toMatchObject({ area_embargada_ha: 1 });
  expect(q.facts.notes.join('\n')).toMatch(/area_embargada_ha: 1 value\(s\) are not numbers, or negative areas/);
}, 120_000);
