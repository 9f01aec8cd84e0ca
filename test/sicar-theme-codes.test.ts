// SICAR theme codes written in another case ('app_total', 'App_Rio_Ate_10': a re-export that
// changed the case of the national vocabulary), through a real run against PostGIS: app_ha
// is the same as from the official upper-case codes; the codes are published as written.
// Likewise with blanks or hyphens for the underscores ('APP TOTAL', 'APP-RIO-ATE-10'): such
// codes fell in no role and the property's APP hectares were published as 0.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { SICAR_FIXTURES, THEME_FIELDS } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const FIXTURE_GO = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'sicar', 'GO');
let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-theme-codes-');

async function load(label: string, code: (c: string) => string) {
  const dir = path.join(tmp, label);
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(FIXTURE_GO, 'GO_AREA_IMOVEL.zip'), path.join(dir, 'GO_AREA_IMOVEL.zip'));
  const rows: LayerRow[] = SICAR_FIXTURES.GO.themeRows.filter((r) => r.theme === 'APPS')
    .map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes, cod_tema: code(String(r.attributes.cod_tema)) } }));
  await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', THEME_FIELDS, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  expect(out.error).toBeUndefined();
  const ha = (await db.pool.query(`SELECT car, round(app_ha::numeric, 6)::float8 AS app_ha FROM serving.car_imovel WHERE uf = 'GO' ORDER BY car`)).rows;
  const codes = (await db.pool.query(`SELECT DISTINCT cod_tema FROM "current".car_tema WHERE uf = 'GO' ORDER BY 1`)).rows.map((r) => r.cod_tema);
  const facts = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality.facts;
  return { ha, codes, outside: facts.cod_tema_fora_do_vocabulario };
}

test('app_ha does not depend on the case of cod_tema', async () => {
  const want = await load('upper', (c) => c);
  expect(want.ha.filter((r) => r.app_ha > 0).length).toBeGreaterThan(1);
  expect(want.codes).toContain('APP_TOTAL');
  const mixed = (c: string) => c.toLowerCase().replace(/(^|_)([a-z])/g, (_m, s: string, l: string) => s + l.toUpperCase()); // App_Rio_Ate_10
  for (const [label, code] of [['lower', (c: string) => c.toLowerCase()], ['mixed', mixed]] as const) {
    const got = await load(label, code);
    expect(got.ha, label).toEqual(want.ha);
    expect(got.codes, label).toEqual(want.codes.map(code).sort());
  }
});

test('app_ha does not depend on blanks or hyphens written for the underscores of cod_tema', async () => {
  const want = await load('official', (c) => c);
  expect(want.ha.filter((r) => r.app_ha > 0).length).toBeGreaterThan(1);
  for (const [label, code] of [['blanks', (c: string) => c.replace(/_/g, ' ')], ['hyphens', (c: string) => c.replace(/_/g, '-').toLowerCase()]] as const) {
    const got = await load(label, code);
    expect(got.ha, label).toEqual(want.ha);
    expect(got.codes, label).toEqual(want.codes.map(code).sort());
    // The same codes of the vocabulary, not listed as outside it.
    expect(got.outside, label).toBeUndefined();
  }
});
