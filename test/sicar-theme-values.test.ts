// SICAR theme polygons whose values are not what SOURCES §2.4/§2.5 say (a re-export with
// text fields, a status code outside AT/PE/SU/CA, a cod_tema outside the national
// vocabulary), through a real run against PostGIS: each is loaded as the contract says
// (NULL with its text kept in `extra`, or as written) AND counted in the quality report, as
// AREA_IMOVEL's are. Before, a theme's unparsed num_area and unknown ind_status were kept
// in `extra` but counted nowhere, and a cod_tema outside the vocabulary silently left
// app_ha (APPS codes that are neither APP_* nor *_TOTAL do not count) with nothing said.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES, THEME_FIELDS } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const FIXTURE_GO = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'sicar', 'GO');
let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-theme-values-');

// A re-export that wrote every field as text (as CNUC's DBF does): num_area is C here.
const TEXT_THEME_FIELDS = THEME_FIELDS.map((f) => (f.name === 'num_area' ? { name: 'num_area', type: 'C' as const, length: 30 } : f));

test('a theme\'s unparsed area, unknown status and cod_tema outside §2.5 are loaded as the contract says and counted', async () => {
  const dir = path.join(tmp, 'GO');
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(FIXTURE_GO, 'GO_AREA_IMOVEL.zip'), path.join(dir, 'GO_AREA_IMOVEL.zip'));
  const apps = SICAR_FIXTURES.GO.themeRows.filter((r) => r.theme === 'APPS');
  const changes: Record<string, unknown>[] = [
    { ind_status: 'XX' },
    { num_area: '12,5 ha' },
    {},
    { cod_tema: 'APP_NOVO_TIPO' },
    { cod_tema: 'CORREGO' },
  ];
  const rows: LayerRow[] = apps.map((r, i) => ({
    geometry: r.geometry,
    attributes: { ...r.attributes, num_area: String(r.attributes.num_area), ...(changes[i] ?? {}) },
  }));
  await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', TEXT_THEME_FIELDS, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO' });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');

  // Loaded: every polygon, the bad values NULL with their text kept, the codes as written.
  const tema = (await db.pool.query(`SELECT cod_tema, situacao, area_ha, extra FROM "current".car_tema WHERE uf = 'GO' AND tema_base = 'APPS' ORDER BY cod_tema`)).rows;
  expect(tema).toHaveLength(apps.length);
  const status = tema.filter((r) => r.extra?.situacao);
  expect(status.map((r) => [r.situacao, r.extra.situacao])).toEqual([[null, 'XX']]);
  const area = tema.filter((r) => r.extra?.area_ha);
  expect(area.map((r) => [r.area_ha, r.extra.area_ha])).toEqual([[null, '12,5 ha']]);
  expect(tema.map((r) => r.cod_tema)).toEqual(expect.arrayContaining(['APP_NOVO_TIPO', 'CORREGO']));

  // Counted: as AREA_IMOVEL's values are.
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.unparsed).toMatchObject({ 'apps:area_ha': 1 });
  expect(q.facts.notes).toEqual(expect.arrayContaining([expect.stringMatching(/^APPS: unknown ind_status code "XX" in 1 rows/)]));
  const facts = q.facts as unknown as Record<string, unknown>;
  expect(facts.cod_tema_fora_do_vocabulario).toEqual({ APPS: { APP_NOVO_TIPO: 1, CORREGO: 1 } });
  expect(q.facts.notes).toEqual(expect.arrayContaining([expect.stringMatching(/APPS: cod_tema outside SOURCES §2\.5's vocabulary.*CORREGO × 1/)]));
  // The official codes of the other themes are not listed.
  expect(Object.keys(facts.cod_tema_fora_do_vocabulario as object)).toEqual(['APPS']);
});

test('a negative area or fiscal module (no land measures less than nothing) is NULL, its text kept in extra and counted, in AREA_IMOVEL and in a theme; zero loads', async () => {
  const dir = path.join(tmp, 'GO-negative');
  fs.mkdirSync(dir, { recursive: true });
  const [a, b, c] = SICAR_FIXTURES.GO.areaImovel.filter((p) => p.role === 'plain' || p.role === 'hole' || p.role === 'multipart');
  const props: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => ({
    geometry: r.geometry,
    attributes: { ...r.attributes, ...(r === a ? { num_area: -10.5 } : r === b ? { mod_fiscal: -1 } : r === c ? { num_area: 0 } : {}) },
  }));
  await buildLayerZip(path.join(dir, 'GO_AREA_IMOVEL.zip'), 'GO_AREA_IMOVEL', AREA_IMOVEL_FIELDS, props, { encoding: 'utf8', cpg: 'UTF-8' });
  const apps = SICAR_FIXTURES.GO.themeRows.filter((r) => r.theme === 'APPS');
  await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', THEME_FIELDS,
    apps.map((r, i) => ({ geometry: r.geometry, attributes: { ...r.attributes, ...(i === 0 ? { num_area: -2.25 } : {}) } })), { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO' });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');

  const row = async (car: string) => (await db.pool.query(`SELECT area_total_ha, modulos_fiscais, extra FROM "current".car_imovel WHERE car = $1`, [car])).rows[0];
  const ra = await row(a.attributes.cod_imovel);
  expect([ra.area_total_ha, Number(ra.extra?.area_total_ha)]).toEqual([null, -10.5]);
  const rb = await row(b.attributes.cod_imovel);
  expect([rb.modulos_fiscais, Number(rb.extra?.modulos_fiscais)]).toEqual([null, -1]);
  expect((await row(c.attributes.cod_imovel)).area_total_ha).toBe(0);
  const tema = (await db.pool.query(`SELECT area_ha, extra FROM "current".car_tema WHERE uf = 'GO' AND tema_base = 'APPS' AND extra ? 'area_ha'`)).rows;
  expect(tema.map((r) => [r.area_ha, Number(r.extra.area_ha)])).toEqual([[null, -2.25]]);

  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.unparsed).toMatchObject({ area_total_ha: 1, modulos_fiscais: 1, 'apps:area_ha': 1 });
  expect(q.facts.notes.join('\n')).toMatch(/APPS: 1 num_area value\(s\) are not numbers, or negative areas/);
});
