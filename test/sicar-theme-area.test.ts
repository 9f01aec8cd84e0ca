// The theme hectares per property (sql/queries/sicar_theme_area.sql: a union only for the
// polygons whose boxes chain together, one statement per theme on two connections) against the plain
// definition — the area of ST_UnaryUnion of every detailed polygon of the property and theme,
// the *_TOTAL polygons only without detailed ones — on a real PostGIS, case by case and on a
// seeded random set. And etl.car_number_ok (migration 0080) against the pattern it replaces.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { indexThemeArea, themeAreaByProperty, themeAreas, themeAreaOf } from '../pipelines/sicar/queries.ts';
import { sqlText, tableName } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`CREATE SCHEMA t; CREATE TABLE t.car_tema (LIKE snap.car_tema__template); ALTER TABLE t.car_tema ALTER COLUMN snapshot_id SET DEFAULT 1`);
});
afterAll(async () => db?.drop());

/** The definition (the statement this replaced), per property. */
const PLAIN_UNION = `
SELECT car,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'APPS' AND ((cod_tema LIKE 'APP\\_%' AND cod_tema NOT LIKE '%\\_TOTAL') OR cod_tema IS NULL)),
    ST_Collect(geom) FILTER (WHERE tema_base = 'APPS' AND cod_tema LIKE '%\\_TOTAL')))) AS app_ha,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND coalesce(cod_tema, '') NOT LIKE '%\\_TOTAL'),
    ST_Collect(geom) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND cod_tema LIKE '%\\_TOTAL')))) AS reserva_legal_ha,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND coalesce(cod_tema, '') NOT LIKE '%\\_TOTAL'),
    ST_Collect(geom) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND cod_tema LIKE '%\\_TOTAL')))) AS area_consolidada_ha
FROM t.car_tema GROUP BY car`;

/** A square of `s` degrees at (x, y), as car_tema holds it. */
const sq = (x: number, y: number, s: number) => `ST_Multi(ST_MakeEnvelope(${x}, ${y}, ${x + s}, ${y + s}, 4326))`;
const wkt = (w: string) => `ST_Multi(ST_GeomFromText('${w}', 4326))`;

async function add(car: string, tema: string, cod: string | null, geom: string) {
  await db.pool.query(
    `INSERT INTO t.car_tema (car, uf, tema_base, cod_tema, geom, area_calculada_ha) SELECT $1, 'MT', $2, $3, g, etl.area_ha(g) FROM (SELECT ${geom} AS g) x`,
    [car, tema, cod],
  );
}

const THEMES = ['APPS', 'RESERVA_LEGAL', 'AREA_CONSOLIDADA'];

type Row = { car: string; app_ha: number | null; reserva_legal_ha: number | null; area_consolidada_ha: number | null };

/** Ours (themeAreas, two connections) and the definition, per property of t.car_tema. */
async function compare(): Promise<{ ours: Map<string, Row>; plain: Map<string, Row> }> {
  const client = await db.pool.connect();
  try {
    await client.query('DROP TABLE IF EXISTS t.theme_area');
    // one statement per theme, as the load runs them
    const themes = THEMES.map((th) => sqlText(`(SELECT * FROM t.car_tema WHERE tema_base = '${th}') s`));
    await themeAreas(db.pool, client, { theme_area: tableName('t.theme_area'), themes });
    const cars = (await client.query(`SELECT DISTINCT car FROM t.car_tema ORDER BY car`)).rows.map((r) => r.car as string);
    const ours = new Map<string, Row>((await client.query(`SELECT * FROM ${themeAreaByProperty(tableName('t.theme_area'))} x`)).rows.map((r) => [r.car, r]));
    const plain = new Map<string, Row>((await client.query(PLAIN_UNION)).rows.map((r) => [r.car, r]));
    // Properties whose polygons count for no theme have no row of ours: NULL everywhere, as the definition's row.
    const none: Row = { car: '', app_ha: null, reserva_legal_ha: null, area_consolidada_ha: null };
    for (const car of cars) if (!ours.has(car)) ours.set(car, { ...none, car });
    expect(ours.size).toBe(cars.length);
    for (const car of cars) {
      const a = ours.get(car)!;
      const b = plain.get(car)!;
      for (const k of ['app_ha', 'reserva_legal_ha', 'area_consolidada_ha'] as const) {
        expect(a[k] === null, `${car} ${k} NULL`).toBe(b[k] === null);
        if (b[k] !== null) expect(Math.abs(a[k]! - b[k]!), `${car} ${k}: ${a[k]} vs ${b[k]}`).toBeLessThanOrEqual(1e-9 * Math.max(1, b[k]!));
      }
    }
    return { ours, plain };
  } finally {
    client.release();
  }
}

