// A state folder zipped whole as <UF>_AREA_IMOVEL.zip (the manual-drop path): a theme's
// shapefile beside AREA_IMOVEL's, through a real run against PostGIS. Its polygons carry
// cod_imovel, so they loaded as copies of the properties, and with the older layout (no
// dat_atuali) the copy read last, a legal-reserve polygon, became the property's geometry.
// The zip is refused, naming the layer; the last good snapshot keeps serving.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { writeLayer } from '../fixtures/readers.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES, THEME_FIELDS } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-mixed-');

/** GO's AREA_IMOVEL in the older layout (no dat_criaca/dat_atuali), alone or with the RESERVA_LEGAL layer beside it. */
async function goZip(label: string, withTheme: boolean): Promise<string> {
  const work = path.join(tmp, `${label}-layers`);
  const dir = path.join(tmp, label);
  fs.mkdirSync(work);
  fs.mkdirSync(dir);
  const fields = AREA_IMOVEL_FIELDS.filter((f) => f.name !== 'dat_criaca' && f.name !== 'dat_atuali');
  const files = await writeLayer(work, 'GO_AREA_IMOVEL', fields, SICAR_FIXTURES.GO.areaImovel.map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes } })), { encoding: 'utf8', cpg: 'UTF-8' });
  if (withTheme) {
    const rl = SICAR_FIXTURES.GO.themeRows.filter((r) => r.theme === 'RESERVA_LEGAL').map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes } }));
    expect(rl.length).toBeGreaterThan(0);
    files.push(...(await writeLayer(work, 'GO_RESERVA_LEGAL', THEME_FIELDS, rl, { encoding: 'utf8', cpg: 'UTF-8' })));
  }
  await zipFiles(path.join(dir, 'GO_AREA_IMOVEL.zip'), files.map((p) => ({ path: p, name: path.basename(p) })));
  return dir;
}

test('a theme layer inside the AREA_IMOVEL zip is refused, naming it; the published properties stay', async () => {
  const run = (dir: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  const geoms = async () => (await db.pool.query(`SELECT car, ST_AsText(geom) AS g FROM serving.car_imovel WHERE uf = 'GO' ORDER BY car`)).rows;
  expect((await run(await goZip('clean', false))).status).toBe('published');
  const before = await geoms();
  const out = await run(await goZip('mixed', true));
  expect(out.status).toBe('failed');
  expect(out.error?.message).toMatch(/the AREA_IMOVEL zip holds theme layers \(with cod_tema\): GO_RESERVA_LEGAL/);
  expect(await geoms()).toEqual(before);
});
