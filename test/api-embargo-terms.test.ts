// The `embargos` elements of a CAR answer when IBAMA numbers several terms alike (NUM_TAD is
// not unique: facts.embargos.numero_tad_repetido): the fixtures plus a second IBAMA load
// with five terms over SICAR fixture MT1: two numbers of two terms each, and a point.
//   990001: an active term and its lifted twin, the same polygon inside MT1: the property
//           has that polygon's hectares under number 990001 once, not twice.
//   990002: a lifted term inside MT1 and an active term of the same number elsewhere (a
//           point far away): the element is the lifted term's (ativo false, its situacao
//           and date), not the active term's attributes beside ativo false.
//   990003: an active point-only term on a vertex of MT1's border: not inside, not listed.
import fs from 'node:fs';
import path from 'node:path';
import { beforeAll, expect, test } from 'vitest';
import { ibamaCsv, termById, type CsvRow } from '../fixtures/ibama-embargos.ts';
import { call, fixtureApi, newKey, publishFrom } from './helpers/api.ts';

const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB';

const fx = fixtureApi();
let key: string;
let boxHa: number;
const q = async <T = any>(sql: string, params: unknown[] = []) => (await fx.db.pool.query(sql, params)).rows as T[]; // eslint-disable-line @typescript-eslint/no-explicit-any

beforeAll(async () => {
  // Two disjoint boxes of ~0.002° inside MT1, around a point inside it.
  const [p] = await q<{ x: number; y: number }>(
    `SELECT round(ST_X(pt)::numeric, 4)::float8 AS x, round(ST_Y(pt)::numeric, 4)::float8 AS y
       FROM (SELECT ST_PointOnSurface(geom) AS pt FROM serving.car_imovel WHERE car = $1) s`, [MT1]);
  const box = (x0: number, y0: number) => {
    const [a, b, c, d] = [x0, y0, x0 + 0.002, y0 + 0.002].map((n) => n.toFixed(4));
    return `POLYGON ((${a} ${b}, ${c} ${b}, ${c} ${d}, ${a} ${d}, ${a} ${b}))`;
  };
  const box1 = box(p.x - 0.001, p.y - 0.001);
  const box2 = box(p.x - 0.004, p.y - 0.001);
  const [inside] = await q<{ ok: boolean; ha: number }>(
    `SELECT bool_and(ST_CoveredBy(ST_GeomFromText(w, 4326), c.geom)) AS ok, serving.area_ha(ST_GeomFromText($2, 4326)) AS ha
       FROM serving.car_imovel c, unnest(ARRAY[$2, $3]) w WHERE c.car = $1`, [MT1, box1, box2]);
  expect(inside.ok).toBe(true);
  boxHa = inside.ha;
  // A vertex of MT1's outer ring: a point term there is on its border, not inside it.
  const [v] = await q<{ x: string; y: string }>(
    `SELECT ST_X(pt)::text AS x, ST_Y(pt)::text AS y FROM (SELECT ST_PointN(ST_ExteriorRing(ST_GeometryN(geom, 1)), 1) AS pt FROM serving.car_imovel WHERE car = $1) s`, [MT1]);
  const base = termById('T04').row;
  const term = (o: Partial<CsvRow>): Partial<CsvRow> => ({ ...base, NOME_EMBARGADO: 'Termo de Teste', CPF_CNPJ_EMBARGADO: '', ...o });
  const lifted = { SIT_DESEMBARGO: 'S', TIPO_DESEMBARGO: 'Total', DAT_DESEMBARGO: '2024-02-01 00:00:00', DES_DESEMBARGO: 'Desembargo' };
  const extraRows = [
    term({ SEQ_TAD: '9000001', NUM_TAD: '990001', SER_TAD: 'A', GEOM_AREA_EMBARGADA: box1, EMBARGA_POLIGONO: 'S', DAT_EMBARGO: '2023-05-05 00:00:00' }),
    term({ SEQ_TAD: '9000002', NUM_TAD: '990001', SER_TAD: 'B', GEOM_AREA_EMBARGADA: box1, EMBARGA_POLIGONO: 'S', DAT_EMBARGO: '2021-05-05 00:00:00', ...lifted }),
    term({ SEQ_TAD: '9000003', NUM_TAD: '990002', SER_TAD: 'A', GEOM_AREA_EMBARGADA: box2, EMBARGA_POLIGONO: 'S', DAT_EMBARGO: '2020-01-10 00:00:00', ...lifted }),
    term({ SEQ_TAD: '9000005', NUM_TAD: '990003', SER_TAD: 'A', NUM_LONGITUDE_TAD: v.x, NUM_LATITUDE_TAD: v.y }),
    term({ SEQ_TAD: '9000004', NUM_TAD: '990002', SER_TAD: 'B', NUM_LONGITUDE_TAD: '-51.0', NUM_LATITUDE_TAD: '-10.0', DAT_EMBARGO: '2024-06-06 00:00:00' }),
  ];
  await publishFrom(fx.db, 'ibama-embargos', (dir) => fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), ibamaCsv({ extraRows })));
  key = await newKey(fx.db);
}, 100_000);

test('a number with an active and a lifted twin over the same land counts its hectares once', async () => {
  for (const asOf of ['', '&as_of=2026-12-31']) {
    const r = await call(fx.api.base, `/v1/car/${MT1}?include=embargos${asOf}`, { key });
    expect(r.status).toBe(200);
    const e = r.body.embargos.find((x: { numero_tad: string }) => x.numero_tad === '990001');
    expect(e, asOf).toMatchObject({ ativo: true, situacao: 'ativo', data_embargo: '2023-05-05' });
    expect(e.area_sobreposta_ha, asOf).toBeCloseTo(boxHa, 3);
    expect(e.percentual).toBeLessThanOrEqual(1);
  }
  const [row] = await q(`SELECT area_sobreposta_ha FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo' AND feicao_id = '990001'`, [MT1]);
  expect(row.area_sobreposta_ha).toBeCloseTo(boxHa, 3);
});

test('a lifted term over the property is shown as itself, not with the attributes of an active term of the same number elsewhere', async () => {
  for (const asOf of ['', '&as_of=2026-12-31']) {
    const r = await call(fx.api.base, `/v1/car/${MT1}?include=embargos${asOf}`, { key });
    const e = r.body.embargos.find((x: { numero_tad: string }) => x.numero_tad === '990002');
    expect(e, asOf).toMatchObject({ ativo: false, data_embargo: '2020-01-10' });
    expect(e.situacao, asOf).not.toBe('ativo');
    expect(e.area_sobreposta_ha).toBeCloseTo(boxHa, 3);
  }
});

test('a point-only term on the property\'s border does not lie inside it (contract §3): not listed', async () => {
  const [on] = await q(`SELECT ST_Intersects(e.geom, c.geom) AS touches, ST_Contains(c.geom, e.geom) AS inside
                          FROM serving.ibama_embargos e, serving.car_imovel c WHERE e.numero_tad = '990003' AND c.car = $1`, [MT1]);
  expect(on).toEqual({ touches: true, inside: false });
  for (const asOf of ['', '&as_of=2026-12-31']) {
    const r = await call(fx.api.base, `/v1/car/${MT1}?include=embargos${asOf}`, { key });
    expect(r.body.embargos.map((x: { numero_tad: string }) => x.numero_tad), asOf).not.toContain('990003');
  }
  expect(await q(`SELECT 1 FROM serving.car_sobreposicoes WHERE camada = 'embargo' AND feicao_id = '990003'`)).toEqual([]);
});
