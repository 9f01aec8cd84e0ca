// The road distance of the derive stage (overlap_line_pieces + road-distance/pair.ts) against
// a brute force over every piece, on a real PostGIS: the minimum of ST_Distance(geography)
// over all ~1 km pieces, ties to the smallest code. The cases are the ones the statement's
// exactness argument is about: a property whose nearest piece in plain lon/lat is not its
// geodesically nearest (so the window search, not the KNN probe, finds the answer), a tie
// at two segments' shared end vertex, and seeded random properties and roads.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLinePieces } from '../src/etl/sql/overlaps.ts';
import { distancePair } from '../src/etl/road-distance/pair.ts';
import { sqlText, tableName } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;

const PIECES = 'public.ov_roads_sub';
const OUT = 'public.ov_roads_out';

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`
    CREATE TABLE public.ov_car (car text PRIMARY KEY, uf text NOT NULL, geom geometry(MultiPolygon, 4326) NOT NULL);
    CREATE TABLE public.ov_roads (codigo text PRIMARY KEY, geom geometry(MultiLineString, 4326) NOT NULL);
    -- 1. at 33°S a degree of longitude is 93 km and one of latitude 111 km: road N runs
    --    0.115° north of the property (12.8 km), road E 0.13° east of it (12.1 km); in plain
    --    lon/lat N is nearer, on the ellipsoid E is.
    INSERT INTO public.ov_car VALUES
      ('ANISO', 'RS', ST_Multi(ST_MakeEnvelope(-52.01, -33.01, -51.99, -32.99, 4326)));
    INSERT INTO public.ov_roads VALUES
      ('N', ST_Multi(ST_Segmentize(ST_MakeLine(ST_Point(-52.5, -32.875, 4326), ST_Point(-51.5, -32.875, 4326)), 0.01))),
      ('E', ST_Multi(ST_Segmentize(ST_MakeLine(ST_Point(-51.86, -33.5, 4326), ST_Point(-51.86, -32.5, 4326)), 0.01)));
    -- 2. a tie: segments T2 and T1 share their end vertex (-45, -20); the property lies
    --    south-east of it, so both are nearest at that vertex, at the same distance.
    INSERT INTO public.ov_car VALUES
      ('TIE', 'MG', ST_Multi(ST_MakeEnvelope(-44.93, -20.08, -44.91, -20.06, 4326)));
    INSERT INTO public.ov_roads VALUES
      ('T2', ST_Multi(ST_Segmentize(ST_MakeLine(ST_Point(-45.6, -20, 4326), ST_Point(-45, -20, 4326)), 0.01))),
      ('T1', ST_Multi(ST_Segmentize(ST_MakeLine(ST_Point(-45, -20, 4326), ST_Point(-45, -19.4, 4326)), 0.01)));
    -- 3. seeded: 150 small polygons and 12 winding roads over 12°S–30°S
    INSERT INTO public.ov_car
    SELECT 'R' || i, 'XX', ST_Multi(ST_MakePolygon(ST_MakeLine(array_append(pts, pts[1]))))
    FROM (
      SELECT i, array_agg(ST_Point(cx + r * (0.8 + 0.4 * ((hashint4(i * 100 + k) & 1023) / 1023.0)) * cos(2 * pi() * k / n),
                                   cy + r * (0.8 + 0.4 * ((hashint4(i * 100 + k + 50) & 1023) / 1023.0)) * sin(2 * pi() * k / n), 4326) ORDER BY k) AS pts
      FROM (SELECT i, -55 + 10 * ((hashint4(i) & 65535) / 65535.0) AS cx, -30 + 18 * ((hashint4(i + 7777) & 65535) / 65535.0) AS cy,
                   0.005 + 0.03 * ((hashint4(i + 999) & 1023) / 1023.0) AS r, 6 + (hashint4(i + 31) & 15) AS n
            FROM generate_series(1, 150) i) p
      CROSS JOIN LATERAL generate_series(0, p.n - 1) k
      GROUP BY i
    ) q;
    INSERT INTO public.ov_roads
    SELECT 'S' || lpad(j::text, 2, '0'), ST_Multi(ST_MakeLine(array_agg(ST_Point(x, y, 4326) ORDER BY s)))
    FROM (
      SELECT j, s, -56 + 12 * ((hashint4(j) & 65535) / 65535.0) + 0.015 * sum(cos(h)) OVER w AS x,
                   -31 + 20 * ((hashint4(j + 555) & 65535) / 65535.0) + 0.015 * sum(sin(h)) OVER w AS y
      FROM (SELECT j, s, 2 * pi() * ((hashint4(j) & 255) / 255.0) + 0.6 * sin(s / 9.0 + j) + 0.3 * sin(s / 2.3) AS h
            FROM generate_series(1, 12) j, generate_series(0, 120) s) a
      WINDOW w AS (PARTITION BY j ORDER BY s)
    ) b
    GROUP BY j;`);
  const c = await db.pool.connect();
  try {
    await createLinePieces(c, { pieces: tableName(PIECES), layer: tableName('public.ov_roads'), id: sqlText('codigo'), filter: sqlText('true') });
    await c.query(`CREATE INDEX ON ${PIECES} USING gist (geom); ANALYZE ${PIECES}; ANALYZE public.ov_car`);
    await distancePair(c, { out: tableName(OUT), car: tableName('public.ov_car'), pieces: tableName(PIECES), part: sqlText('true') });
  } finally {
    c.release();
  }
}, 120_000);

