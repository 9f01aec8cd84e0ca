import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Geometry } from 'geojson';
import yauzl from 'yauzl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-ignore -- the shapefile package ships no type declarations
import * as shapefileUntyped from 'shapefile';
import {
  PRJ_SIRGAS2000,
  PRJ_WGS84,
  ShapefileWriter,
  zipFiles,
  type DbfField,
} from '../fixtures/lib/shapefile-writer.ts';
import {
  AREA_IMOVEL_FIELDS,
  buildSicarState,
  CAR_NUMBER_RE,
  IBGE_UF_CODE,
  MUNICIPALITIES,
  SICAR_FIXTURES,
  sicarRows,
  sicarZipNames,
  THEME_FIELDS,
  type SicarUf,
} from '../fixtures/sicar.ts';

interface ShpFeature {
  type: 'Feature';
  properties: Record<string, unknown>;
  geometry: Geometry | null;
}
interface ShpSource {
  bbox: number[];
  read(): Promise<{ done: boolean; value: ShpFeature }>;
}
interface ShapefileLib {
  open(shp: string | Uint8Array, dbf?: string | Uint8Array, options?: { encoding?: string }): Promise<ShpSource>;
}
const shapefile = shapefileUntyped as unknown as ShapefileLib;

async function readAll(
  shp: string | Uint8Array,
  dbf: string | Uint8Array,
  encoding: string,
): Promise<{ bbox: number[]; features: ShpFeature[] }> {
  const src = await shapefile.open(shp, dbf, { encoding });
  const features: ShpFeature[] = [];
  for (let r = await src.read(); !r.done; r = await src.read()) features.push(r.value);
  return { bbox: src.bbox, features };
}

function gdal(cmd: 'ogrinfo' | 'ogr2ogr', args: string[]): string {
  return execFileSync(`/usr/bin/${cmd}`, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

interface GeoJsonOut {
  features: { properties: Record<string, unknown>; geometry: { type: string; coordinates: unknown } | null }[];
}
function gdalGeoJson(file: string, config: string[] = []): GeoJsonOut {
  return JSON.parse(gdal('ogr2ogr', [...config, '-f', 'GeoJSON', '/vsistdout/', file])) as GeoJsonOut;
}

function gdalSummary(file: string, config: string[] = []): { count: number; extent: number[]; geometry: string; fields: string[]; srs: string } {
  const out = gdal('ogrinfo', [...config, '-ro', '-al', '-so', file]);
  const count = Number(/Feature Count: (\d+)/.exec(out)?.[1]);
  const e = /Extent: \(([-\d.]+), ([-\d.]+)\) - \(([-\d.]+), ([-\d.]+)\)/.exec(out);
  const geometry = /Geometry: (.+)/.exec(out)?.[1] ?? '';
  const fields = [...out.matchAll(/^(\w+): (String|Real|Integer|Integer64|Date) \(([\d.]+)\)$/gm)].map((m) => `${m[1]}:${m[2]}(${m[3]})`);
  const srs = /ID\["EPSG",(\d+)\]\]\s*\nData axis/.exec(out)?.[1] ?? (out.includes('(unknown)') ? 'unknown' : '?');
  return { count, extent: e ? e.slice(1, 5).map(Number) : [], geometry, fields, srs };
}

/** Shoelace sum: > 0 counter-clockwise, < 0 clockwise. */
function signedArea(ring: number[][]): number {
  let s = 0;
  for (let i = 0; i < ring.length - 1; i++) s += ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1];
  return s / 2;
}

