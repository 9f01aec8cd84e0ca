// Copies of one CAR number: the most recently updated one is loaded (contract §3, "the most
// recently updated copy"). A dat_atuali after the release date is implausible: published as
// NULL, its text kept in `extra` (contract §3). It is no update date either when choosing the
// copy: a copy dated 01/01/2099 (a typo) won over the copy with the latest real date, and its
// values (area_total_ha) were published, with a NULL data_atualizacao. Real PostGIS, a real run.
import path from 'node:path';
import { expect, test } from 'vitest';
import { buildSicarState, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-duplicate-dates-');

test('a copy whose dat_atuali is after the release date does not win over the latest plausible copy', async () => {
  const fx = SICAR_FIXTURES.GO;
  const old = fx.areaImovel.find((r) => r.role === 'duplicate-old')!;
  const newer = fx.areaImovel.find((r) => r.role === 'duplicate-new')!;
  // A third copy, read last, dated in the future (after the release date: the zip's date, today).
  const typo = { ...old, id: 'GO5c', part: 2 as const, attributes: { ...old.attributes, num_area: 999, dat_atuali: '01/01/2099' } };
  const dir = path.join(tmp, 'GO');
  await buildSicarState('GO', dir, { themes: [], extraAreaImovel: [typo] });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO' });
  expect(out.error).toBeUndefined();
  const r = (await db.pool.query(`SELECT area_total_ha, data_atualizacao::text AS d, extra FROM "current".car_imovel WHERE car = $1`, [newer.attributes.cod_imovel])).rows;
  const [d, m, y] = newer.attributes.dat_atuali.split('/');
  expect(r).toEqual([{ area_total_ha: newer.attributes.num_area, d: `${y}-${m}-${d}`, extra: null }]);
  // Counted as a duplicate; not as an implausible date loaded as NULL: the copy that holds it is not loaded.
  const q = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.dropped).toMatchObject({ duplicate_car: 2 });
  expect(q.facts.dates.implausible).toBeUndefined();
});
