// CAR numbers padded with Unicode spaces (a no-break space after the number, a thin or
// ideographic space before it: attribute tables filled from spreadsheets), through a real
// AREA_IMOVEL zip and a run against PostGIS: trimmed like any other code (etl.trim_spaces),
// so the property loads under its number; a space inside the number is still a bad number.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-car-spaces-');

test('a CAR number padded with Unicode spaces loads as its number; one with a space inside is a bad number', async () => {
  const fields = AREA_IMOVEL_FIELDS.map((f) => (f.name === 'cod_imovel' ? { ...f, length: 60 } : f));
  const cars = [...new Set(SICAR_FIXTURES.GO.areaImovel.map((r) => String(r.attributes.cod_imovel).trim().toUpperCase()))];
  const written: Record<string, string> = {
    [cars[0]]: `${cars[0]}\u00a0`,
    [cars[1]]: `\u2009${cars[1].toLowerCase()}\u3000\u00a0`,
    [cars[2]]: `\u202f${cars[2]}\ufeff`,
    [cars[3]]: `${cars[3].slice(0, 11)}\u00a0${cars[3].slice(11)}`,
  };
  const rows: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => {
    const car = String(r.attributes.cod_imovel).trim().toUpperCase();
    return { geometry: r.geometry, attributes: { ...r.attributes, cod_imovel: written[car] ?? r.attributes.cod_imovel } };
  });
  const dir = path.join(tmp, 'GO');
  fs.mkdirSync(dir, { recursive: true });
  await buildLayerZip(path.join(dir, 'GO_AREA_IMOVEL.zip'), 'GO_AREA_IMOVEL', fields, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  expect(out.error).toBeUndefined();
  const got = new Set((await db.pool.query(`SELECT car FROM serving.car_imovel WHERE uf = 'GO'`)).rows.map((r) => r.car));
  expect(got.has(cars[0])).toBe(true);
  expect(got.has(cars[1])).toBe(true);
  expect(got.has(cars[2])).toBe(true);
  expect(got.has(cars[3])).toBe(false);
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  const inside = SICAR_FIXTURES.GO.areaImovel.filter((r) => String(r.attributes.cod_imovel).trim().toUpperCase() === cars[3]).length;
  expect(q.facts.rejected?.bad_car_number).toBe(inside);
});
