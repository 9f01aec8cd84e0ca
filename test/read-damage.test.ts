// Shapefiles and zips as real agency files may come, damaged in ways that used to load
// quietly wrong (an audit of the read path): each test builds the file, reads it with both
// readers (the streaming one, read/shp-stream.ts, and GDAL's, vector-reader.ts) and checks the
// rows against what the file means, not against each other.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { PRJ_SIRGAS2000, ShapefileWriter, zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { DEFAULT_ZIP_LIMITS } from '../src/etl/archive.ts';
import { isAgroError } from '../src/errors.ts';
import { layersFromZip } from '../src/etl/layers.ts';
import { stageLayers } from '../src/etl/stage-vector.ts';
import { openLayer, type VectorLayer } from '../src/etl/vector-reader.ts';
import type { TestDb } from './helpers/db.ts';
import { closeReaderContext, openReaderContext } from './helpers/readers.ts';

let db: TestDb;
let client: pg.PoolClient;
let tmp: string;
let n = 0;

beforeAll(async () => void ({ db, client, tmp } = await openReaderContext('agro-read-damage-')));
afterAll(() => closeReaderContext({ db, client, tmp }));

const DEFAULTS = { srid: 4674 };
const READERS = ['shp-stream', 'gdal'] as const;

/** Stages the layers with one reader into a new table; returns the table. */
async function stage(layers: VectorLayer[], reader: (typeof READERS)[number], specs: { name: string; aliases: string[] }[]) {
  const t = `dmg_${reader.replace('-', '_')}_${++n}`;
  const r = await stageLayers(client, t, layers.map((l) => ({ ...l, reader })), specs);
  return { t, r };
}

/** Reverses the point order of every ring of every polygon record of a .shp, in place. */
function reverseRings(shp: string): void {
  const b = fs.readFileSync(shp);
  for (let at = 100; at + 8 <= b.length; ) {
    const c = at + 8;
    if (b.readInt32LE(c) === 5) {
      const parts = b.readInt32LE(c + 36), points = b.readInt32LE(c + 40);
      const xy = c + 44 + 4 * parts;
      for (let p = 0; p < parts; p++) {
        const s = b.readInt32LE(c + 44 + 4 * p), e = p + 1 < parts ? b.readInt32LE(c + 48 + 4 * p) : points;
        const pts = Array.from({ length: e - s }, (_, i) => Buffer.from(b.subarray(xy + 16 * (s + i), xy + 16 * (s + i + 1))));
        pts.reverse().forEach((pt, i) => pt.copy(b, xy + 16 * (s + i)));
      }
    }
    at = c + b.readInt32BE(at + 4) * 2;
  }
  fs.writeFileSync(shp, b);
}

const sq = (x: number, y: number, s: number) => [[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]];