test('theme hectares equal the plain union: overlapping, disjoint, single, TOTAL-only, NULL cod_tema, chained and touching groups', async () => {
  const x = -55;
  const y = -12;
  // Overlapping detailed APPs (half of the second square lies on the first).
  await add('MT-overlap', 'APPS', 'APP_RIO_ATE_10', sq(x, y, 0.01));
  await add('MT-overlap', 'APPS', 'APP_NASCENTE_OLHO_DAGUA', sq(x + 0.005, y, 0.01));
  await add('MT-overlap', 'APPS', 'APP_TOTAL', sq(x, y, 0.05)); // ignored: detailed polygons exist
  // Disjoint polygons whose boxes overlap (two triangles of one square): unioned, nothing counted twice.
  await add('MT-triangles', 'RESERVA_LEGAL', 'ARL_PROPOSTA', wkt(`POLYGON((${x} ${y},${x + 0.01} ${y},${x} ${y + 0.01},${x} ${y}))`));
  await add('MT-triangles', 'RESERVA_LEGAL', 'ARL_AVERBADA', wkt(`POLYGON((${x + 0.01} ${y},${x + 0.01} ${y + 0.01},${x + 0.002} ${y + 0.01},${x + 0.01} ${y}))`));
  // Disjoint boxes: the sum of the polygons' own areas.
  for (let i = 0; i < 4; i++) await add('MT-disjoint', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x + 0.02 * i, y, 0.01));
  // One polygon per theme.
  await add('MT-single', 'APPS', 'APP_VEREDA', sq(x, y, 0.003));
  await add('MT-single', 'RESERVA_LEGAL', 'ARL_PROPOSTA', sq(x, y, 0.02));
  await add('MT-single', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x + 0.01, y, 0.02));
  // TOTAL only: the TOTAL polygons (two that overlap) are used.
  await add('MT-total-only', 'APPS', 'APP_TOTAL', sq(x, y, 0.01));
  await add('MT-total-only', 'APPS', 'APP_TOTAL', sq(x + 0.004, y + 0.004, 0.01));
  await add('MT-total-only', 'RESERVA_LEGAL', 'ARL_TOTAL', sq(x, y, 0.02));
  // NULL cod_tema (older layout) counts as detailed, in APPS and elsewhere; a non-APP code in APPS counts nowhere.
  await add('MT-null-cod', 'APPS', null, sq(x, y, 0.01));
  await add('MT-null-cod', 'APPS', 'APP_LAGO_NATURAL', sq(x + 0.005, y + 0.005, 0.01));
  await add('MT-null-cod', 'APPS', 'APP_TOTAL', sq(x, y, 0.1));
  await add('MT-null-cod', 'APPS', 'AREA_REMANESCENTE', sq(x + 0.5, y, 0.1));
  await add('MT-null-cod', 'RESERVA_LEGAL', null, sq(x, y, 0.01));
  await add('MT-null-cod', 'RESERVA_LEGAL', 'ARL_TOTAL', sq(x, y, 0.1));
  await add('MT-only-other', 'APPS', 'AREA_REMANESCENTE', sq(x, y, 0.01));
  // A chain: a's box meets b's, b's meets c's, a and c far apart; and two squares sharing an edge.
  await add('MT-chain', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x, y, 0.01));
  await add('MT-chain', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x + 0.008, y + 0.008, 0.01));
  await add('MT-chain', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x + 0.016, y + 0.016, 0.01));
  await add('MT-chain', 'AREA_CONSOLIDADA', 'AREA_CONSOLIDADA', sq(x + 0.1, y, 0.01));
  await add('MT-chain', 'RESERVA_LEGAL', 'ARL_PROPOSTA', sq(x, y, 0.01));
  await add('MT-chain', 'RESERVA_LEGAL', 'ARL_AVERBADA', sq(x + 0.01, y, 0.01));
  // A multipolygon whose second part overlaps another polygon.
  await add('MT-multi', 'APPS', 'APP_RIO_10_A_50', `ST_Collect(ARRAY[ST_MakeEnvelope(${x}, ${y}, ${x + 0.01}, ${y + 0.01}, 4326), ST_MakeEnvelope(${x + 0.05}, ${y}, ${x + 0.06}, ${y + 0.01}, 4326)])`);
  await add('MT-multi', 'APPS', 'APP_VEREDA', sq(x + 0.055, y + 0.005, 0.01));

  const { ours, plain } = await compare();
  // The cases mean what they say: the overlap is counted once, the disjoint ones add up, TOTAL only when alone.
  const ha = (car: string, k: keyof Omit<Row, 'car'>) => ours.get(car)![k]!;
  const sum = async (car: string, where: string) => Number((await db.pool.query(`SELECT sum(area_calculada_ha) AS s FROM t.car_tema WHERE car = $1 AND ${where}`, [car])).rows[0].s);
  expect(ha('MT-overlap', 'app_ha')).toBeLessThan(0.9 * (await sum('MT-overlap', `cod_tema <> 'APP_TOTAL'`)));
  expect(ha('MT-overlap', 'app_ha')).toBeGreaterThan(await sum('MT-overlap', `cod_tema = 'APP_RIO_ATE_10'`));
  expect(ha('MT-triangles', 'reserva_legal_ha')).toBeCloseTo(await sum('MT-triangles', 'true'), 9);
  expect(ha('MT-disjoint', 'area_consolidada_ha')).toBeCloseTo(await sum('MT-disjoint', 'true'), 9);
  expect(ha('MT-total-only', 'app_ha')).toBeLessThan(await sum('MT-total-only', `tema_base = 'APPS'`));
  expect(ha('MT-total-only', 'reserva_legal_ha')).toBeCloseTo(await sum('MT-total-only', `tema_base = 'RESERVA_LEGAL'`), 9);
  expect(ha('MT-null-cod', 'app_ha')).toBeLessThan(await sum('MT-null-cod', `tema_base = 'APPS' AND (cod_tema IS NULL OR cod_tema = 'APP_LAGO_NATURAL')`));
  expect(ha('MT-null-cod', 'reserva_legal_ha')).toBeCloseTo(await sum('MT-null-cod', `tema_base = 'RESERVA_LEGAL' AND cod_tema IS NULL`), 9);
  expect(ours.get('MT-only-other')!.app_ha).toBeNull();
  expect(ours.get('MT-single')!.app_ha).toBeCloseTo(await sum('MT-single', `tema_base = 'APPS'`), 12);
  expect(plain.get('MT-chain')!.area_consolidada_ha).toBeLessThan(await sum('MT-chain', `tema_base = 'AREA_CONSOLIDADA'`));
});

