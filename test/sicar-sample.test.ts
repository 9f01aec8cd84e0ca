// The SICAR reader on a real file: 4,566 CAR properties in south-west Pará as
// published (reduced attribute set, UTF-8 with .cpg, EPSG:4674 .prj, 3 repeated codes).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const SAMPLE = path.resolve(__dirname, '../fixtures/samples/sicar/car_imoveis_pa_sobre_ucs');
let db: TestDb;
let work: string;
let outcome: RunOutcome;
let report: QualityReport;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sicar-pa-'));
  await zipFiles(path.join(work, 'PA_AREA_IMOVEL.zip'), ['shp', 'shx', 'dbf', 'prj', 'cpg'].map((e) => ({ path: `${SAMPLE}.${e}`, name: `PA_AREA_IMOVEL.${e}` })));
  outcome = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'PA', source: work });
  report = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [outcome.snapshot_id])).rows[0].quality;
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

test('every feature is read; the 3 repeated CAR numbers are resolved', () => {
  expect(outcome.status).toBe('published');
  expect(outcome.rows_read).toBe(4566);
  expect(outcome.rows_loaded).toBe(4563);
  expect(report.facts.dropped).toEqual({ duplicate_car: 3 });
  expect(report.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false });
  expect(report.facts.encoding).toMatchObject({ name: 'UTF-8', assumed: false, replacementChars: 0 });
});

test('the reduced schema is reported: absent optional fields, the extra column kept in extra', async () => {
  expect(report.facts.fields.missingOptional.sort()).toEqual(['cod_estado', 'dat_atuali', 'des_condic', 'ind_status', 'mod_fiscal'].sort());
  expect(report.facts.fields.unknown).toEqual(['invadindo']);
  const r = await db.pool.query(`SELECT count(*) FILTER (WHERE extra ? 'invadindo') AS with_extra, count(DISTINCT municipio) AS municipios FROM serving.car_imovel WHERE uf = 'PA'`);
  expect(r.rows[0]).toEqual({ with_extra: 4563, municipios: 6 });
});

test('computed areas agree with the declared num_area (median ratio about 1.004 per the sample notes)', async () => {
  const r = await db.pool.query(
    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY area_calculada_ha / area_total_ha) AS median FROM serving.car_imovel WHERE uf = 'PA' AND area_total_ha > 0`,
  );
  expect(r.rows[0].median).toBeGreaterThan(0.99);
  expect(r.rows[0].median).toBeLessThan(1.02);
});

test('the whole state is inside south-west Pará, in EPSG:4326, valid', async () => {
  const r = await db.pool.query(
    `SELECT round(ST_XMin(e)::numeric, 4) AS xmin, round(ST_YMin(e)::numeric, 4) AS ymin, round(ST_XMax(e)::numeric, 4) AS xmax, round(ST_YMax(e)::numeric, 4) AS ymax,
            bool_and_valid, srid
       FROM (SELECT ST_Extent(geom)::geometry AS e, bool_and(ST_IsValid(geom)) AS bool_and_valid, min(ST_SRID(geom)) AS srid FROM serving.car_imovel WHERE uf = 'PA') x`,
  );
  expect(r.rows[0]).toEqual({ xmin: -57.6441, ymin: -7.9398, xmax: -51.9784, ymax: -4.2972, bool_and_valid: true, srid: 4326 });
});