describe('polygon rings written the other way round (outer counter-clockwise, holes clockwise)', () => {
  // What each record means, as WKT, and the polygons as GeoJSON for the writer (which orients
  // rings the ESRI way; the .shp is then reversed, as a writer following GeoJSON's order does).
  const lands = [
    { wkt: 'POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,4 2,4 4,2 4,2 2))', geom: { type: 'Polygon', coordinates: [sq(0, 0, 10), sq(2, 2, 2)] } },
    {
      wkt: 'MULTIPOLYGON(((0 0,10 0,10 10,0 10,0 0),(2 2,4 2,4 4,2 4,2 2)),((20 0,30 0,30 10,20 10,20 0),(22 2,24 2,24 4,22 4,22 2)))',
      geom: { type: 'MultiPolygon', coordinates: [[sq(0, 0, 10), sq(2, 2, 2)], [sq(20, 0, 10), sq(22, 2, 2)]] },
    },
    {
      wkt: 'MULTIPOLYGON(((0 0,100 0,100 100,0 100,0 0),(10 10,60 10,60 60,10 60,10 10)),((20 20,30 20,30 30,20 30,20 20)))',
      geom: { type: 'MultiPolygon', coordinates: [[sq(0, 0, 100), sq(10, 10, 50)], [sq(20, 20, 10)]] }, // an island in a lake
    },
    { wkt: 'POLYGON((0 0,10 0,10 10,0 10,0 0),(0 0,4 2,2 4,0 0))', geom: { type: 'Polygon', coordinates: [sq(0, 0, 10), [[0, 0], [2, 4], [4, 2], [0, 0]]] } }, // a hole touching its shell
    {
      wkt: 'MULTIPOLYGON(((0 0,10 0,10 10,0 10,0 0),(0 0,4 2,2 4,0 0)),((20 0,22 0,22 2,20 2,20 0)))',
      geom: { type: 'MultiPolygon', coordinates: [[sq(0, 0, 10), [[0, 0], [2, 4], [4, 2], [0, 0]]], [sq(20, 0, 2)]] }, // and a second part
    },
  ];

  it.each(READERS)('%s: each land keeps its holes and its area (read by orientation, a hole was the shell and the shell a hole)', async (reader) => {
    const base = path.join(tmp, `reversed_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'latin1', fields: [{ name: 'k', type: 'N', length: 4 }] });
    for (let k = 0; k < lands.length; k++) await w.write(lands[k].geom as never, { k });
    await w.close();
    reverseRings(`${base}.shp`);
    const { t } = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, [{ name: 'k', aliases: ['k'] }]);
    const rows = (await client.query(
      `SELECT k::int, ST_IsValid(geom) AS valid, ST_Equals(geom, w) AND ST_Area(geom) = ST_Area(w) AS same
         FROM ${t}, ST_GeomFromText(($1::text[])[k::int + 1]) AS w ORDER BY 1`,
      [lands.map((l) => l.wkt)],
    )).rows;
    expect(rows).toEqual(lands.map((_, k) => ({ k, valid: true, same: true })));
  });

  it.each(READERS)('%s: rings in the ESRI order are read as before', async (reader) => {
    const base = path.join(tmp, `esri_order_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'latin1', fields: [{ name: 'k', type: 'N', length: 4 }] });
    for (let k = 0; k < lands.length; k++) await w.write(lands[k].geom as never, { k });
    await w.close();
    const { t } = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, [{ name: 'k', aliases: ['k'] }]);
    const rows = (await client.query(`SELECT k::int, ST_Equals(geom, ST_GeomFromText(($1::text[])[k::int + 1])) AS same FROM ${t} ORDER BY 1`, [lands.map((l) => l.wkt)])).rows;
    expect(rows).toEqual(lands.map((_, k) => ({ k, same: true })));
  });
});

