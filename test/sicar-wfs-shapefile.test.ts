// SICAR's WFS layer saved as a shapefile (a manual drop: QGIS or ogr2ogr over
// sicar:sicar_imoveis_<uf>): the WFS attribute names cut to 10 characters (status_imo,
// tipo_imove, dat_criaca, data_atual), loaded through a real run against PostGIS: every
// property's status, type and dates equal those loaded from the official zip layout.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import type { DbfField } from '../fixtures/lib/shapefile-writer.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-wfs-shp-');

/** The official zip's field → the WFS attribute it comes from, cut to 10 characters as a DBF keeps it. */
const WFS_SHP_NAMES: Record<string, string> = {
  cod_estado: 'uf', num_area: 'area', ind_status: 'status_imovel', des_condic: 'condicao', ind_tipo: 'tipo_imovel',
  mod_fiscal: 'm_fiscal', dat_criaca: 'dat_criacao', dat_atuali: 'data_atualizacao',
};
const cut = (name: string) => (WFS_SHP_NAMES[name] ?? name).slice(0, 10);

async function load(label: string, fields: DbfField[], rename: (n: string) => string) {
  const rows: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => ({
    geometry: r.geometry,
    attributes: Object.fromEntries(Object.entries(r.attributes).map(([k, v]) => [rename(k), v])),
  }));
  const dir = path.join(tmp, label);
  fs.mkdirSync(dir, { recursive: true });
  await buildLayerZip(path.join(dir, 'GO_AREA_IMOVEL.zip'), 'GO_AREA_IMOVEL', fields.map((f) => ({ ...f, name: rename(f.name) })), rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  expect(out.error).toBeUndefined();
  return (await db.pool.query(`SELECT car, situacao, tipo, condicao, area_total_ha, modulos_fiscais, data_inscricao::text, data_atualizacao::text FROM serving.car_imovel WHERE uf = 'GO' ORDER BY car`)).rows;
}

test('the WFS names cut to 10 characters load the same status, type and dates as the zip layout', async () => {
  const want = await load('official', AREA_IMOVEL_FIELDS, (n) => n);
  expect(want.filter((r) => r.situacao && r.data_atualizacao).length).toBeGreaterThan(3);
  expect(Object.values(WFS_SHP_NAMES).map((n) => n.slice(0, 10))).toEqual(['uf', 'area', 'status_imo', 'condicao', 'tipo_imove', 'm_fiscal', 'dat_criaca', 'data_atual']);
  expect(await load('wfs-as-shp', AREA_IMOVEL_FIELDS, cut)).toEqual(want);
});
