// POST /v1/enriquecimento/territorial: `rodovias.distancia_km` is the distance to the nearest
// federal road on the ellipsoid, also when no road is within 10 km and the nearest one is not
// among the nearest in plain degrees. At 30° S a degree of longitude is ~96 km and one of
// latitude ~111 km: a road 0.11° east of the area (~10.6 km) is nearer than five roads
// 0.100–0.104° north of it (~11.1–11.5 km), which are nearer in degrees.
import type { Position } from 'geojson';
import { beforeAll, expect, test } from 'vitest';
import { buildDnitSnv, SNV_FIXTURE, sphericalKm, type SnvSegment } from '../fixtures/dnit-snv.ts';
import fs from 'node:fs';
import path from 'node:path';
import { ensureOverlaps } from '../src/etl/overlaps.ts';
import { call, fixtureApi, newKey, publishFrom } from './helpers/api.ts';

const fx = fixtureApi();
let key: string;
/** The segments of the version beforeAll publishes (the fixture's and the test roads). */
let published: SnvSegment[] = [];

// The request: a box of 0.01° around (-53.0, -30.0), in Rio Grande do Sul, far from the fixture roads.
const [X0, Y0, X1, Y1] = [-53.005, -30.005, -52.995, -29.995];
const AREA = { type: 'Polygon', coordinates: [[[X0, Y0], [X1, Y0], [X1, Y1], [X0, Y1], [X0, Y0]]] };

function road(codigo: string, coordinates: Position[]): SnvSegment {
  const base = SNV_FIXTURE.find((s) => s.attributes.sg_tipo_tr === 'B')!.attributes;
  const km = Math.round(sphericalKm(coordinates) * 1000) / 1000;
  return { geometry: { type: 'LineString', coordinates }, attributes: { ...base, vl_codigo: codigo, sg_uf: 'RS', vl_br: 290, vl_km_inic: 0, vl_km_fina: km, vl_extensa: km, ds_coinc: null } };
}

beforeAll(async () => {
  const east = road('290BRS0010', [[X1 + 0.11, -30.05], [X1 + 0.11, -29.95]]);
  const north = [0, 1, 2, 3, 4].map((i) => road(`290BRS002${i}`, [[-53.02, Y1 + 0.1 + i * 0.001], [-52.98, Y1 + 0.1 + i * 0.001]]));
  published = [...SNV_FIXTURE, east, ...north];
  await publishFrom(fx.db, 'dnit-snv', (dir) => buildDnitSnv(dir, { versao: '202508A', segments: published }));
  key = await newKey(fx.db);
}, 100_000);

test('the nearest road on the ellipsoid, beyond 10 km, when five roads are nearer in degrees', async () => {
  const r = await call(fx.api.base, '/v1/enriquecimento/territorial', { key, body: { geometry: AREA, layers: ['rodovias'] } });
  expect(r.status).toBe(200);
  const [w] = (await fx.db.pool.query(
    `SELECT min(ST_Distance(r.geom::geography, ST_SetSRID(ST_GeomFromGeoJSON($1), 4326)::geography)) / 1000 AS km FROM serving.dnit_snv_principal r`,
    [JSON.stringify(AREA)])).rows;
  expect(w.km).toBeGreaterThan(10);
  expect(w.km).toBeLessThan(11);
  expect(r.body.rodovias.segmentos).toEqual([]);
  expect(r.body.rodovias.distancia_km).toBeCloseTo(w.km, 3);
});

