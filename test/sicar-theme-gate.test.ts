// The gate's 1 % rule (contract §2) on SICAR's theme zips: a theme whose polygons are mostly
// rejected (a re-export that garbled cod_imovel, here half of APPS) loses its hectares from
// app_ha. Its rejections were listed under their prefix (`apps:…`) but the rule measured the
// main relation only, so the load published with half of every property's APP missing.
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
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-theme-gate-');

async function source(label: string, garble: (i: number) => boolean): Promise<string> {
  const dir = path.join(tmp, label);
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(FIXTURE_GO, 'GO_AREA_IMOVEL.zip'), path.join(dir, 'GO_AREA_IMOVEL.zip'));
  const rows: LayerRow[] = SICAR_FIXTURES.GO.themeRows.filter((r) => r.theme === 'APPS')
    .map((r, i) => ({ geometry: r.geometry, attributes: { ...r.attributes, cod_imovel: garble(i) ? `GO#${i}` : r.attributes.cod_imovel } }));
  await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', THEME_FIELDS, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  return dir;
}

test('a theme with more than 1 % of its polygons rejected blocks the load (exit 3), naming the theme; --force publishes it', async () => {
  const good = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: await source('good', () => false), uf: 'GO' });
  expect(good.status).toBe('published');
  const dir = await source('half', (i) => i % 2 === 0);
  const bad = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO' });
  // Before the fix: published (the main relation had nothing rejected).
  expect(bad.status).toBe('blocked');
  const gate = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [bad.snapshot_id])).rows[0].quality.gate;
  const rule = gate.failures.find((f: { rule: string }) => f.rule === 'input_rejected_share');
  expect(rule).toMatchObject({ threshold: db.cfg.quality.maxRejectedShare });
  expect(rule.message).toMatch(/^APPS: \d+ of \d+ rows rejected/);
  expect(rule.value).toBeGreaterThan(0.4);
  expect((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`)).rows[0].snapshot_id).toBe(good.snapshot_id);
  const forced = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  expect(forced).toMatchObject({ status: 'published', forced: true });
});