describe('a .dbf and a .shp that disagree on the number of records', () => {
  /** A point layer of `k` records, nome = r1…rk. */
  async function points(k: number): Promise<string> {
    const base = path.join(tmp, `count_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', fields: [{ name: 'nome', type: 'C', length: 10 }] });
    for (let i = 1; i <= k; i++) await w.write({ type: 'Point', coordinates: [-50 + i, -10] }, { nome: `r${i}` });
    await w.close();
    return base;
  }
  const specs = [{ name: 'nome', aliases: ['nome'] }];

  it.each(READERS)('%s: a .dbf cut short: the shapes without a record are counted (GDAL dropped them silently)', async (reader) => {
    const base = await points(3);
    const dbf = fs.readFileSync(`${base}.dbf`);
    const headerLength = dbf.readUInt16LE(8), recordLength = dbf.readUInt16LE(10);
    dbf.writeUInt32LE(2, 4);
    fs.writeFileSync(`${base}.dbf`, Buffer.concat([dbf.subarray(0, headerLength + 2 * recordLength), Buffer.from([0x1a])]));
    const { t, r } = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, specs);
    expect(r).toMatchObject({ rows: 2, shapesWithoutRecord: 1, deleted: 0 });
    expect((await client.query(`SELECT nome FROM ${t} ORDER BY src_seq`)).rows.map((x) => x.nome)).toEqual(['r1', 'r2']);
  });

  it.each(READERS)('%s: a .dbf cut inside its records (its header still counting them) fails, nothing staged (GDAL dropped the cut record)', async (reader) => {
    const base = await points(3);
    const dbf = fs.readFileSync(`${base}.dbf`);
    fs.writeFileSync(`${base}.dbf`, dbf.subarray(0, dbf.readUInt16LE(8) + 2 * dbf.readUInt16LE(10) + 3));
    const got = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, specs).catch((e: unknown) => e);
    expect(isAgroError(got) && got.code).toBe('malformed_source');
    expect((got as Error).message).toMatch(/3 records declared, 2 present/);
  });

  it.each(READERS)('%s: a deleted record is skipped and counted', async (reader) => {
    const base = await points(3);
    const dbf = fs.readFileSync(`${base}.dbf`);
    dbf[dbf.readUInt16LE(8) + dbf.readUInt16LE(10)] = 0x2a;
    fs.writeFileSync(`${base}.dbf`, dbf);
    const { t, r } = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, specs);
    expect(r).toMatchObject({ rows: 2, shapesWithoutRecord: 0, deleted: 1 });
    expect((await client.query(`SELECT nome FROM ${t} ORDER BY src_seq`)).rows.map((x) => x.nome)).toEqual(['r1', 'r3']);
  });

  it.each(READERS)('%s: a .shp cut short: every record of the .dbf is loaded, the missing shapes NULL', async (reader) => {
    const base = await points(3);
    const shp = fs.readFileSync(`${base}.shp`), shx = fs.readFileSync(`${base}.shx`);
    const lastAt = shx.readInt32BE(100 + 8 * 2) * 2;
    const cutShp = Buffer.from(shp.subarray(0, lastAt)), cutShx = Buffer.from(shx.subarray(0, 100 + 8 * 2));
    cutShp.writeInt32BE(cutShp.length / 2, 24);
    cutShx.writeInt32BE(cutShx.length / 2, 24);
    fs.writeFileSync(`${base}.shp`, cutShp);
    fs.writeFileSync(`${base}.shx`, cutShx);
    const { t, r } = await stage([openLayer(`${base}.shp`, DEFAULTS)], reader, specs);
    expect(r).toMatchObject({ rows: 3 });
    expect((await client.query(`SELECT nome, geom IS NULL AS no_geom FROM ${t} ORDER BY src_seq`)).rows).toEqual([
      { nome: 'r1', no_geom: false }, { nome: 'r2', no_geom: false }, { nome: 'r3', no_geom: true },
    ]);
  });
});

describe('zips', () => {
  it('two members of the same name (two versions of a layer) are refused, not loaded twice', async () => {
    const versions: string[] = [];
    for (const rows of [['a1', 'a2'], ['b1', 'b2', 'b3']]) {
      const base = path.join(tmp, `v${++n}`, 'AREA_IMOVEL');
      fs.mkdirSync(path.dirname(base));
      const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', prj: PRJ_SIRGAS2000, fields: [{ name: 'nome', type: 'C', length: 10 }] });
      for (let i = 0; i < rows.length; i++) await w.write({ type: 'Point', coordinates: [-50 + i, -10] }, { nome: rows[i] });
      await w.close();
      versions.push(base);
    }
    // zipFiles refuses duplicate names; yazl writes them, as other zip tools do.
    const zip = new yazl.ZipFile();
    for (const ext of ['.shp', '.shx', '.dbf', '.prj']) for (const v of versions) zip.addFile(v + ext, `AREA_IMOVEL${ext}`);
    zip.end();
    const file = path.join(tmp, `dup_${++n}.zip`);
    await pipeline(zip.outputStream, fs.createWriteStream(file));
    const got = await layersFromZip(file, path.join(tmp, `dup_work_${n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS }).then(
      async (layers) => (await stageLayers(client, `dup_${n}`, layers, [{ name: 'nome', aliases: ['nome'] }])).rows,
      (e: unknown) => e,
    );
    // It staged 6 rows: the second version twice.
    expect(isAgroError(got) && got.code).toBe('corrupt_archive');
    expect((got as Error).message).toMatch(/AREA_IMOVEL\.shp.*more than once/);
  });
});

