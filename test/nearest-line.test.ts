// The in-process nearest-road search (src/etl/nearest-line.ts) against PostGIS' own
// ST_Distance(geography) over every road cut into runs of 7 edges (the pieces the search
// measures: over a long line PostGIS' figure exceeds the ellipsoidal minimum), on seeded
// random properties (holes and two-part ones included) and roads spread from 33° S to
// 5° N, near and far.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { lineIndex, NearestLine, wkbPaths } from '../src/etl/nearest-line.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;

beforeAll(async () => {
  db = await testDatabase();
  // a deterministic PRNG in SQL: the same cases every run
  await db.pool.query(`CREATE FUNCTION u(k int, j int) RETURNS float8 LANGUAGE sql IMMUTABLE AS
    $$ SELECT (hashint8extended(k, j) & 1048575)::float8 / 1048576 $$`);
  await db.pool.query(`CREATE TABLE roads AS
    SELECT 'r' || lpad(k::text, 3, '0') AS codigo,
           ST_Multi(ST_Segmentize(ST_SetSRID(ST_MakeLine(ARRAY[
             ST_Point(x, y), ST_Point(x + 0.8 * (u(k, 3) - 0.5), y + 0.8 * (u(k, 4) - 0.5)),
             ST_Point(x + 1.2 * (u(k, 5) - 0.5), y + 1.2 * (u(k, 6) - 0.5))]), 4326), 0.1)) AS geom
    FROM (SELECT k, -74 + 39 * u(k, 1) AS x, -33 + 38 * u(k, 2) AS y FROM generate_series(1, 250) k) s`);
  // the reference pieces: runs of 7 edges of each line part, sharing their end vertices
  await db.pool.query(`CREATE TABLE pieces AS
    WITH v AS (SELECT codigo, (d).path[1] AS line, (d).path[2] AS n, (d).geom AS pt FROM (SELECT codigo, ST_DumpPoints(geom) AS d FROM roads) x)
    SELECT codigo, ST_SetSRID(ST_MakeLine(array_agg(pt ORDER BY n)), 4326) AS geom
    FROM (SELECT codigo, line, n, pt, (n - 1) / 7 AS run FROM v
          UNION ALL SELECT codigo, line, n, pt, (n - 1) / 7 - 1 FROM v WHERE n > 1 AND (n - 1) % 7 = 0) d
    GROUP BY codigo, line, run HAVING count(*) >= 2`);
  await db.pool.query(`CREATE TABLE props AS
    SELECT 'P' || k AS car, CASE
      WHEN k % 10 = 0 THEN ST_Multi(ST_Difference(ST_Buffer(ST_Point(x, y), r, 8), ST_Buffer(ST_Point(x, y), r / 3, 4)))
      WHEN k % 10 = 1 THEN ST_Multi(ST_Union(ST_Buffer(ST_Point(x, y), r, 3), ST_Buffer(ST_Point(x + 3 * r, y), r / 2, 2)))
      ELSE ST_Multi(ST_Buffer(ST_Point(x, y), r, (2 + k % 6)::int)) END AS geom
    FROM (SELECT k, -74 + 39 * u(k, 11) AS x, -33 + 38 * u(k, 12) AS y, 0.005 + 0.05 * u(k, 13) AS r FROM generate_series(1, 150) k) s`);
  await db.pool.query(`UPDATE props SET geom = ST_SetSRID(geom, 4326)`);
  // one property crossed by a road, one with a road inside it
  await db.pool.query(`INSERT INTO props SELECT 'CROSS', ST_Multi(ST_Buffer(ST_PointN(ST_GeometryN(geom, 1), 3), 0.02)) FROM roads WHERE codigo = 'r001'`);
  await db.pool.query(`INSERT INTO props SELECT 'INSIDE', ST_Multi(ST_Buffer(ST_Centroid(geom), 3)) FROM roads WHERE codigo = 'r002'`);
}, 120_000);
afterAll(async () => db.drop());

test('the nearest road and its geodesic distance agree with ST_Distance(geography) over every road piece', async () => {
  const roads = await db.pool.query<{ fid: string; wkb: Buffer }>(`SELECT codigo AS fid, ST_AsBinary(geom) AS wkb FROM roads`);
  const nearest = new NearestLine(lineIndex(roads.rows));
  const props = await db.pool.query<{ car: string; wkb: Buffer }>(`SELECT car, ST_AsBinary(geom) AS wkb FROM props`);
  const rows = props.rows.flatMap((p) => nearest.candidates(wkbPaths(p.wkb)).map((c) => ({ car: p.car, ...c })));
  const r = await db.pool.query(
    `WITH c AS (SELECT * FROM json_to_recordset($1::json) AS t(car text, fid text, px float8, py float8, qx float8, qy float8)),
          ours AS (SELECT DISTINCT ON (car) car, fid,
                          ST_Distance(ST_SetSRID(ST_MakePoint(px, py), 4326)::geography, ST_SetSRID(ST_MakePoint(qx, qy), 4326)::geography) AS g
                   FROM c ORDER BY car, 3, fid)
     SELECT p.car, o.fid, o.g, b.fid AS ref_fid, b.g AS ref_g
     FROM props p LEFT JOIN ours o ON o.car = p.car
     CROSS JOIN LATERAL (SELECT s.codigo AS fid, ST_Distance(p.geom::geography, s.geom::geography) AS g FROM pieces s ORDER BY 2, 1 LIMIT 1) b`,
    [JSON.stringify(rows)],
  );
  expect(r.rowCount).toBe(152);
  for (const x of r.rows) {
    expect(x.fid, x.car).toBe(x.ref_fid);
    expect(x.g / 1000, x.car).toBeCloseTo(x.ref_g / 1000, 6);
  }
  const byCar = new Map(r.rows.map((x) => [x.car, x]));
  expect(byCar.get('CROSS').g).toBe(0);
  expect(byCar.get('INSIDE').g).toBe(0);
  expect(Math.max(...r.rows.map((x) => x.g))).toBeGreaterThan(100_000); // far properties too
});

test('no roads: no candidates', () => {
  const nearest = new NearestLine(lineIndex([]));
  expect(nearest.candidates(wkbPaths(Buffer.from('0103000000010000000400000000000000000000000000000000000000000000000000F03F000000000000F03F000000000000F03F000000000000000000000000000000000000000000000000', 'hex')))).toEqual([]);
});