test('theme hectares equal the plain union on 3,000 seeded random properties (overlapping, touching and disjoint polygons, TOTALs, NULL codes)', async () => {
  await db.pool.query('TRUNCATE t.car_tema');
  // Per property and theme 1–6 squares or triangles of 0.001–0.01° in a 0.02° cell; codes drawn
  // among detailed, *_TOTAL, NULL and (APPS) non-APP; coordinates on a 0.001° grid so that edges touch.
  await db.pool.query(`
    SELECT setseed(0.42);
    INSERT INTO t.car_tema (car, uf, tema_base, cod_tema, geom, area_calculada_ha)
    SELECT car, 'MT', tema, cod, g, etl.area_ha(g) FROM (
      SELECT 'MT-r' || p AS car, tema,
             (ARRAY['APP_RIO_ATE_10', 'ARL_PROPOSTA', 'APP_TOTAL', 'ARL_TOTAL', NULL, 'OUTRO'])[1 + floor(random() * 6)::int] AS cod,
             ST_Multi(CASE WHEN random() < 0.7
               THEN ST_MakeEnvelope(x0, y0, x0 + s, y0 + s, 4326)
               ELSE ST_SetSRID(ST_MakePolygon(ST_MakeLine(ARRAY[ST_MakePoint(x0, y0), ST_MakePoint(x0 + s, y0), ST_MakePoint(x0, y0 + s), ST_MakePoint(x0, y0)])), 4326) END) AS g
        FROM generate_series(1, 3000) p
        CROSS JOIN unnest(ARRAY['APPS', 'RESERVA_LEGAL', 'AREA_CONSOLIDADA']) tema
        CROSS JOIN LATERAL generate_series(1, 1 + floor(random() * 6)::int) k
        CROSS JOIN LATERAL (SELECT -55 + (p % 50) * 0.05 + round((random() * 0.02)::numeric, 3)::float8 AS x0,
                                   -12 + (p / 50) * 0.05 + round((random() * 0.02)::numeric, 3)::float8 AS y0,
                                   round((0.001 + random() * 0.009)::numeric, 3)::float8 AS s) d
    ) r`);
  const { ours } = await compare();
  expect(ours.size).toBe(3000);
});

