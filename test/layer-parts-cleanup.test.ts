// gdalOpenable (src/etl/layer-parts.ts) shows GDAL a layer with mixed-case part names (x.Dbf)
// under lower-case ones, in a folder of its own: beside the .shp, else (a read-only source
// folder) in the temporary folder, as copies. A copy that fails (a full disk) must not leave
// that folder behind: nothing removed it, and every failed open left one more.
// Real file systems: the layer on a tmpfs remounted read-only, TMPDIR a tmpfs too small for
// its .dbf (root, as test/ops-recovery.test.ts's full-disk test).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { extractZip } from '../src/etl/archive.ts';
import { gdalOpenable } from '../src/etl/layer-parts.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'parts-cleanup-'));
const source = path.join(work, 'source');
const tiny = path.join(work, 'tiny');
const mounted: string[] = [];
const savedTmp = process.env.TMPDIR;

function mount(dir: string, options: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const m = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
  if (m.status !== 0) throw new Error(`mount -t tmpfs ${dir} failed (the test needs root): ${m.error?.message ?? m.stderr}`);
  mounted.push(dir);
}

beforeAll(async () => {
  mount(source, 'size=1m');
  await extractZip(path.join(ROOT, 'fixtures/funai-tis/tis_poligonais.zip'), source);
  fs.renameSync(path.join(source, 'tis_poligonais.dbf'), path.join(source, 'tis_poligonais.Dbf')); // GDAL would not find it
  const ro = spawnSync('mount', ['-o', 'remount,ro', source], { encoding: 'utf8' });
  if (ro.status !== 0) throw new Error(`remount read-only failed: ${ro.stderr}`);
  mount(tiny, 'size=8k'); // the .dbf is 17 kB
});

afterAll(() => {
  process.env.TMPDIR = savedTmp;
  if (savedTmp === undefined) delete process.env.TMPDIR;
  for (const dir of mounted.reverse()) spawnSync('umount', [dir]);
  fs.rmSync(work, { recursive: true, force: true });
});

test('a stand-in folder whose copies fail is removed before the error goes up', () => {
  process.env.TMPDIR = tiny;
  expect(() => gdalOpenable(path.join(source, 'tis_poligonais.shp'))).toThrow(/ENOSPC/);
  expect(fs.readdirSync(tiny)).toEqual([]);
});
