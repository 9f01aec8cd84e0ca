// The .shp read straight from its zip (layers.ts layersFromZip + read/shp-stream.ts): the
// small parts and the .dbf are extracted, the .shp is inflated once, into the COPY, never
// written to disk. The rows are GDAL's; a damaged or hostile member fails while it streams
// (corrupt_archive / archive_too_large, also when the parser meets the damage before the CRC
// does), the stored zip is distrusted, and a run keeps its previous snapshot.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PRJ_GEOSERVER_SIRGAS2000, PRJ_SIRGAS2000_UTM23S } from '../fixtures/readers.ts';
import { buildSicarState } from '../fixtures/sicar.ts';
import { PRJ_SIRGAS2000, PRJ_WGS84, ShapefileWriter, zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { DEFAULT_ZIP_LIMITS, extractZip } from '../src/etl/archive.ts';
import { fetchSource } from '../src/etl/download.ts';
import { isAgroError } from '../src/errors.ts';
import { layersFromZip } from '../src/etl/layers.ts';
import { stageLayers, type FieldSpec } from '../src/etl/stage-vector.ts';
import type { VectorLayer } from '../src/etl/vector-reader.ts';
import type { TestDb } from './helpers/db.ts';
import { currentSicarGo, expectDamagedAreaImovelRefused, runSicarGo } from './helpers/damaged-sicar.ts';
import { countInflations } from './helpers/inflations.ts';
import { closeReaderContext, openReaderContext, rowDifferences, stageWithBothReaders } from './helpers/readers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let db: TestDb;
let client: pg.PoolClient;
let tmp: string;
let n = 0;

beforeAll(async () => void ({ db, client, tmp } = await openReaderContext('agro-read-zip-')));
afterAll(() => closeReaderContext({ db, client, tmp }));

const specsOf = (layers: VectorLayer[]): FieldSpec[] =>
  [...new Set(layers.flatMap((l) => l.fields.map((f) => f.name)))].map((name) => ({ name: `c_${name}`, aliases: [name] }));

const filesUnder = (dir: string) => fs.readdirSync(dir, { recursive: true }).map(String).sort();

/** A star-shaped ring around (x, y), closed, clockwise (ESRI outer ring order is the writer's business). */
function ring(x: number, y: number, r: number, k: number): number[][] {
  const pts: number[][] = [];
  for (let i = 0; i < k; i++) {
    const a = (2 * Math.PI * i) / k;
    const rr = r * (i % 2 ? 0.6 : 1);
    pts.push([x + rr * Math.cos(a), y + rr * Math.sin(a)]);
  }
  return [...pts, pts[0]];
}

/** A latin1 polygon layer without .cpg (the bytes decide), with holes, multiparts, a NULL shape and accents; zipped. */
async function polygonZip(name: string, features = 300, o: { cpg?: string; compress?: boolean } = {}): Promise<{ zip: string; files: string[] }> {
  const dir = path.join(tmp, `src_${++n}`);
  fs.mkdirSync(dir, { recursive: true });
  const w = await ShapefileWriter.open({
    basePath: path.join(dir, name), shapeType: 'polygon', encoding: 'latin1', cpg: o.cpg ?? null, prj: PRJ_SIRGAS2000,
    fields: [{ name: 'nome', type: 'C', length: 40 }, { name: 'area', type: 'N', length: 12, decimals: 3 }, { name: 'cod', type: 'C', length: 10 }],
  });
  for (let i = 0; i < features; i++) {
    const x = -55 + (i % 30) * 0.1, y = -12 + Math.floor(i / 30) * 0.1;
    const outer = ring(x, y, 0.03, 8 + (i % 13));
    const geom = i % 17 === 3
      ? { type: 'MultiPolygon' as const, coordinates: [[outer], [ring(x + 0.05, y, 0.01, 6)]] }
      : i % 11 === 5
        ? { type: 'Polygon' as const, coordinates: [outer, ring(x, y, 0.005, 5).reverse()] }
        : { type: 'Polygon' as const, coordinates: [outer] };
    await w.write(geom, { nome: `Fazenda São João ${i} — Açaí`.replace('—', '-'), area: i * 1.5, cod: `C${i}` });
  }
  const { files } = await w.close();
  const zip = path.join(dir, `${name}.zip`);
  await zipFiles(zip, files.map((f) => ({ path: f, name: path.basename(f) })), { compress: o.compress ?? true });
  return { zip, files };
}

/** The central directory record of `member` (its offset in the zip). */
function centralRecord(zip: Buffer, member: string): number {
  for (let at = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])); at >= 0; at = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]), at - 1)) {
    const nameLen = zip.readUInt16LE(at + 28);
    if (zip.toString('latin1', at + 46, at + 46 + nameLen) === member) return at;
  }
  throw new Error(`${member} not in the central directory`);
}