function zipEntries(zipPath: string): Promise<{ name: string; crc32: number; size: number; mtime: Date; data: Buffer }[]> {
  return new Promise((resolve, reject) => {
    yauzl.open(zipPath, { lazyEntries: true }, (err, zip) => {
      if (err || !zip) return reject(err ?? new Error('no zip'));
      const out: { name: string; crc32: number; size: number; mtime: Date; data: Buffer }[] = [];
      zip.on('error', reject);
      zip.on('end', () => resolve(out));
      zip.on('entry', (entry: yauzl.Entry) => {
        zip.openReadStream(entry, (e2, stream) => {
          if (e2 || !stream) return reject(e2 ?? new Error('no stream'));
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('error', reject);
          stream.on('end', () => {
            out.push({
              name: entry.fileName,
              crc32: entry.crc32,
              size: entry.uncompressedSize,
              mtime: entry.getLastModDate(),
              data: Buffer.concat(chunks),
            });
            zip.readEntry();
          });
        });
      });
      zip.readEntry();
    });
  });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'shapefile-writer-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------

describe('ShapefileWriter: polygon layer, latin1 DBF without .cpg', () => {
  const fields: DbfField[] = [
    { name: 'nome', type: 'C', length: 12 },
    { name: 'area', type: 'N', length: 12, decimals: 3 },
    { name: 'codigo', type: 'N', length: 9 },
    { name: 'taxa', type: 'F', length: 10, decimals: 4 },
    { name: 'data', type: 'D', length: 8 },
    { name: 'ativo', type: 'L', length: 1 },
  ];
  let base: string;
  let files: string[];
  let count: number;

  beforeAll(async () => {
    base = path.join(dir, 'poly', 'GO_TESTE');
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', fields, encoding: 'latin1', prj: PRJ_SIRGAS2000, lastUpdate: new Date(Date.UTC(2024, 0, 15)) });
    // 0: RFC 7946 orientation (outer CCW, hole CW): both rings must be reversed.
    await w.write(
      { type: 'Polygon', coordinates: [[[0, 0], [10, 0], [10, 10], [0, 10], [0, 0]], [[2, 2], [2, 4], [4, 4], [4, 2], [2, 2]]] },
      { nome: 'Goiânia', area: 1234.5678, codigo: 5208707, taxa: 0.12345, data: new Date(Date.UTC(2023, 4, 6)), ativo: true },
    );
    // 1: MultiPolygon; part A already ESRI-oriented (kept), part B open and CCW (closed + reversed).
    await w.write(
      {
        type: 'MultiPolygon',
        coordinates: [
          [[[20, 20], [20, 25], [25, 25], [25, 20], [20, 20]], [[21, 21], [22, 21], [22, 22], [21, 22], [21, 21]]],
          [[[30, 30], [31.5, 30], [31.5, 31.25]]],
        ],
      },
      { nome: "São João d'Aliança", area: -0.5, codigo: 42, taxa: -3, data: '2024-02-29', ativo: false },
    );
    // 2: real-looking coordinates with many digits; a non-latin1 char.
    await w.write(
      { type: 'Polygon', coordinates: [[[-49.2648123456789, -16.6869987654321], [-49.2, -16.7], [-49.25, -16.6], [-49.2648123456789, -16.6869987654321]]] },
      { nome: 'Ação €', area: 0, codigo: null, taxa: 1e-5, data: '20000101', ativo: null },
    );
    // 3: null geometry, null attributes.
    await w.write(null, { nome: null, area: null });
    ({ files, count } = await w.close());
  });

  it('reports the files and count', () => {
    expect(count).toBe(4);
    expect(files).toEqual([`${base}.shp`, `${base}.shx`, `${base}.dbf`, `${base}.prj`]);
  });

  it('writes exact headers (lengths, bbox, record count, .shx offsets)', async () => {
    const shp = await readFile(`${base}.shp`);
    const shx = await readFile(`${base}.shx`);
    // record contents: 44 + 4*parts + 16*points
    const c0 = 44 + 4 * 2 + 16 * 10;
    const c1 = 44 + 4 * 3 + 16 * 14;
    const c2 = 44 + 4 * 1 + 16 * 4;
    const c3 = 4;
    expect(shp.length).toBe(100 + 8 * 4 + c0 + c1 + c2 + c3);
    expect(shp.readInt32BE(0)).toBe(9994);
    expect(shp.readInt32BE(24)).toBe(shp.length / 2);
    expect(shp.readInt32LE(28)).toBe(1000);
    expect(shp.readInt32LE(32)).toBe(5);
    expect([36, 44, 52, 60].map((o) => shp.readDoubleLE(o))).toEqual([-49.2648123456789, -16.7, 31.5, 31.25]);
    expect(shx.length).toBe(100 + 8 * 4);
    expect(shx.readInt32BE(24)).toBe(shx.length / 2);
    const offsets = [0, 1, 2, 3].map((i) => [shx.readInt32BE(100 + 8 * i), shx.readInt32BE(104 + 8 * i)]);
    expect(offsets).toEqual([
      [50, c0 / 2],
      [50 + (8 + c0) / 2, c1 / 2],
      [50 + (16 + c0 + c1) / 2, c2 / 2],
      [50 + (24 + c0 + c1 + c2) / 2, c3 / 2],
    ]);
    // record numbers are 1-based, the null shape is type 0
    expect(shp.readInt32BE(100)).toBe(1);
    expect(shp.readInt32LE(offsets[3][0] * 2 + 8)).toBe(0);
    expect(shp.readInt32BE(offsets[3][0] * 2)).toBe(4);

    const dbf = await readFile(`${base}.dbf`);
    expect(dbf[0]).toBe(0x03);
    expect([dbf[1], dbf[2], dbf[3]]).toEqual([124, 1, 15]);
    expect(dbf.readUInt32LE(4)).toBe(4);
    expect(dbf.readUInt16LE(8)).toBe(32 + 32 * 6 + 1);
    expect(dbf.readUInt16LE(10)).toBe(1 + 12 + 12 + 9 + 10 + 8 + 1);
    expect(dbf[32 + 32 * 6]).toBe(0x0d);
    expect(dbf.length).toBe(32 + 32 * 6 + 1 + 4 * 53 + 1);
    expect(dbf[dbf.length - 1]).toBe(0x1a);
    const rec = (i: number) => dbf.subarray(225 + 53 * i, 225 + 53 * (i + 1)).toString('latin1');
    const row = (...cols: [string, number, 'L' | 'R'][]) => ' ' + cols.map(([v, n, a]) => (a === 'L' ? v.padEnd(n) : v.padStart(n))).join('');
    expect(rec(0)).toBe(row(['Goiânia', 12, 'L'], ['1234.568', 12, 'R'], ['5208707', 9, 'R'], ['0.1235', 10, 'R'], ['20230506', 8, 'L'], ['T', 1, 'L']));
    expect(rec(1)).toBe(row(["São João d'A", 12, 'L'], ['-0.500', 12, 'R'], ['42', 9, 'R'], ['-3.0000', 10, 'R'], ['20240229', 8, 'L'], ['F', 1, 'L']));
    expect(rec(2)).toBe(row(['Ação ?', 12, 'L'], ['0.000', 12, 'R'], ['', 9, 'R'], ['0.0000', 10, 'R'], ['20000101', 8, 'L'], ['?', 1, 'L']));
    expect(rec(3)).toBe(' ' + ' '.repeat(51) + '?');
    expect(await readFile(`${base}.prj`, 'utf8')).toBe(PRJ_SIRGAS2000);
  });

  it('reads back with the shapefile package (latin1)', async () => {
    const { bbox, features } = await readAll(`${base}.shp`, `${base}.dbf`, 'latin1');
    expect(bbox).toEqual([-49.2648123456789, -16.7, 31.5, 31.25]);
    expect(features).toHaveLength(4);
    expect(features[0].geometry).toEqual({
      type: 'Polygon',
      coordinates: [
        [[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]],
        [[2, 2], [4, 2], [4, 4], [2, 4], [2, 2]],
      ],
    });
    expect(features[1].geometry).toEqual({
      type: 'MultiPolygon',
      coordinates: [
        [[[20, 20], [20, 25], [25, 25], [25, 20], [20, 20]], [[21, 21], [22, 21], [22, 22], [21, 22], [21, 21]]],
        [[[30, 30], [31.5, 31.25], [31.5, 30], [30, 30]]],
      ],
    });
    expect(features[2].geometry).toEqual({
      type: 'Polygon',
      coordinates: [[[-49.2648123456789, -16.6869987654321], [-49.25, -16.6], [-49.2, -16.7], [-49.2648123456789, -16.6869987654321]]],
    });
    expect(features[3].geometry).toBeNull();
    // ring orientation: every outer ring clockwise, every hole counter-clockwise
    const g0 = features[0].geometry as { coordinates: number[][][] };
    expect(signedArea(g0.coordinates[0])).toBe(-100);
    expect(signedArea(g0.coordinates[1])).toBe(4);

    const p = features.map((f) => f.properties);
    expect(p[0]).toMatchObject({ nome: 'Goiânia', area: 1234.568, codigo: 5208707, taxa: 0.1235, ativo: true });
    expect(p[1]).toMatchObject({ nome: "São João d'A", area: -0.5, codigo: 42, taxa: -3, ativo: false });
    expect(p[2]).toMatchObject({ nome: 'Ação ?', area: 0, codigo: null, taxa: 0, ativo: null });
    expect(p[3]).toMatchObject({ nome: null, area: null, codigo: null, taxa: null, ativo: null });
    // (the package turns a blank D field into a bogus Date(0, -1, 0); GDAL below sees it as unset)
    const d0 = p[0].data as Date;
    expect([d0.getFullYear(), d0.getMonth() + 1, d0.getDate()]).toEqual([2023, 5, 6]);
    const d1 = p[1].data as Date;
    expect([d1.getFullYear(), d1.getMonth() + 1, d1.getDate()]).toEqual([2024, 2, 29]);
  });

  it('reads back with GDAL (ogrinfo summary, ogr2ogr GeoJSON, SHAPE_ENCODING=ISO-8859-1)', () => {
    const cfg = ['--config', 'SHAPE_ENCODING', 'ISO-8859-1'];
    const s = gdalSummary(`${base}.shp`, cfg);
    expect(s.count).toBe(4);
    expect(s.geometry).toBe('Polygon');
    expect(s.extent).toEqual([-49.264812, -16.7, 31.5, 31.25]);
    expect(s.srs).toBe('4674');
    expect(s.fields).toEqual(['nome:String(12.0)', 'area:Real(12.3)', 'codigo:Integer(9.0)', 'taxa:Real(10.4)', 'data:Date(10.0)', 'ativo:String(1.0)']);

    const gj = gdalGeoJson(`${base}.shp`, cfg);
    expect(gj.features).toHaveLength(4);
    expect(gj.features[0].geometry).toEqual({
      type: 'Polygon',
      coordinates: [
        [[0, 0], [0, 10], [10, 10], [10, 0], [0, 0]],
        [[2, 2], [4, 2], [4, 4], [2, 4], [2, 2]],
      ],
    });
    expect(gj.features[1].geometry).toEqual({
      type: 'MultiPolygon',
      coordinates: [
        [[[20, 20], [20, 25], [25, 25], [25, 20], [20, 20]], [[21, 21], [22, 21], [22, 22], [21, 22], [21, 21]]],
        [[[30, 30], [31.5, 31.25], [31.5, 30], [30, 30]]],
      ],
    });
    expect(gj.features[2].geometry).toEqual({
      type: 'Polygon',
      coordinates: [[[-49.2648123456789, -16.6869987654321], [-49.25, -16.6], [-49.2, -16.7], [-49.2648123456789, -16.6869987654321]]],
    });
    expect(gj.features[3].geometry).toBeNull();
    expect(gj.features.map((f) => f.properties)).toEqual([
      { nome: 'Goiânia', area: 1234.568, codigo: 5208707, taxa: 0.1235, data: '2023-05-06', ativo: 'T' },
      { nome: "São João d'A", area: -0.5, codigo: 42, taxa: -3, data: '2024-02-29', ativo: 'F' },
      { nome: 'Ação ?', area: 0, codigo: null, taxa: 0, data: '2000-01-01', ativo: '?' },
      { nome: null, area: null, codigo: null, taxa: null, ativo: '?' }, // blank date: unset, so GDAL omits it
    ]);
  });
});

describe('ShapefileWriter: polyline layer, UTF-8 DBF with .cpg', () => {
  let base: string;
  beforeAll(async () => {
    base = path.join(dir, 'line', 'rios');
    const w = await ShapefileWriter.open({
      basePath: base,
      shapeType: 'polyline',
      encoding: 'utf8',
      cpg: 'UTF-8',
      prj: PRJ_SIRGAS2000,
      fields: [
        { name: 'nome', type: 'C', length: 5 },
        { name: 'extensao', type: 'N', length: 10, decimals: 2 },
      ],
    });
    // LineStrings are written as given (no re-orientation)
    await w.write({ type: 'LineString', coordinates: [[-49.3, -16.6], [-49.2, -16.5], [-49.1, -16.55]] }, { nome: 'Goiânia', extensao: 12.345 });
    await w.write(
      { type: 'MultiLineString', coordinates: [[[-56.1, -15.6], [-56.0, -15.5]], [[-55.9, -15.4], [-55.8, -15.45], [-55.7, -15.3]]] },
      { nome: 'ãããã', extensao: 7 },
    );
    await w.write({ type: 'LineString', coordinates: [[1, 2], [3, 4]] }, { nome: 'Cuiabá' });
    const r = await w.close();
    expect(r.count).toBe(3);
    expect(r.files.map((f) => path.extname(f))).toEqual(['.shp', '.shx', '.dbf', '.prj', '.cpg']);
  });

  it('truncates UTF-8 text at a character boundary', async () => {
    const dbf = await readFile(`${base}.dbf`);
    const hdr = 32 + 32 * 2 + 1;
    const rec = (i: number) => dbf.subarray(hdr + 16 * i, hdr + 16 * (i + 1));
    // 'Goiâ' is 5 bytes; 'ãã' is 4 bytes + 1 space; 'Cuiabá' would need 7 bytes: cut before 'á'
    expect(rec(0).toString('utf8')).toBe(' ' + 'Goiâ' + '12.35'.padStart(10));
    expect(rec(1).toString('utf8')).toBe(' ' + 'ãã ' + '7.00'.padStart(10));
    expect(rec(2).toString('utf8')).toBe(' ' + 'Cuiab' + ' '.repeat(10));
    expect(rec(0).length).toBe(16);
    expect(await readFile(`${base}.cpg`, 'utf8')).toBe('UTF-8');
  });

  it('reads back with the shapefile package (utf-8)', async () => {
    const { bbox, features } = await readAll(`${base}.shp`, `${base}.dbf`, 'utf-8');
    expect(bbox).toEqual([-56.1, -16.6, 3, 4]);
    expect(features.map((f) => f.geometry)).toEqual([
      { type: 'LineString', coordinates: [[-49.3, -16.6], [-49.2, -16.5], [-49.1, -16.55]] },
      { type: 'MultiLineString', coordinates: [[[-56.1, -15.6], [-56.0, -15.5]], [[-55.9, -15.4], [-55.8, -15.45], [-55.7, -15.3]]] },
      { type: 'LineString', coordinates: [[1, 2], [3, 4]] },
    ]);
    expect(features.map((f) => f.properties)).toEqual([
      { nome: 'Goiâ', extensao: 12.35 },
      { nome: 'ãã', extensao: 7 },
      { nome: 'Cuiab', extensao: null },
    ]);
  });

  it('reads back with GDAL (encoding from the .cpg)', () => {
    const s = gdalSummary(`${base}.shp`);
    expect(s).toMatchObject({ count: 3, geometry: 'Line String', extent: [-56.1, -16.6, 3, 4], srs: '4674' });
    const gj = gdalGeoJson(`${base}.shp`);
    expect(gj.features.map((f) => f.geometry)).toEqual([
      { type: 'LineString', coordinates: [[-49.3, -16.6], [-49.2, -16.5], [-49.1, -16.55]] },
      { type: 'MultiLineString', coordinates: [[[-56.1, -15.6], [-56.0, -15.5]], [[-55.9, -15.4], [-55.8, -15.45], [-55.7, -15.3]]] },
      { type: 'LineString', coordinates: [[1, 2], [3, 4]] },
    ]);
    expect(gj.features.map((f) => f.properties)).toEqual([
      { nome: 'Goiâ', extensao: 12.35 },
      { nome: 'ãã', extensao: 7 },
      { nome: 'Cuiab', extensao: null },
    ]);
  });
});

describe('ShapefileWriter: point layer, latin1 with .cpg ISO-8859-1, WGS 84', () => {
  let base: string;
  beforeAll(async () => {
    base = path.join(dir, 'point', 'sedes');
    const w = await ShapefileWriter.open({
      basePath: base,
      shapeType: 'point',
      encoding: 'latin1',
      cpg: 'ISO-8859-1',
      prj: PRJ_WGS84,
      fields: [
        { name: 'cidade', type: 'C', length: 20 },
        { name: 'ibge', type: 'C', length: 7 },
      ],
    });
    await w.write({ type: 'Point', coordinates: [-47.9292, -15.7801] }, { cidade: 'Brasília', ibge: '5300108' });
    await w.write(null, { cidade: 'sem geometria' });
    await w.write({ type: 'Point', coordinates: [-56.0974, -15.6014] }, { cidade: 'Cuiabá', ibge: '5103403' });
    await w.write({ type: 'Point', coordinates: [-49.2648, -16.6869, 750] }, { cidade: 'Goiânia', ibge: '5208707' });
    await w.close();
  });

  it('writes exact point records', async () => {
    const shp = await readFile(`${base}.shp`);
    expect(shp.length).toBe(100 + 3 * (8 + 20) + (8 + 4));
    expect(shp.readInt32LE(32)).toBe(1);
    expect([36, 44, 52, 60].map((o) => shp.readDoubleLE(o))).toEqual([-56.0974, -16.6869, -47.9292, -15.6014]);
  });

  it('reads back with the shapefile package', async () => {
    const { bbox, features } = await readAll(`${base}.shp`, `${base}.dbf`, 'latin1');
    expect(bbox).toEqual([-56.0974, -16.6869, -47.9292, -15.6014]);
    expect(features.map((f) => f.geometry)).toEqual([
      { type: 'Point', coordinates: [-47.9292, -15.7801] },
      null,
      { type: 'Point', coordinates: [-56.0974, -15.6014] },
      { type: 'Point', coordinates: [-49.2648, -16.6869] },
    ]);
    expect(features.map((f) => f.properties.cidade)).toEqual(['Brasília', 'sem geometria', 'Cuiabá', 'Goiânia']);
    expect(features[1].properties.ibge).toBeNull();
  });

  it('reads back with GDAL (.cpg honoured, WGS 84 identified)', () => {
    const s = gdalSummary(`${base}.shp`);
    expect(s).toMatchObject({ count: 4, geometry: 'Point', extent: [-56.0974, -16.6869, -47.9292, -15.6014], srs: '4326' });
    const gj = gdalGeoJson(`${base}.shp`);
    expect(gj.features.map((f) => f.geometry?.coordinates ?? null)).toEqual([[-47.9292, -15.7801], null, [-56.0974, -15.6014], [-49.2648, -16.6869]]);
    expect(gj.features.map((f) => f.properties)).toEqual([
      { cidade: 'Brasília', ibge: '5300108' },
      { cidade: 'sem geometria', ibge: null },
      { cidade: 'Cuiabá', ibge: '5103403' },
      { cidade: 'Goiânia', ibge: '5208707' },
    ]);
  });
});

describe('ShapefileWriter: streaming and misuse', () => {
  it('writes many features through small chunks, exactly', async () => {
    const base = path.join(dir, 'many', 'grade');
    const n = 20_000;
    const w = await ShapefileWriter.open({
      basePath: base,
      shapeType: 'polygon',
      encoding: 'utf8',
      fields: [{ name: 'id', type: 'N', length: 8 }],
      chunkSize: 4096,
    });
    for (let i = 0; i < n; i++) {
      const x = -50 + (i % 200) * 0.01;
      const y = -17 + Math.floor(i / 200) * 0.01;
      await w.write({ type: 'Polygon', coordinates: [[[x, y], [x + 0.005, y], [x + 0.005, y + 0.005], [x, y + 0.005], [x, y]]] }, { id: i });
    }
    const { count } = await w.close();
    expect(count).toBe(n);
    const rec = 8 + 44 + 4 + 16 * 5;
    expect((await stat(`${base}.shp`)).size).toBe(100 + n * rec);
    expect((await stat(`${base}.shx`)).size).toBe(100 + n * 8);
    expect((await stat(`${base}.dbf`)).size).toBe(32 + 32 + 1 + n * 9 + 1);
    const { bbox, features } = await readAll(`${base}.shp`, `${base}.dbf`, 'utf-8');
    expect(features).toHaveLength(n);
    expect(features.map((f) => f.properties.id)).toEqual(Array.from({ length: n }, (_, i) => i));
    const last = features[n - 1].geometry as { coordinates: number[][][] };
    const x = -50 + 199 * 0.01;
    const y = -17 + 99 * 0.01;
    expect(last.coordinates[0]).toEqual([[x, y], [x, y + 0.005], [x + 0.005, y + 0.005], [x + 0.005, y], [x, y]]);
    expect(bbox).toEqual([-50, -17, -50 + 199 * 0.01 + 0.005, -17 + 99 * 0.01 + 0.005]);
    expect(gdalSummary(`${base}.shp`).count).toBe(n);
  });

  it('refuses bad schemas, wrong geometry types, overflowing values and writes after close', async () => {
    const basePath = path.join(dir, 'bad', 'x');
    await expect(
      ShapefileWriter.open({ basePath, shapeType: 'point', encoding: 'utf8', fields: [{ name: 'nome_muito_longo', type: 'C', length: 10 }] }),
    ).rejects.toThrow(/longer than 10/);
    await expect(
      ShapefileWriter.open({ basePath, shapeType: 'point', encoding: 'utf8', fields: [{ name: 'a', type: 'C', length: 1 }, { name: 'A', type: 'N', length: 3 }] }),
    ).rejects.toThrow(/duplicate/);
    const w = await ShapefileWriter.open({ basePath, shapeType: 'point', encoding: 'utf8', fields: [{ name: 'n', type: 'N', length: 4, decimals: 1 }] });
    await expect(w.write({ type: 'LineString', coordinates: [[0, 0], [1, 1]] }, {})).rejects.toThrow(TypeError);
    await expect(w.write({ type: 'Point', coordinates: [0, 0] }, { n: 123.4 })).rejects.toThrow(/does not fit/);
    await expect(w.write({ type: 'Point', coordinates: [0, 0] }, { n: Number.NaN })).rejects.toThrow(/finite/);
    await expect(w.write({ type: 'Point', coordinates: [0, 0] }, { other: 1 })).rejects.toThrow(/not a DBF field/);
    await expect(w.write({ type: 'Point', coordinates: [Number.NaN, 0] }, {})).rejects.toThrow(/non-finite/);
    await w.write({ type: 'Point', coordinates: [1, 2] }, { n: 12.3 });
    expect(await w.close()).toEqual({ files: [`${basePath}.shp`, `${basePath}.shx`, `${basePath}.dbf`], count: 1 });
    await expect(w.write({ type: 'Point', coordinates: [0, 0] }, {})).rejects.toThrow(/after close/);
    // the rejected features left nothing behind
    const { features } = await readAll(`${basePath}.shp`, `${basePath}.dbf`, 'utf-8');
    expect(features).toEqual([{ type: 'Feature', properties: { n: 12.3 }, geometry: { type: 'Point', coordinates: [1, 2] } }]);
  });

  it('writes a valid empty layer', async () => {
    const base = path.join(dir, 'empty', 'vazio');
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'utf8', fields: [{ name: 'a', type: 'C', length: 3 }] });
    expect(await w.close()).toMatchObject({ count: 0 });
    expect((await stat(`${base}.shp`)).size).toBe(100);
    expect(gdalSummary(`${base}.shp`).count).toBe(0);
  });
});