describe('DBF field names', () => {
  it.each(READERS)('%s: two fields of one name (in any case): the first keeps it, the second is kept as <name>_2, no value is lost', async (reader) => {
    const base = path.join(tmp, `dupfield_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', fields: [{ name: 'nome', type: 'C', length: 10 }, { name: 'nomx', type: 'C', length: 10 }, { name: 'cod', type: 'C', length: 5 }] });
    await w.write({ type: 'Point', coordinates: [-50, -10] }, { nome: 'first', nomx: 'second', cod: 'c1' });
    await w.close();
    // The second field's name becomes NOME (a writer that cut two long names to the same 10 bytes, or kept both cases).
    const dbf = fs.readFileSync(`${base}.dbf`);
    dbf.write('NOME', 64, 'latin1');
    fs.writeFileSync(`${base}.dbf`, dbf);
    const layer = openLayer(`${base}.shp`, DEFAULTS);
    expect(layer.fields.map((f) => f.name)).toEqual(['nome', 'nome_2', 'cod']);
    const { t, r } = await stage([layer], reader, [{ name: 'nome', aliases: ['nome'] }]);
    expect(r.unknown).toEqual(['nome_2', 'cod']);
    // It staged nome = 'second', and 'first' nowhere.
    expect((await client.query(`SELECT nome, extra FROM ${t}`)).rows).toEqual([{ nome: 'first', extra: { nome_2: 'second', cod: 'c1' } }]);
  });
});

describe('a C field wider than 254 bytes (its length\'s high byte in the decimal count, as Clipper and FoxPro write it)', () => {
  /** obs: 300 bytes wide (44 + 1 × 256), then cod. */
  async function wideField(): Promise<string> {
    const base = path.join(tmp, `wide_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', fields: [{ name: 'obs', type: 'C', length: 254 }, { name: 'pad', type: 'C', length: 46 }, { name: 'cod', type: 'C', length: 5 }] });
    await w.write({ type: 'Point', coordinates: [-50, -10] }, { obs: 'x'.repeat(254), pad: 'y'.repeat(46), cod: 'C1' });
    await w.close();
    // The record bytes stay; the header says obs is 300 wide and has no 'pad'.
    const d = fs.readFileSync(`${base}.dbf`);
    const headerLength = d.readUInt16LE(8);
    const obs = Buffer.from(d.subarray(32, 64));
    obs[16] = 300 - 256;
    obs[17] = 1;
    const head = Buffer.concat([d.subarray(0, 32), obs, d.subarray(96, 128), Buffer.from([0x0d])]);
    head.writeUInt16LE(head.length, 8);
    fs.writeFileSync(`${base}.dbf`, Buffer.concat([head, d.subarray(headerLength)]));
    return base;
  }
  const specs = [{ name: 'obs', aliases: ['obs'] }, { name: 'cod', aliases: ['cod'] }];

  it('shp-stream: read at its full width; the next field at its place (it read 44 bytes, and cod = xxxxx)', async () => {
    const { t } = await stage([openLayer(`${await wideField()}.shp`, DEFAULTS)], 'shp-stream', specs);
    expect((await client.query(`SELECT obs, cod FROM ${t}`)).rows).toEqual([{ obs: 'x'.repeat(254) + 'y'.repeat(46), cod: 'C1' }]);
  });

  it('gdal: GDAL reads 44 bytes of it and shifts the next fields: refused, not loaded shifted', async () => {
    const got = await stage([openLayer(`${await wideField()}.shp`, DEFAULTS)], 'gdal', specs).catch((e: unknown) => e);
    expect(isAgroError(got) && got.code).toBe('malformed_source');
    expect((got as Error).message).toMatch(/obs.*300 bytes/);
  });
});

describe('a .shp edited in place (shapelib writes a grown shape at the end of the .shp and points the .shx to it)', () => {
  it('the shape the .shx points to is loaded, not the stale one left in place', async () => {
    const dir = path.join(tmp, `edited_${++n}`);
    fs.mkdirSync(dir);
    const base = path.join(dir, 'AREA_IMOVEL');
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'latin1', prj: PRJ_SIRGAS2000, fields: [{ name: 'k', type: 'N', length: 4 }] });
    for (let k = 1; k <= 3; k++) await w.write({ type: 'Polygon', coordinates: [sq(-50 + k, -10, 0.5)] } as never, { k });
    await w.close();
    // Record 2 edited into a pentagon: written after the last record, the .shx pointed to it.
    const edit = `${base}_edit`;
    const e = await ShapefileWriter.open({ basePath: edit, shapeType: 'polygon', encoding: 'latin1', fields: [{ name: 'k', type: 'N', length: 4 }] });
    await e.write({ type: 'Polygon', coordinates: [[[-48, -10], [-47, -10], [-47, -9], [-47.5, -8.5], [-48, -9], [-48, -10]]] } as never, { k: 2 });
    await e.close();
    const rec = fs.readFileSync(`${edit}.shp`).subarray(100);
    rec.writeInt32BE(2, 0);
    const shp = fs.readFileSync(`${base}.shp`), shx = fs.readFileSync(`${base}.shx`);
    const newShp = Buffer.concat([shp, rec]);
    newShp.writeInt32BE(newShp.length / 2, 24);
    shx.writeInt32BE(shp.length / 2, 100 + 8);
    shx.writeInt32BE(rec.length / 2 - 4, 100 + 8 + 4);
    fs.writeFileSync(`${base}.shp`, newShp);
    fs.writeFileSync(`${base}.shx`, shx);
    for (const x of ['.shp', '.shx', '.dbf', '.prj']) fs.rmSync(`${edit}${x}`, { force: true });
    const file = path.join(tmp, `edited_${n}.zip`);
    await zipFiles(file, ['.shp', '.shx', '.dbf', '.prj'].map((x) => ({ path: base + x, name: `AREA_IMOVEL${x}` })));
    const layers = await layersFromZip(file, path.join(tmp, `edited_work_${n}`), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    const r = await stageLayers(client, `edited_${n}`, layers, [{ name: 'k', aliases: ['k'] }]);
    // It loaded record 2 as the old square and counted the pentagon as a shape without a record.
    expect(r).toMatchObject({ rows: 3, shapesWithoutRecord: 0, reader: 'gdal' }); // GDAL reads through the .shx
    const rows = (await client.query(`SELECT k, ST_NPoints(geom) AS points FROM edited_${n} ORDER BY src_seq`)).rows;
    expect(rows).toEqual([{ k: '1', points: 5 }, { k: '2', points: 6 }, { k: '3', points: 5 }]);
  });
});

describe('numeric DBF cells', () => {
  it('shp-stream: a code beyond 2^53 in an N field with decimals keeps every digit (12345678901234567.00 read 12345678901234568)', async () => {
    const base = path.join(tmp, `code_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', fields: [{ name: 'cod', type: 'N', length: 20, decimals: 2 }] });
    await w.write({ type: 'Point', coordinates: [-50, -10] }, { cod: 1 });
    await w.write({ type: 'Point', coordinates: [-50, -10] }, { cod: 2 });
    await w.close();
    const dbf = fs.readFileSync(`${base}.dbf`);
    const at = dbf.readUInt16LE(8) + 1, rec = dbf.readUInt16LE(10);
    dbf.write(' 12345678901234567.00', at, 'latin1');
    dbf.write('-98765432109876543.0 ', at + rec, 'latin1');
    fs.writeFileSync(`${base}.dbf`, dbf);
    const { t, r } = await stage([openLayer(`${base}.shp`, DEFAULTS)], 'shp-stream', [{ name: 'cod', aliases: ['cod'] }]);
    expect(r).toMatchObject({ unparsed: 0 });
    expect((await client.query(`SELECT cod FROM ${t} ORDER BY src_seq`)).rows.map((x) => x.cod)).toEqual(['12345678901234567', '-98765432109876543']);
  });
});

describe('a DOS language driver byte (LDID) over Windows text', () => {
  const names = ['Conceição das Crioulas', 'São João do Araguaia', "Olho d'Água das Flores", 'Ribeirão Preto'];
  it.each([0x01, 0x02])('LDID 0x%s: the names are read as the Windows text they are (CP850 published ConceiþÒo), and the LDID is said to be ignored', async (ldid) => {
    const base = path.join(tmp, `ldid_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', languageDriverId: ldid, fields: [{ name: 'nome', type: 'C', length: 40 }] });
    for (const nome of names) await w.write({ type: 'Point', coordinates: [-50, -10] }, { nome });
    await w.close();
    const layer = openLayer(`${base}.shp`, DEFAULTS);
    expect(layer).toMatchObject({ encoding: 'ISO-8859-1', encodingDecidedBy: 'bytes' });
    expect(layer.encodingIgnored).toMatch(/LDID 0x0\d \(CP(437|850)\) ignored/);
    const { t } = await stage([layer], layer.reader ?? 'gdal', [{ name: 'nome', aliases: ['nome'] }]);
    expect((await client.query(`SELECT nome FROM ${t} ORDER BY src_seq`)).rows.map((x) => x.nome)).toEqual(names);
  });
});
