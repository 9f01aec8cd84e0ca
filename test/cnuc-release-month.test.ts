// CNUC names a release by its month only (shp_cnuc_2024_10: SOURCES §1.8, §5.6), and the
// snapshot's as_of is that month's first day. Dates after as_of are implausible (contract §3):
// NULL, kept raw, counted. A unit created on 15 October 2024 is plausible in the October
// release (it was out during October): it was published with data_criacao NULL and counted as
// an implausible date. Now the source's own dates are checked against the release month's last
// day; the as_of stays the first; a date in the next month is still implausible.
import path from 'node:path';
import { expect, test } from 'vitest';
import { CNUC_FIXTURE, buildCnucZip, type CnucRow } from '../fixtures/cnuc-ucs.ts';
import { cnucDatesUntil, cnucUcs } from '../pipelines/cnuc-ucs/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'cnuc-month-');

const withCriaAno = (ids: Record<string, string>): CnucRow[] =>
  CNUC_FIXTURE.map((r) => (ids[r.id] ? { ...r, attributes: { ...r.attributes, cria_ano: ids[r.id] } } : r));

test('a date within the release month is kept; one after it is implausible; as_of is the month\'s first day', async () => {
  const [inMonth, after] = CNUC_FIXTURE.map((r) => r.id);
  const dir = path.join(tmp, 'release');
  await buildCnucZip(dir, { rows: withCriaAno({ [inMonth]: '15-10-2024', [after]: '03-11-2024' }), zipName: 'shp_cnuc_2024_10.zip' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnucUcs, { source: dir });
  expect(out).toMatchObject({ status: 'published', as_of: '2024-10-01' });
  const row = async (id: string) => {
    const code = CNUC_FIXTURE.find((r) => r.id === id)!.attributes.cd_cnuc;
    return (await db.pool.query(`SELECT data_criacao::text, extra FROM serving.cnuc_ucs WHERE codigo = $1`, [code])).rows[0];
  };
  expect(await row(inMonth)).toMatchObject({ data_criacao: '2024-10-15' });
  expect((await row(inMonth)).extra?.data_criacao).toBeUndefined();
  expect(await row(after)).toMatchObject({ data_criacao: null, extra: expect.objectContaining({ data_criacao: '03-11-2024' }) });
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.dates.implausible).toEqual({ data_criacao: 1 });
});

test('an --as-of given by the operator is the bound itself', async () => {
  const [inMonth] = CNUC_FIXTURE.map((r) => r.id);
  const dir = path.join(tmp, 'asof');
  await buildCnucZip(dir, { rows: withCriaAno({ [inMonth]: '15-10-2024' }), zipName: 'shp_cnuc_2024_10.zip' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnucUcs, { source: dir, asOf: '2024-10-10', force: true });
  expect(out.as_of).toBe('2024-10-10');
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.dates.implausible).toEqual({ data_criacao: 1 });
});

test('the bound: the release month\'s last day, not after today; an as_of not from the name is kept', () => {
  expect(cnucDatesUntil('shp_cnuc_2024_02.zip', '2024-02-01', '2026-11-24')).toBe('2024-02-29');
  expect(cnucDatesUntil('shp_cnuc_2024_10.zip', '2024-10-01', '2026-11-24')).toBe('2024-10-31');
  expect(cnucDatesUntil('shp_cnuc_2026_11.zip', '2026-11-01', '2026-11-24')).toBe('2026-11-24');
  expect(cnucDatesUntil('shp_cnuc_2024_10.zip', '2024-10-10', '2026-11-24')).toBe('2024-10-10');
  expect(cnucDatesUntil('ucs.zip', '2025-01-07', '2026-11-24')).toBe('2025-01-07');
});