describe('zipFiles', () => {
  it('stores each file under its entry name, reproducibly', async () => {
    const a = path.join(dir, 'zip-a.txt');
    const b = path.join(dir, 'zip-b.bin');
    await writeFile(a, 'olá');
    await writeFile(b, Buffer.from([0, 1, 2, 255]));
    const z1 = path.join(dir, 'z', 'one.zip');
    const z2 = path.join(dir, 'z', 'two.zip');
    const members = [{ path: a, name: 'dir/A.TXT' }, { path: b, name: 'B.bin' }];
    await zipFiles(z1, members);
    await new Promise((r) => setTimeout(r, 20));
    await zipFiles(z2, members);
    expect((await readFile(z1)).equals(await readFile(z2))).toBe(true);
    const entries = await zipEntries(z1);
    expect(entries.map((e) => [e.name, e.data.toString('latin1')])).toEqual([
      ['dir/A.TXT', Buffer.from('olá').toString('latin1')],
      ['B.bin', '\u0000\u0001\u0002\u00ff'],
    ]);
    expect(entries[0].mtime.getTime()).toBe(new Date(2024, 0, 1, 0, 0, 0).getTime());
    const listing = execFileSync('unzip', ['-l', z1], { encoding: 'utf8' });
    expect(listing).toMatch(/dir\/A\.TXT/);
    await expect(zipFiles(path.join(dir, 'z', 'dup.zip'), [members[0], { path: b, name: 'dir/A.TXT' }])).rejects.toThrow(/duplicate/);
  });
});

