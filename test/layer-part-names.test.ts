// A shapefile's parts with extensions in mixed case (x.Shx, x.Dbf, x.Prj, x.Cpg, even x.Shp:
// Windows tools write such names) are its parts as all-lower or all-upper ones are. Before,
// such a layer failed "has no .shx", or its .Prj and .Cpg went unseen (CRS and encoding
// assumed). The committed funai-tis fixture, its parts renamed, through real runs (a real zip)
// and opened from a real folder (both readers): the same rows, CRS and encoding as the original.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import { extractZip } from '../src/etl/archive.ts';
import { openForStreaming } from '../src/etl/layers.ts';
import { runPipeline } from '../src/etl/run.ts';
import { tempDirPrefix } from '../src/etl/temp-dirs.ts';
import { readFeatures, type VectorLayer } from '../src/etl/vector-reader.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURE_DIR = path.join(ROOT, 'fixtures/funai-tis');

let db: TestDb;
let tmp: string;
let original: string;
const run = (source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, funaiTis, { source });
const quality = async (snapshotId: number) => (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
const servingRows = async () => (await db.pool.query('SELECT *, ST_AsText(geom) AS wkt FROM serving.funai_tis ORDER BY codigo')).rows.map(({ snapshot_id: _, ...r }) => r);

/** The fixture's files copied into `dir`, each layer part's extension as `ext` spells it (e.g. '.dbf' → '.Dbf'). */
function renamedCopy(dir: string, ext: (lower: string) => string): string[] {
  fs.mkdirSync(dir, { recursive: true });
  return fs.readdirSync(original).map((name) => {
    const e = path.extname(name);
    const to = path.join(dir, name.slice(0, -e.length) + (/^\.(shp|shx|dbf|prj|cpg)$/.test(e) ? ext(e) : e));
    fs.copyFileSync(path.join(original, name), to);
    return to;
  });
}

const mixed = (e: string) => (e === '.shp' ? e : e[0] + e[1].toUpperCase() + e.slice(2));
const mixedShpToo = (e: string) => e[0] + e[1].toUpperCase() + e.slice(2);

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'part-names-'));
  original = path.join(tmp, 'original');
  await extractZip(path.join(FIXTURE_DIR, 'tis_poligonais.zip'), original);
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('shapefile parts in mixed case', () => {
  let rows: unknown[];
  let facts: Record<string, unknown>;
  let notes: string[];

  test('the committed fixture, as published (the reference)', async () => {
    const out = await run(FIXTURE_DIR);
    expect(out).toMatchObject({ status: 'published', rows_loaded: 4 });
    rows = await servingRows();
    const q = await quality(out.snapshot_id!);
    facts = { geometry: q.facts.geometry, encoding: q.facts.encoding, fields: q.facts.fields };
    notes = q.facts.notes;
    expect(q.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false });
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
  });

  for (const [what, ext] of [['x.shp, x.Shx, x.Dbf, x.Prj, x.Cpg', mixed], ['x.Shp too', mixedShpToo]] as const) {
    test(`a zip whose members are ${what}: the same rows, CRS and encoding`, async () => {
      const dir = path.join(tmp, `zip-${ext('.shp').slice(1)}`);
      const files = renamedCopy(path.join(dir, 'parts'), ext);
      expect(files.map((f) => path.basename(f)).sort()).toContain(`tis_poligonais${ext('.dbf')}`);
      await zipFiles(path.join(dir, 'tis_poligonais.zip'), files.map((p) => ({ path: p, name: path.basename(p) })));
      const out = await run(path.join(dir, 'tis_poligonais.zip'));
      expect(out).toMatchObject({ status: 'published', rows_loaded: 4 });
      expect(await servingRows()).toEqual(rows);
      const q = await quality(out.snapshot_id!);
      expect({ geometry: q.facts.geometry, encoding: q.facts.encoding, fields: q.facts.fields }).toEqual(facts);
      expect(q.facts.notes).toEqual(notes);
    });
  }

  test('a folder of such parts opens and reads (streaming reader and GDAL) as the original', () => {
    const comparable = (l: VectorLayer) => ({ ...l, file: path.basename(l.file, path.extname(l.file)) });
    const ref = openForStreaming(path.join(original, 'tis_poligonais.shp'), 4326);
    expect(ref).toMatchObject({ srid: 4674, sridAssumed: false, encoding: 'UTF-8', encodingDecidedBy: 'cpg', reader: 'shp-stream' });
    const refFeatures = [...readFeatures(ref)];
    expect(refFeatures).toHaveLength(5);
    for (const ext of [mixed, mixedShpToo]) {
      const dir = path.join(tmp, `folder-${ext('.shp').slice(1)}`);
      renamedCopy(dir, ext);
      const layer = openForStreaming(path.join(dir, `tis_poligonais${ext('.shp')}`), 4326);
      expect(comparable(layer)).toEqual(comparable(ref));
      expect([...readFeatures(layer)]).toEqual(refFeatures);
      // GDAL was shown the parts under names it finds, and nothing of that is left behind.
      expect(fs.readdirSync(dir).sort()).toEqual(fs.readdirSync(original).map((n) => n.replace(/\.(shp|shx|dbf|prj|cpg)$/, (e) => ext(e))).sort());
    }
  });

  test("the stand-in folder a killed read left beside the source goes with the next read there; a live process's stays", () => {
    const dir = path.join(tmp, 'folder-after-kill');
    renamedCopy(dir, mixed);
    const deadPid = spawnSync(process.execPath, ['-e', '0']).pid!; // exited: its pid names no process now
    const dead = path.join(dir, `.${tempDirPrefix('parts', deadPid)}Ab12Cd`);
    const live = path.join(dir, `.${tempDirPrefix('parts', process.pid)}Ef34Gh`);
    const foreign = path.join(dir, `.agro-parts-00000000-${deadPid}-Ij56Kl`); // another machine's (a shared folder)
    for (const d of [dead, live, foreign]) {
      fs.mkdirSync(d);
      fs.writeFileSync(path.join(d, 'tis_poligonais.shp'), 'x');
    }
    const layer = openForStreaming(path.join(dir, 'tis_poligonais.shp'), 4326);
    expect([...readFeatures(layer)]).toHaveLength(5);
    expect(fs.existsSync(dead)).toBe(false);
    expect(fs.existsSync(live)).toBe(true);
    expect(fs.existsSync(foreign)).toBe(true);
    // and the read's own stand-in went with its release, as before
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('.')).sort()).toEqual([path.basename(foreign), path.basename(live)].sort());
  });
});
