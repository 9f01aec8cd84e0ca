// Normalisation SQL on real-looking agency values it had not met (audit of the helpers in
// sql/ and the classify passes): each case here once damaged data or aborted a load.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Polygon, Position } from 'geojson';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CNUC_FIXTURE, buildCnucZip, type CnucRow } from '../fixtures/cnuc-ucs.ts';
import { cnucUcs } from '../pipelines/cnuc-ucs/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { geojsonToWkb } from '../src/etl/wfs-pages.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let tmp: string;
beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'normalise-sql-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const one = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows[0];

/** A counter-clockwise circle of `r` degrees around (lon, lat), as a polygon ring. */
const circle = (lon: number, lat: number, r: number, n = 48): Polygon => {
  const ring: Position[] = [];
  for (let i = 0; i < n; i++) {
    const a = (2 * Math.PI * i) / n;
    ring.push([Math.round((lon + r * Math.cos(a)) * 1e6) / 1e6, Math.round((lat + r * Math.sin(a)) * 1e6) / 1e6]);
  }
  ring.push(ring[0]);
  return { type: 'Polygon', coordinates: [ring] };
};

describe('the Brazil envelope (etl.in_brazil)', () => {
  // The 2018 marine APAs cover the exclusive economic zone around the oceanic islands, 200
  // nautical miles (≈ 3.3°) around São Pedro e São Paulo (0.92 N, 29.35 W) and around
  // Trindade (20.5 S, 29.3 W) / Martim Vaz (20.47 S, 28.85 W): their eastern edges lie near
  // 26° W and 25.3° W, east of the old 28° W bound, which rejected them whole.
  const SPSP = circle(-29.35, 0.92, 3.3);
  const TRINDADE = circle(-28.85, -20.47, 3.4);

  test('keeps the marine units around the oceanic islands and the land extremes', async () => {
    const r = await one(
      `SELECT etl.in_brazil(ST_GeomFromGeoJSON($1)) AS spsp, etl.in_brazil(ST_GeomFromGeoJSON($2)) AS trindade,
              etl.in_brazil(ST_MakeEnvelope(-73.99, -33.75, -34.79, 5.27)) AS land`,
      [JSON.stringify(SPSP), JSON.stringify(TRINDADE)],
    );
    expect(r).toEqual({ spsp: true, trindade: true, land: true });
  });

  test('still rejects what it is there for: swapped axes, lost minus signs, projected metres', async () => {
    const r = await one(
      `SELECT etl.in_brazil(ST_Point(-15.8, -47.9)) AS swapped_df, etl.in_brazil(ST_Point(-29.9, -51.2)) AS swapped_rs,
              etl.in_brazil(ST_Point(47.9, -15.8)) AS no_minus, etl.in_brazil(ST_Point(-49.1, 15.8)) AS north,
              etl.in_brazil(ST_Point(-36.9, 7.1)) AS unsigned_pb, etl.in_brazil(ST_Point(-21.5, -10)) AS mid_atlantic,
              etl.in_brazil(ST_Point(650000, 8250000)) AS utm, etl.in_brazil(ST_Point(9.18, 45.46)) AS milan`,
    );
    expect(r).toEqual({
      swapped_df: false, swapped_rs: false, no_minus: false, north: false, unsigned_pb: false, mid_atlantic: false, utm: false, milan: false,
    });
  });

  test('a CNUC release loads the São Pedro e São Paulo APA instead of rejecting it as outside Brazil', async () => {
    const apa: CnucRow = {
      id: 'UC6', geometry: SPSP,
      attributes: {
        ...CNUC_FIXTURE[0].attributes, docleg_id: '9106', uc_id: '9006', cd_cnuc: '0000.00.9006', wdpa_pid: '9900006',
        nome_uc: 'ÁREA DE PROTEÇÃO AMBIENTAL DO ARQUIPÉLAGO DE SÃO PEDRO E SÃO PAULO', cria_ano: '19-03-2018',
        cria_ato: 'Decreto 9.313 de 19-03-2018', ha_total: '38346486.66', ha_ato: '38346486.66', uf: 'PERNAMBUCO',
        municipio: 'FERNANDO DE NORONHA (PE)', cerrado: null, marinho: '38346486.66',
      },
    };
    const dir = path.join(tmp, 'marine');
    await buildCnucZip(dir, { rows: [...CNUC_FIXTURE, apa] });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnucUcs, { source: dir });
    expect(out).toMatchObject({ status: 'published', rows_read: 6, rows_loaded: 6, rows_rejected: 0 });
    const row = await one(`SELECT ufs, round(area_calculada_ha / 1e6) AS mha FROM serving.cnuc_ucs WHERE codigo = '0000.00.9006'`);
    expect(row).toEqual({ ufs: ['PE'], mha: 42 }); // π·(3.3°)², the size of the real APA (38 Mha)
  });
});

