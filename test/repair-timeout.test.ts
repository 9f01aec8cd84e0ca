// SOURCES §1.10: repair row by row under a statement_timeout; a feature whose repair takes too
// long (the huge self-intersecting APP multipolygons of AM) is rejected and counted, never an
// aborted load. A FUNAI layer with one land whose ring zigzags over itself 40,000 times
// (MakeValid ~0.25 s) beside the fixture's bow-tie (well under a millisecond), loaded with a
// 25 ms repair timeout: the batch repair times out, the rows are repaired one by one, the
// bow-tie is repaired and loaded, the zigzag is rejected, counted, and not published.
import path from 'node:path';
import type { Polygon, Position } from 'geojson';
import { expect, test } from 'vitest';
import { FUNAI_FIXTURE, buildFunaiZip, type FunaiRow } from '../fixtures/funai-tis.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'repair-timeout-');

/** A ring of n points zigzagging across itself along 0.4° of longitude near (-50, -10). */
function zigzag(n: number): Polygon {
  const ring: Position[] = [];
  for (let i = 0; i < n; i++) ring.push([-50 + i * 0.00001, i % 4 < 2 ? (i % 2 ? -10.01 : -10) : -10.03 + (i % 3) * 0.015]);
  ring.push(ring[0]);
  return { type: 'Polygon', coordinates: [ring] };
}

test('a land whose repair outlasts the timeout is rejected and counted; the others load, the bow-tie repaired', async () => {
  const ti1 = FUNAI_FIXTURE[0];
  const heavy: FunaiRow = { ...ti1, id: 'TI9', geometry: zigzag(40_000), attributes: { ...ti1.attributes, gid: 109, terrai_cod: 90109, terrai_nom: 'Zigue-Zague' } };
  const dir = path.join(tmp, 'funai');
  await buildFunaiZip(dir, { rows: [...FUNAI_FIXTURE, heavy] });
  const out = await runPipeline({ cfg: { ...db.cfg, repairTimeoutMs: 25 }, pool: db.pool, log: db.log }, funaiTis, { source: dir, force: true });
  expect(out.error).toBeUndefined();
  // 6 read: the 4 lands, the dropped older copy, the rejected zigzag.
  expect(out).toMatchObject({ status: 'published', rows_read: 6, rows_loaded: 4, rows_dropped: 1, rows_rejected: 1 });
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.geometry).toMatchObject({ invalid: 2, repaired: 1, rejected: 1 });
  expect(q.facts.rejected).toEqual({ geometry_unrepairable: 1 });
  expect(q.facts.examples?.geometry_unrepairable?.[0]).toMatchObject({ values: expect.objectContaining({ codigo: '90109' }) });
  const codes = (await db.pool.query(`SELECT codigo, ST_IsValid(geom) AS valid FROM serving.funai_tis ORDER BY codigo`)).rows;
  expect(codes).toEqual(['90101', '90102', '90103', '90104'].map((codigo) => ({ codigo, valid: true })));
});