/** The offset of `member`'s data in a zip (local header walked). */
function memberData(zip: Buffer, member: string): { data: number; size: number } {
  for (let off = 0; zip.readUInt32LE(off) === 0x04034b50; ) {
    const nameLen = zip.readUInt16LE(off + 26);
    const extraLen = zip.readUInt16LE(off + 28);
    const data = off + 30 + nameLen + extraLen;
    const cd = centralRecord(zip, zip.toString('latin1', off + 30, off + 30 + nameLen));
    const size = zip.readUInt32LE(cd + 20);
    if (zip.toString('latin1', off + 30, off + 30 + nameLen) === member) return { data, size };
    off = data + size + ((zip.readUInt16LE(off + 6) & 8) ? 16 : 0);
  }
  throw new Error(`${member} not found`);
}

/** Stores `zip` in a raw store as the download step would (meta written); returns the stored path and its meta file. */
async function stored(zip: string): Promise<{ file: string; meta: string }> {
  const f = await fetchSource(zip, { destDir: path.join(tmp, `raw_${++n}`), userAgent: 'test', expect: 'zip' });
  expect(fs.existsSync(`${f!.path}.meta.json`)).toBe(true);
  return { file: f!.path, meta: `${f!.path}.meta.json` };
}

describe('the .shp streamed straight from its zip', () => {
  test('same rows as GDAL reading the same zip; the .shp never written to disk; every member inflated once', async () => {
    const { zip } = await polygonZip('camada', 300);
    const work = path.join(tmp, `work_${++n}`);
    let layers: VectorLayer[] = [];
    const seen = await countInflations(async () => {
      layers = await layersFromZip(zip, work, { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
      expect(filesUnder(work)).toEqual(['camada', ...['dbf', 'prj', 'shx'].map((e) => `camada/camada.${e}`)]);
      const r = await stageLayers(client, `streamed_${n}`, layers, specsOf(layers));
      expect(r).toMatchObject({ reader: 'shp-stream', rows: 300, deleted: 0, replacementChars: 0 });
    });
    expect(layers).toHaveLength(1);
    expect(layers[0]).toMatchObject({ reader: 'shp-stream', featureCount: 300, srid: 4674, sridAssumed: false, encoding: 'ISO-8859-1', encodingDecidedBy: 'bytes', zipped: { entry: 'camada.shp' } });
    expect(layers[0].file).toBe(`/vsizip/${zip}/camada.shp`);
    expect([...seen.entries()].sort()).toEqual(['dbf', 'prj', 'shp', 'shx'].map((e) => [`camada.zip:camada.${e}`, 1]));

    // GDAL's reader over the same zip (/vsizip/) and ours, row for row and WKB for WKB.
    const { a, b, ra, rb } = await stageWithBothReaders(client, layers, specsOf(layers));
    expect([ra.rows, rb.rows]).toEqual([300, 300]);
    expect(await rowDifferences(client, a, b)).toEqual([]);
    const accents = await client.query(`SELECT c_nome FROM ${b} WHERE src_seq = 1`);
    expect(accents.rows[0].c_nome).toBe('Fazenda São João 0 - Açaí');
  });

  test('the real-layout GO zip (two layers of one theme): the same rows as GDAL over the extracted files', async () => {
    const zip = path.join(ROOT, 'fixtures/sicar/GO/GO_AREA_IMOVEL.zip');
    const layers = await layersFromZip(zip, path.join(tmp, `go_${++n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    expect(layers.map((l) => [l.name, l.reader, l.zipped?.entry])).toEqual([
      ['GO_AREA_IMOVEL_1', 'shp-stream', 'GO_AREA_IMOVEL_1.shp'],
      ['GO_AREA_IMOVEL_2', 'shp-stream', 'GO_AREA_IMOVEL_2.shp'],
    ]);
    const specs = specsOf(layers);
    const streamed = `go_zip_${n}`;
    expect((await stageLayers(client, streamed, layers, specs)).rows).toBe(9);
    // GDAL on the files extracted by hand, as before the .shp was streamed.
    const dir = path.join(tmp, `go_files_${n}`);
    const { openLayer } = await import('../src/etl/vector-reader.ts');
    const extracted = (await extractZip(zip, dir)).filter((f) => f.endsWith('.shp')).sort().map((s) => ({ ...openLayer(s, { srid: 4674 }), reader: 'gdal' as const }));
    expect(extracted.map((l) => ({ ...l, file: '' }))).toEqual(layers.map(({ zipped: _z, ...l }) => ({ ...l, file: '', reader: 'gdal' })));
    const viaGdal = `go_gdal_${n}`;
    await stageLayers(client, viaGdal, extracted, specs);
    const diff = await rowDifferences(client, viaGdal, streamed);
    expect(diff).toEqual([]);
  });

  // (CP852, not a Western DOS page: a .cpg naming CP437 over this Windows text is overruled by the bytes.)
  test('a layer the streaming reader cannot decode (.cpg 852): the .shp is extracted after all and GDAL reads it from disk', async () => {
    const { zip } = await polygonZip('oem', 20, { cpg: '852' });
    const work = path.join(tmp, `oem_${++n}`);
    const layers = await layersFromZip(zip, work, { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    expect(layers.map((l) => [l.reader, l.encoding, l.zipped])).toEqual([['gdal', 'CP852', undefined]]);
    expect(layers[0].file).toBe(path.join(work, 'oem', 'oem.shp'));
    expect(filesUnder(work)).toContain('oem/oem.shp');
    const r = await stageLayers(client, `oem_${n}`, layers, specsOf(layers));
    expect(r).toMatchObject({ reader: 'gdal', rows: 20 });
  });
});

describe('the layer described without its .shp (a stand-in of the .shx header beside the extracted parts)', () => {
  const FOREIGN = 'GEOGCS["GCS_Local",DATUM["D_Fazenda_Local",SPHEROID["Local_Sphere",6370000.0,0.0]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]';
  const variants: [string, Partial<Parameters<typeof ShapefileWriter.open>[0]>][] = [
    ['no .prj: the SRID assumed', { prj: null }],
    ['SIRGAS 2000 / UTM 23S', { prj: PRJ_SIRGAS2000_UTM23S }],
    ["GeoServer's SIRGAS 2000 (TOWGS84, AXIS)", { prj: PRJ_GEOSERVER_SIRGAS2000 }],
    ['WGS 84, a UTF-8 .cpg', { prj: PRJ_WGS84, encoding: 'utf8', cpg: 'UTF-8' }],
    ['UTF-8 bytes under LDID 0x57, no .cpg', { encoding: 'utf8', cpg: null, languageDriverId: 0x57 }],
    ['LDID 0x02 (CP850)', { languageDriverId: 0x02 }],
    ['an unrecognised .cpg', { cpg: 'KLINGON' }],
  ];
  test.each(variants)('%s: as GDAL describes the extracted files', async (_what, o) => {
    const dir = path.join(tmp, `variant_${++n}`);
    fs.mkdirSync(dir, { recursive: true });
    const w = await ShapefileWriter.open({
      basePath: path.join(dir, 'camada'), shapeType: 'polygon', encoding: 'latin1', prj: PRJ_SIRGAS2000,
      fields: [{ name: 'nome', type: 'C', length: 30 }, { name: 'area', type: 'N', length: 10, decimals: 2 }], ...o,
    });
    for (let i = 0; i < 7; i++) await w.write({ type: 'Polygon', coordinates: [ring(-50 + i, -10, 0.1, 6)] }, { nome: `Vila Nova ${i} ação`, area: i });
    const { files } = await w.close();
    const zip = path.join(dir, 'camada.zip');
    await zipFiles(zip, files.map((f) => ({ path: f, name: path.basename(f) })));
    const [streamed] = await layersFromZip(zip, path.join(tmp, `variant_w_${n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    const { openLayer } = await import('../src/etl/vector-reader.ts');
    const extracted = openLayer(path.join(dir, 'camada.shp'), { srid: 4674 });
    expect({ ...streamed, file: '', zipped: undefined, reader: undefined }).toEqual({ ...extracted, file: '', zipped: undefined, reader: undefined });
    expect(streamed.featureCount).toBe(7);
  });

  test('a .prj whose CRS is none of the candidates fails as it did on the extracted files', async () => {
    const dir = path.join(tmp, `foreign_${++n}`);
    fs.mkdirSync(dir, { recursive: true });
    const w = await ShapefileWriter.open({ basePath: path.join(dir, 'camada'), shapeType: 'polygon', encoding: 'latin1', prj: FOREIGN, fields: [{ name: 'nome', type: 'C', length: 10 }] });
    await w.write({ type: 'Polygon', coordinates: [ring(-50, -10, 0.1, 6)] }, { nome: 'x' });
    const { files } = await w.close();
    const zip = path.join(dir, 'camada.zip');
    await zipFiles(zip, files.map((f) => ({ path: f, name: path.basename(f) })));
    const work = path.join(tmp, `foreign_w_${n}`);
    await expect(layersFromZip(zip, work, { srid: 4674, limits: DEFAULT_ZIP_LIMITS })).rejects.toThrow(/cannot identify the CRS in the \.prj of camada\.shp: "GCS_Local" on datum "(D_)?Fazenda_Local"/);
    // The stand-in's folder is gone with the failure.
    expect(filesUnder(work).filter((f) => f.includes('.open-'))).toEqual([]);
  });
});

describe('a damaged or hostile .shp member, found while it streams', () => {
  test('bytes the parser refuses before the CRC is checked (a stored member, a record header flipped): corrupt_archive, nothing staged, the stored zip distrusted', async () => {
    const { zip } = await polygonZip('cut', 200, { compress: false });
    const bytes = fs.readFileSync(zip);
    const { data } = memberData(bytes, 'cut.shp');
    bytes[data + 100 + 3] ^= 0x40; // record 1's number: 1 → 65, "records out of order" for the parser
    fs.writeFileSync(zip, bytes);
    const s = await stored(zip);
    const layers = await layersFromZip(s.file, path.join(tmp, `cutw_${++n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    expect(layers[0].reader).toBe('shp-stream');
    const err = await stageLayers(client, `cut_${n}`, layers, specsOf(layers)).catch((e) => e);
    expect(isAgroError(err) && err.code, String(err)).toBe('corrupt_archive');
    expect(err.message).toMatch(/CRC mismatch in cut\.shp/);
    expect((await client.query(`SELECT count(*)::int AS n FROM cut_${n}`)).rows[0].n).toBe(0);
    expect(fs.existsSync(s.meta)).toBe(false);
  });

  test('a member that inflates beyond the size its directory declares: corrupt_archive mid-stream; beyond the budget: archive_too_large; the stored zip distrusted', async () => {
    const { zip } = await polygonZip('bomb', 400);
    const bytes = fs.readFileSync(zip);
    const cd = centralRecord(bytes, 'bomb.shp');
    const real = bytes.readUInt32LE(cd + 24);
    bytes.writeUInt32LE(2000, cd + 24); // declares 2,000 bytes, inflates to `real`
    fs.writeFileSync(zip, bytes);
    expect(real).toBeGreaterThan(20_000);

    const lying = await stored(zip);
    const layers = await layersFromZip(lying.file, path.join(tmp, `bombw_${++n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    const err = await stageLayers(client, `bomb_${n}`, layers, specsOf(layers)).catch((e) => e);
    expect(isAgroError(err) && err.code, String(err)).toBe('corrupt_archive');
    expect(err.message).toMatch(/bomb\.shp inflates beyond its declared 2000 bytes/);
    expect(fs.existsSync(lying.meta)).toBe(false);

    // A bound the declared sizes pass but the inflated bytes do not: refused while streaming, on the archive's one budget.
    const small = await stored(zip);
    const dbf = memberData(fs.readFileSync(zip), 'bomb.dbf');
    expect(dbf.size).toBeGreaterThan(0);
    const limits = { ...DEFAULT_ZIP_LIMITS, maxBytes: 60_000 };
    const tight = await layersFromZip(small.file, path.join(tmp, `bombw_${++n}`), { srid: 4674, limits });
    const over = await stageLayers(client, `bomb_${n}`, tight, specsOf(tight)).catch((e) => e);
    expect(isAgroError(over) && over.code, String(over)).toBe('archive_too_large');
    expect(over.message).toMatch(/bomb\.shp inflates beyond the 0\.1 MiB allowed/);
    expect(fs.existsSync(small.meta)).toBe(false);
  });

  test('a .shp whose declared ratio breaks the bound is refused before anything is inflated or written', async () => {
    const { zip } = await polygonZip('ratio', 300);
    const work = path.join(tmp, `ratiow_${++n}`);
    const limits = { maxBytes: DEFAULT_ZIP_LIMITS.maxBytes, maxRatio: 1.2, ratioFloor: 1024 };
    const seen = await countInflations(async () => {
      await expect(layersFromZip(zip, work, { srid: 4674, limits })).rejects.toMatchObject({ code: 'archive_too_large', message: expect.stringMatching(/ratio\.(shp|dbf|shx) declares/) });
    });
    expect([...seen.keys()]).toEqual([]);
    expect(fs.existsSync(work) ? filesUnder(work).filter((f) => /\.\w+$/.test(f)) : []).toEqual([]);
  });

  test('SICAR: a .shp that breaks mid-stream fails the run with corrupt_archive, the previous snapshot stays served, the next good run recovers', async () => {
    const good = path.join(tmp, 'GO');
    await buildSicarState('GO', good);
    expect((await runSicarGo(db, good)).status).toBe('published');
    const before = await currentSicarGo(db);

    // The same state with AREA_IMOVEL's zip rebuilt stored (no compression) and a record header of its first layer damaged.
    const bad = path.join(tmp, 'GO-bad');
    fs.mkdirSync(bad, { recursive: true });
    for (const f of fs.readdirSync(good)) fs.copyFileSync(path.join(good, f), path.join(bad, f));
    const parts = path.join(tmp, 'GO-parts');
    const members = await extractZip(path.join(good, 'GO_AREA_IMOVEL.zip'), parts);
    const zip = path.join(bad, 'GO_AREA_IMOVEL.zip');
    await zipFiles(zip, members.map((f) => ({ path: f, name: path.relative(parts, f) })), { compress: false });
    const bytes = fs.readFileSync(zip);
    const { data } = memberData(bytes, 'GO_AREA_IMOVEL_1.shp');
    bytes[data + 100 + 3] ^= 0x40;
    fs.writeFileSync(zip, bytes);

    await expectDamagedAreaImovelRefused(db, { bad, good, before, message: /GO_AREA_IMOVEL_1\.shp/ });
  }, 120_000);
});