afterAll(async () => {
  await db.drop();
});

/** Brute force: every piece of every road, exact geodesic distance, smallest distance then smallest code. */
async function bruteForce(): Promise<Map<string, { fid: string; km: number }>> {
  const r = await db.pool.query(`
    SELECT DISTINCT ON (c.car) c.car, s.fid, ST_Distance(c.geom::geography, s.geom::geography) / 1000 AS km
    FROM public.ov_car c CROSS JOIN ${PIECES} s
    ORDER BY c.car, km, s.fid`);
  return new Map(r.rows.map((x) => [x.car as string, { fid: x.fid as string, km: x.km as number }]));
}

async function served(): Promise<Map<string, { fid: string; km: number }>> {
  const r = await db.pool.query(`SELECT car, fid, distancia_km FROM ${OUT}`);
  return new Map(r.rows.map((x) => [x.car as string, { fid: x.fid as string, km: x.distancia_km as number }]));
}

describe('road distance: the minimum of ST_Distance(geography) over every piece', () => {
  test('a property whose nearest piece in plain lon/lat is not the nearest on the ellipsoid', async () => {
    // the premise: the KNN probe in lon/lat picks road N first
    const knn = await db.pool.query(`SELECT s.fid FROM public.ov_car c, LATERAL (SELECT fid FROM ${PIECES} s ORDER BY s.geom <-> c.geom LIMIT 1) s WHERE c.car = 'ANISO'`);
    expect(knn.rows[0].fid).toBe('N');
    const got = (await served()).get('ANISO')!;
    const want = (await bruteForce()).get('ANISO')!;
    expect(want.fid).toBe('E');
    expect(got.fid).toBe('E');
    expect(Math.abs(got.km - want.km)).toBeLessThan(1e-9);
    expect(got.km).toBeGreaterThan(12.0); // 0.13° of longitude at 33°S
    expect(got.km).toBeLessThan(12.3);
  });

  test('a tie at a shared end vertex goes to the smallest code', async () => {
    const t = await db.pool.query(`
      SELECT s.fid, ST_Distance(c.geom::geography, s.geom::geography) AS m
      FROM public.ov_car c, ${PIECES} s WHERE c.car = 'TIE' AND s.fid IN ('T1', 'T2') ORDER BY m LIMIT 2`);
    expect(t.rows.map((x) => x.fid).sort()).toEqual(['T1', 'T2']);
    expect(t.rows[0].m).toBe(t.rows[1].m); // the premise: an exact tie
    expect((await served()).get('TIE')!.fid).toBe('T1');
  });

  test('every property agrees with the brute force (152 properties, every piece)', async () => {
    const want = await bruteForce();
    const got = await served();
    expect(got.size).toBe(want.size);
    expect(want.size).toBe(152);
    for (const [car, w] of want) {
      const g = got.get(car);
      expect(g, car).toBeDefined();
      expect(g!.fid, car).toBe(w.fid);
      expect(Math.abs(g!.km - w.km), car).toBeLessThan(1e-9);
    }
  });
});