describe('numbers (etl.parse_number)', () => {
  const parse = async (t: string) => (await one(`SELECT etl.parse_number($1) AS n, etl.parse_whole($1) AS w`, [t]));

  test('a cell with a Unicode space or an out-of-range exponent is no number, not an aborted load', async () => {
    const cases: [string, number | null][] = [
      ['12,5\u2009', 12.5], // thin space after a pasted figure: '\s' matched it, the cast refused it
      ['\u300012', 12],
      ['3183.12\u2028', 3183.12],
      ['12,5\u00a0', 12.5], // NBSP: was no number
      ['1e400', null],
      ['-1e-400', null],
      ['1e+100', 1e100], // a huge double as a writer prints it: still a number
      ['1.5e-300', 1.5e-300],
      ['9'.repeat(400), null],
      ['9'.repeat(400) + ',5', null],
    ];
    for (const [t, n] of cases) expect([t, (await parse(t)).n]).toEqual([t, n]);
    expect(await parse('12\u2009')).toEqual({ n: 12, w: 12 });
  });

  test('what it read before it still reads the same', async () => {
    const cases: [string, number | null][] = [
      ['1.234,5', 1234.5], ['1,5', 1.5], ['-1,5', -1.5], ['1.5E+3', 1500], [' 7 ', 7], ['\t7\n', 7], ['.5', 0.5],
      ['1e99', 1e99], ['503423.58', 503423.58], ['1,234.56', null], ['12,5 ha', null], ['NaN', null], ['Infinity', null], ['', null],
    ];
    for (const [t, n] of cases) expect([t, (await parse(t)).n]).toEqual([t, n]);
  });
});

describe('codes (etl.code_text)', () => {
  test('a no-break space around a code is no part of it', async () => {
    const r = await one(
      `SELECT etl.code_text(E'0000.52.9002\\u00a0') AS cnuc, etl.code_text(E'\\u00a05208707.0') AS ibge, etl.code_text(E'\\u00a0') AS blank,
              etl.code_text(' 33801.0 ') AS dbf_real, etl.code_text('**********') AS overflow, etl.code_text('0000.41.0548') AS dotted`,
    );
    expect(r).toEqual({ cnuc: '0000.52.9002', ibge: '5208707', blank: null, dbf_real: '33801', overflow: null, dotted: '0000.41.0548' });
  });
});

describe('empty geometries (etl.sicar_verdict)', () => {
  const CAR = 'MT-5107925-0123456789ABCDEF0123456789ABCDEF';
  const verdict = async (wkb: Buffer | string) =>
    (await one(`SELECT etl.sicar_verdict($1, 'MT', ST_GeomFromWKB($2), 4674, NULL) AS v`, [CAR, wkb])).v;

  test('a property whose polygon is empty has no geometry, it is not kept', async () => {
    // A WFS feature {"type":"MultiPolygon","coordinates":[[]]} stages as a MULTIPOLYGON of one
    // empty polygon: valid, no bounding box, so the envelope test was NULL and the verdict 'ok'.
    const staged = geojsonToWkb({ type: 'MultiPolygon', coordinates: [[]] });
    expect(staged).not.toBeNull();
    expect(await verdict(staged!)).toBe('no_geometry');
    const wkt = await one(`SELECT etl.sicar_verdict($1, 'MT', 'MULTIPOLYGON EMPTY'::geometry, 4326, NULL) AS v`, [CAR]);
    expect(wkt.v).toBe('no_geometry');
    const land = geojsonToWkb({ type: 'MultiPolygon', coordinates: [[[[-55.8, -12.6], [-55.7, -12.6], [-55.7, -12.5], [-55.8, -12.6]]]] });
    expect(await verdict(land!)).toBe('ok');
  });
});

describe('a timestamp that carries its offset is an instant: its day and time in Brazil', () => {
  // SOURCES: WFS and ArcGIS-like stamps are ISO, some with a 'Z' or an offset. A property
  // registered at 22:30 in Brasília on 10 June written in UTC ('2025-06-11T01:30:00Z') was
  // dated the 11th (its first ten characters): a day after a release of the 10th, so nulled as
  // implausible, and a day apart from the same record read from the shapefile (10/06/2025).
  test('etl.parse_date, etl.parse_timestamp and the implausible rule', async () => {
    const r = await one(
      `SELECT etl.parse_date('2025-06-11T01:30:00Z')::text AS z, etl.parse_date('2025-06-11T01:30:00.250+00:00')::text AS plus,
              etl.parse_date('2025-06-11 01:30:00+0000')::text AS compact, etl.parse_date('2025-06-10T22:30:00-03:00')::text AS local,
              etl.parse_date('2025-06-10T23:30:00-05:00')::text AS acre, etl.parse_date('2025-03-01T02:00:00Z')::text AS month,
              etl.parse_date('2025-01-01T02:59:59Z')::text AS year, etl.parse_date('2025-06-11T03:00:00Z')::text AS midnight,
              etl.parse_date('2025-06-11T01:30:00')::text AS unzoned, etl.parse_date('2025-06-11')::text AS day,
              etl.parse_date('2025-02-30T01:30:00Z') AS bad_day, etl.parse_date('2025-06-11T25:30:00Z')::text AS bad_time,
              etl.parse_timestamp('2025-06-11T01:30:00Z')::text AS ts, etl.parse_timestamp('2025-06-11T01:30:00')::text AS ts_unzoned,
              etl.parse_timestamp('2015-01-10T12:00:00Z')::text AS ts_summer,
              etl.date_unkept_text('2025-06-11T01:30:00Z', '2025-06-10') AS unkept, etl.date_kind('2025-06-11T01:30:00Z') AS kind`,
    );
    expect(r).toEqual({
      z: '2025-06-10', plus: '2025-06-10', compact: '2025-06-10', local: '2025-06-10', acre: '2025-06-11', month: '2025-02-28', year: '2024-12-31',
      midnight: '2025-06-11', unzoned: '2025-06-11', day: '2025-06-11', bad_day: null, bad_time: '2025-06-11',
      // Brasília's wall time, daylight saving of the years that had it included (10:00 BRST in January 2015)
      ts: '2025-06-10 22:30:00', ts_unzoned: '2025-06-11 01:30:00', ts_summer: '2015-01-10 10:00:00',
      unkept: null, kind: 'ok',
    });
  });
});