// ---------------------------------------------------------------------------------

describe('SICAR fixtures', () => {
  const members = (zip: string) => zipEntries(zip).then((es) => es.map((e) => e.name));

  it('describes valid, consistent properties', () => {
    for (const uf of ['GO', 'MT', 'DF'] as SicarUf[]) {
      for (const r of SICAR_FIXTURES[uf].areaImovel) {
        const a = r.attributes;
        expect(a.cod_imovel).toMatch(CAR_NUMBER_RE);
        const [carUf, ibge] = a.cod_imovel.split('-');
        expect(ibge.slice(0, 2)).toBe(IBGE_UF_CODE[carUf as SicarUf]);
        expect(MUNICIPALITIES[ibge as keyof typeof MUNICIPALITIES].name).toBe(a.municipio);
        expect(a.cod_estado).toBe(carUf);
        expect(a.dat_criaca).toMatch(/^\d{2}\/\d{2}\/\d{4}$/);
        expect(a.dat_atuali).toMatch(/^\d{2}\/\d{2}\/\d{4}$/);
      }
    }
    const go = SICAR_FIXTURES.GO.areaImovel;
    expect(go).toHaveLength(9);
    expect(new Set(go.map((r) => r.attributes.cod_imovel)).size).toBe(8);
    expect(new Set(go.map((r) => r.attributes.ind_status))).toEqual(new Set(['AT', 'PE', 'CA', 'SU']));
    expect(new Set(go.map((r) => r.attributes.ind_tipo))).toEqual(new Set(['IRU', 'AST', 'PCT']));
    const byRole = (role: string) => go.filter((r) => r.role === role);
    expect(byRole('duplicate-old')[0].attributes.cod_imovel).toBe(byRole('duplicate-new')[0].attributes.cod_imovel);
    expect(byRole('neighbour-state')[0].attributes.cod_imovel).toMatch(/^MT-5107925-/);
    expect(byRole('placeholder-date')[0].attributes.dat_criaca).toBe('00/00/0000');
    expect(byRole('multipart')[0].geometry.type).toBe('MultiPolygon');
    expect(byRole('hole')[0].geometry.coordinates).toHaveLength(2);
    expect(SICAR_FIXTURES.GO.areaImovel.map((r) => r.attributes.cod_imovel)[0]).toBe('GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2');
  });

  it('GO: split AREA_IMOVEL, latin1 without .cpg, themes', async () => {
    const out = path.join(dir, 'sicar-go');
    const zips = await buildSicarState('GO', out);
    expect(zips.map((z) => path.basename(z))).toEqual(['GO_AREA_IMOVEL.zip', 'GO_APPS.zip', 'GO_RESERVA_LEGAL.zip', 'GO_AREA_CONSOLIDADA.zip']);
    expect(zips.map((z) => path.basename(z))).toEqual(sicarZipNames('GO'));
    expect(await members(zips[0])).toEqual([
      'GO_AREA_IMOVEL_1.shp', 'GO_AREA_IMOVEL_1.shx', 'GO_AREA_IMOVEL_1.dbf', 'GO_AREA_IMOVEL_1.prj',
      'GO_AREA_IMOVEL_2.shp', 'GO_AREA_IMOVEL_2.shx', 'GO_AREA_IMOVEL_2.dbf', 'GO_AREA_IMOVEL_2.prj',
    ]);
    expect(await members(zips[1])).toEqual(['GO_APPS.shp', 'GO_APPS.shx', 'GO_APPS.dbf', 'GO_APPS.prj']);
    expect(execFileSync('unzip', ['-l', zips[3]], { encoding: 'utf8' })).toMatch(/GO_AREA_CONSOLIDADA\.dbf/);

    // Part contents, read straight out of the zip with the shapefile package.
    const entries = await zipEntries(zips[0]);
    const data = (n: string) => new Uint8Array(entries.find((e) => e.name === n)!.data);
    const p1 = await readAll(data('GO_AREA_IMOVEL_1.shp'), data('GO_AREA_IMOVEL_1.dbf'), 'latin1');
    const p2 = await readAll(data('GO_AREA_IMOVEL_2.shp'), data('GO_AREA_IMOVEL_2.dbf'), 'latin1');
    const expected = SICAR_FIXTURES.GO.areaImovel;
    expect(p1.features.length + p2.features.length).toBe(9);
    expect([...p1.features, ...p2.features].map((f) => f.properties)).toEqual(expected.map((r) => r.attributes));
    expect(p1.features[0].properties.municipio).toBe('Goiânia');
    expect(p1.features[0].properties.des_condic).toBe('Aguardando análise');
    // the stored outer ring is the description's ring reversed (ESRI orientation)
    const g0 = expected[0].geometry as { coordinates: number[][][] };
    expect((p1.features[0].geometry as { coordinates: number[][][] }).coordinates[0]).toEqual([...g0.coordinates[0]].reverse());

    // GDAL sees both parts, SIRGAS 2000 and the exact schema
    const s1 = gdalSummary(`/vsizip/${zips[0]}/GO_AREA_IMOVEL_1.shp`, ['--config', 'SHAPE_ENCODING', 'ISO-8859-1']);
    expect(s1.count).toBe(expected.filter((r) => r.part === 1).length);
    expect(s1.srs).toBe('4674');
    expect(s1.fields).toEqual(AREA_IMOVEL_FIELDS.map((f) => `${f.name}:${f.type === 'C' ? 'String' : 'Real'}(${f.length}.${f.decimals ?? 0})`));
    const apps = gdalGeoJson(`/vsizip/${zips[1]}`, ['--config', 'SHAPE_ENCODING', 'ISO-8859-1']);
    expect(apps.features.map((f) => f.properties.cod_tema)).toEqual(
      SICAR_FIXTURES.GO.themeRows.filter((t) => t.theme === 'APPS').map((t) => t.attributes.cod_tema),
    );
    expect(Object.keys(apps.features[0].properties)).toEqual(THEME_FIELDS.map((f) => f.name));
  });

  it('MT and DF: UTF-8 with .cpg; DF without .prj', async () => {
    const mt = await buildSicarState('MT', path.join(dir, 'sicar-mt'));
    expect(mt.map((z) => path.basename(z))).toEqual(['MT_AREA_IMOVEL.zip', 'MT_APPS.zip']);
    expect(await members(mt[0])).toEqual(['MT_AREA_IMOVEL.shp', 'MT_AREA_IMOVEL.shx', 'MT_AREA_IMOVEL.dbf', 'MT_AREA_IMOVEL.prj', 'MT_AREA_IMOVEL.cpg']);
    const mtGj = gdalGeoJson(`/vsizip/${mt[0]}`);
    expect(mtGj.features.map((f) => f.properties.municipio)).toEqual(['Sorriso', 'Sorriso', 'Sorriso', 'Cuiabá', 'Cuiabá']);

    const df = await buildSicarState('DF', path.join(dir, 'sicar-df'));
    expect(df.map((z) => path.basename(z))).toEqual(['DF_AREA_IMOVEL.zip']);
    expect(await members(df[0])).toEqual(['DF_AREA_IMOVEL.shp', 'DF_AREA_IMOVEL.shx', 'DF_AREA_IMOVEL.dbf', 'DF_AREA_IMOVEL.cpg']);
    const s = gdalSummary(`/vsizip/${df[0]}`);
    expect(s).toMatchObject({ count: 3, srs: 'unknown' });
  });

  it('builds variants: half the rows, no .cpg, missing members, dropped fields', async () => {
    const out = path.join(dir, 'sicar-variants');
    const half = await buildSicarState('GO', path.join(out, 'half'), { dropEveryOther: true, themes: ['APPS'] });
    expect(half.map((z) => path.basename(z))).toEqual(['GO_AREA_IMOVEL.zip', 'GO_APPS.zip']);
    const rows = sicarRows('GO', { dropEveryOther: true, themes: ['APPS'] });
    expect(rows.areaImovel.map((r) => r.id)).toEqual(['GO1', 'GO3', 'GO5a', 'GO7', 'GO8']);
    const s1 = gdalSummary(`/vsizip/${half[0]}/GO_AREA_IMOVEL_1.shp`);
    const s2 = gdalSummary(`/vsizip/${half[0]}/GO_AREA_IMOVEL_2.shp`);
    expect([s1.count, s2.count]).toEqual([3, 2]);
    expect(gdalSummary(`/vsizip/${half[1]}`).count).toBe(rows.themeRows.length);

    const noCpg = await buildSicarState('MT', path.join(out, 'nocpg'), { omitCpg: true, themes: [] });
    expect(await members(noCpg[0])).toEqual(['MT_AREA_IMOVEL.shp', 'MT_AREA_IMOVEL.shx', 'MT_AREA_IMOVEL.dbf', 'MT_AREA_IMOVEL.prj']);

    const broken = await buildSicarState('GO', path.join(out, 'broken'), { themes: [], omitMembers: ['GO_AREA_IMOVEL_2.shx', '.prj'], dropFields: ['cod_imovel'] });
    expect(await members(broken[0])).toEqual(['GO_AREA_IMOVEL_1.shp', 'GO_AREA_IMOVEL_1.shx', 'GO_AREA_IMOVEL_1.dbf', 'GO_AREA_IMOVEL_2.shp', 'GO_AREA_IMOVEL_2.dbf']);
    expect(gdalSummary(`/vsizip/${broken[0]}/GO_AREA_IMOVEL_1.shp`).fields[0]).toBe('cod_estado:String(2.0)');
  });

  it('the committed fixtures match a fresh build (rerun fixtures/generate.ts if not)', async () => {
    const repo = fileURLToPath(new URL('..', import.meta.url));
    for (const uf of ['GO', 'MT', 'DF'] as SicarUf[]) {
      const fresh = await buildSicarState(uf, path.join(dir, 'fresh', uf));
      for (const z of fresh) {
        const committed = path.join(repo, 'fixtures', 'sicar', uf, path.basename(z));
        const a = (await zipEntries(committed)).map((e) => [e.name, e.crc32, e.size]);
        const b = (await zipEntries(z)).map((e) => [e.name, e.crc32, e.size]);
        expect(a, committed).toEqual(b);
      }
    }
  });
});