// Why each piece is measured on its own: ST_Distance(geography) takes the pair of points
// nearest on the sphere and returns their spheroid distance, so one call on a line (or a
// collection) of several pieces is not the minimum over its pieces. An L-shaped road
// around a property at 33°S: its northern run is 0.2 % farther on the sphere than its
// eastern run and 25 m nearer on the ellipsoid (a degree of latitude is shorter there
// than one of longitude scaled to the same sphere angle). Measured together with its
// same-line neighbour, the KNN piece would report the eastern run's distance.
describe('road distance: a piece and its same-line neighbour are measured apart', () => {
  const LCAR = 'public.ov_l_car';
  const LROADS = 'public.ov_l_roads';
  const LPIECES = 'public.ov_l_sub';
  const LOUT = 'public.ov_l_out';

  beforeAll(async () => {
    await db.pool.query(`
      CREATE TABLE ${LCAR} (car text PRIMARY KEY, uf text NOT NULL, geom geometry(MultiPolygon, 4326) NOT NULL);
      CREATE TABLE ${LROADS} (codigo text PRIMARY KEY, geom geometry(MultiLineString, 4326) NOT NULL);
      INSERT INTO ${LCAR} VALUES ('L', 'RS', ST_Multi(ST_MakeEnvelope(-52.005, -33.005, -51.995, -32.995, 4326)));
      -- 7 edges east along latitude -32.91096 (one piece), then 7 edges south along longitude -51.895 (the next)
      INSERT INTO ${LROADS}
      SELECT 'L', ST_Multi(ST_MakeLine(array_agg(p ORDER BY k))) FROM (
        SELECT i AS k, ST_Point(-52.2 + i * 0.305 / 7, -32.91096, 4326) AS p FROM generate_series(0, 7) i
        UNION ALL
        SELECT 7 + i, ST_Point(-51.895, -32.91096 - i * 0.29 / 7, 4326) FROM generate_series(1, 7) i
      ) v;`);
    const c = await db.pool.connect();
    try {
      await createLinePieces(c, { pieces: tableName(LPIECES), layer: tableName(LROADS), id: sqlText('codigo'), filter: sqlText('true') });
      await c.query(`CREATE INDEX ON ${LPIECES} USING gist (geom); ANALYZE ${LPIECES}`);
      await distancePair(c, { out: tableName(LOUT), car: tableName(LCAR), pieces: tableName(LPIECES), part: sqlText('true') });
    } finally {
      c.release();
    }
  }, 60_000);

  test('the whole line measures farther than its nearest piece; the statement returns the piece minimum', async () => {
    const r = await db.pool.query(`
      SELECT (SELECT count(*) FROM ${LPIECES})::int AS pieces,
             (SELECT ST_Distance(c.geom::geography, l.geom::geography) FROM ${LROADS} l) AS whole,
             (SELECT ST_Distance(c.geom::geography, ST_Collect(s.geom)::geography) FROM ${LPIECES} s) AS collected,
             (SELECT min(ST_Distance(c.geom::geography, s.geom::geography)) FROM ${LPIECES} s) AS per_piece,
             (SELECT distancia_km FROM ${LOUT} o WHERE o.car = c.car) AS km
      FROM ${LCAR} c`);
    const x = r.rows[0];
    expect(x.pieces).toBe(2); // the two runs, neighbours sharing the corner vertex
    // the premise: measured together, the pieces report the run nearest on the sphere
    expect(x.whole - x.per_piece).toBeGreaterThan(20);
    expect(x.collected - x.per_piece).toBeGreaterThan(20);
    expect(x.per_piece).toBeGreaterThan(9300);
    expect(x.per_piece).toBeLessThan(9330);
    expect(Math.abs(x.km - x.per_piece / 1000)).toBeLessThan(1e-9);
  });
});