test('a theme whose hectares are computed twice fails at the index instead of counting twice', async () => {
  const client = await db.pool.connect();
  try {
    await client.query('DROP TABLE IF EXISTS t.twice');
    await client.query(`CREATE UNLOGGED TABLE t.twice (car text, tema_base text, ha double precision)`);
    const apps = sqlText(`(SELECT * FROM t.car_tema WHERE tema_base = 'APPS') s`);
    await themeAreaOf(client, { theme_area: tableName('t.twice'), polygons: apps });
    await themeAreaOf(client, { theme_area: tableName('t.twice'), polygons: apps });
    await expect(indexThemeArea(client, tableName('t.twice'))).rejects.toThrow(/could not create unique index/);
  } finally {
    client.release();
  }
});

test('etl.car_number_ok (0080) answers as the pattern it replaces', async () => {
  const valid = 'MT-5107925-0123456789ABCDEF0123456789ABCDEF';
  const cases = [
    valid, 'GO-5208707-FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF', 'DF-5300108-00000000000000000000000000000000',
    valid.toLowerCase(), `${valid}0`, valid.slice(0, -1), valid.replace('MT-51', 'MT-52'), valid.replace('MT', 'XX'),
    valid.replace('-0123', '0-123'), valid.replace('5107925-', '5107925--').slice(0, 43), valid.replace('7925', '79-5'),
    valid.replace('0123456789ABCDEF', '0123456789ABCDEG'), valid.replace('0123', '01-3'), valid.replace('5107925', '510792٣'),
    valid.replace('5107925', '５107925'), ` ${valid}`, `${valid} `, valid.replace('MT', 'mT'), valid.replace('MT', 'Mt'),
    valid.replace('MT-', 'MT_'), 'MT-5107925-', '', '-', 'MT', valid.replace('A', 'É'), valid.replace('ABCDEF0', 'ABCDEF\n'),
  ];
  // And mutations of the valid number: each position replaced by each character of a mixed alphabet.
  const alphabet = ['0', '9', 'A', 'F', 'G', 'z', '-', ' ', '_', 'é', '٣'];
  for (let i = 0; i < valid.length; i++) for (const ch of alphabet) cases.push(valid.slice(0, i) + ch + valid.slice(i + 1));
  const r = await db.pool.query(
    `SELECT c, etl.car_number_ok(c) AS ours,
            coalesce(c ~ '^[A-Z]{2}-\\d{7}-[0-9A-F]{32}$' AND substr(c, 4, 2) = etl.uf_ibge_code(left(c, 2)), false) AS pattern
       FROM unnest($1::text[] || ARRAY[NULL]) c`,
    [cases],
  );
  expect(r.rows.length).toBe(cases.length + 1);
  for (const row of r.rows) expect(row.ours, JSON.stringify(row.c)).toBe(row.pattern);
  expect(r.rows.filter((x) => x.ours).length).toBeGreaterThan(10);
});