test('a planned road (SNV surface PLA) is published but is no road to measure to: left out of car_rodovias and of the API', async () => {
  const [p] = (await fx.db.pool.query(
    `SELECT car, ST_X(ST_PointOnSurface(geom)) AS x, ST_Y(ST_PointOnSurface(geom)) AS y, ST_AsGeoJSON(geom) AS g FROM serving.car_imovel ORDER BY car LIMIT 1`)).rows;
  const rodovia = async () => (await fx.db.pool.query(`SELECT distancia_km FROM serving.car_rodovias WHERE car = $1`, [p.car])).rows[0]?.distancia_km;
  const before = await rodovia();
  expect(before).toBeGreaterThan(0);
  // A main alignment through the property, planned: once as the SNV code, once spelled out in the legend only.
  const through = (codigo: string, dx: number) => road(codigo, [[p.x + dx, p.y - 0.2], [p.x + dx, p.y + 0.2]]);
  const pla = through('290BRS0900', 0);
  pla.attributes = { ...pla.attributes, ds_superfi: 'PLA', ds_legenda: 'Planejada' };
  const legend = through('290BRS0910', 0.0001);
  legend.attributes = { ...legend.attributes, ds_superfi: '', ds_legenda: 'Rodovia Planejada' };
  await publishFrom(fx.db, 'dnit-snv', (dir) => buildDnitSnv(dir, { versao: '202509A', segments: [...published, pla, legend] }));
  const planned = await fx.db.pool.query(`SELECT codigo, superficie FROM serving.dnit_snv WHERE codigo IN ('290BRS0900', '290BRS0910') ORDER BY codigo`);
  expect(planned.rows.map((r) => r.codigo)).toEqual(['290BRS0900', '290BRS0910']);
  expect(await rodovia()).toBeCloseTo(before, 6);
  const r = await call(fx.api.base, '/v1/enriquecimento/territorial', { key, body: { geometry: JSON.parse(p.g), layers: ['rodovias'] } });
  expect(r.status).toBe(200);
  expect(r.body.rodovias.distancia_km).toBeCloseTo(before, 2);
  expect(r.body.rodovias.segmentos.map((s: { codigo: string }) => s.codigo)).not.toContain('290BRS0900');
  // The rule on the spellings a version may use.
  const spelled = await fx.db.pool.query(
    `SELECT etl.snv_planejada(s, l) AS p FROM (VALUES ('PLA', NULL), (' pla ', NULL), ('Planejada', NULL), ('PLANEJADA', 'x'), (NULL, 'Planejada'),
       ('PAV', 'Planejada'), ('DUP', 'Rodovia duplicada'), ('EOI', 'Em obras de implantação'), (NULL, NULL)) v(s, l)`);
  expect(spelled.rows.map((x) => x.p)).toEqual([true, true, true, true, true, false, false, false, false]);
});

test('a segment that is no main alignment (an SNV contorno, acesso or variante) counts in neither distance, as SOURCES §8.7 asks: car_rodovias and the API agree', async () => {
  const [p] = (await fx.db.pool.query(
    `SELECT car, ST_X(ST_PointOnSurface(geom)) AS x, ST_Y(ST_PointOnSurface(geom)) AS y, ST_AsGeoJSON(geom) AS g FROM serving.car_imovel ORDER BY car DESC LIMIT 1`)).rows;
  const rodovia = async () => (await fx.db.pool.query(`SELECT distancia_km FROM serving.car_rodovias WHERE car = $1`, [p.car])).rows[0]?.distancia_km;
  const before = await rodovia();
  expect(before).toBeGreaterThan(0);
  const variante = road('290VRS0950', [[p.x, p.y - 0.2], [p.x, p.y + 0.2]]);
  variante.attributes = { ...variante.attributes, sg_tipo_tr: 'V', nm_tipo_tr: 'Variante' };
  await publishFrom(fx.db, 'dnit-snv', (dir) => buildDnitSnv(dir, { versao: '202510A', segments: [...published, variante] }));
  expect((await fx.db.pool.query(`SELECT tipo_trecho FROM serving.dnit_snv WHERE codigo = '290VRS0950'`)).rows).toEqual([{ tipo_trecho: 'V' }]);
  const r = await call(fx.api.base, '/v1/enriquecimento/territorial', { key, body: { geometry: JSON.parse(p.g), layers: ['rodovias'] } });
  expect(r.status).toBe(200);
  // Before the fix: car_rodovias measured 0 km to the variant while the API (main alignments) said `before`.
  expect(await rodovia()).toBeCloseTo(before, 6);
  expect(r.body.rodovias.distancia_km).toBeCloseTo(before, 2);
});

test('migration 0108 on a database derived before the rule: the road pairs are computed again by the next derive, the old rows served until then, never twice', async () => {
  const rows = async () => (await fx.db.pool.query(`SELECT car, distancia_km FROM serving.car_rodovias ORDER BY car`)).rows;
  const right = await rows();
  expect(right.length).toBeGreaterThan(0);
  // What an older derive left: a distance measured to a variant or a planned road (0 km).
  await fx.db.pool.query(`UPDATE derived.car_overlaps SET distancia_km = 0 WHERE camada = 'rodovia' AND car = $1`, [right[0].car]);
  await fx.db.pool.query(fs.readFileSync(path.join(__dirname, '..', 'sql', '0108_road_pieces_main_alignments.sql'), 'utf8'));
  expect((await fx.db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'snap' AND tablename LIKE 'dnit_snv_sub%'`)).rows[0].n).toBe(0);
  // Until the next derive the rows computed before are served (no property loses its road).
  expect((await rows()).length).toBe(right.length);
  const r = await ensureOverlaps(fx.db.pool, fx.db.log);
  expect(r.pairs).toBeGreaterThan(0);
  // Before the fix: each property twice (the old row beside the new one).
  expect(await rows()).toEqual(right);
});
