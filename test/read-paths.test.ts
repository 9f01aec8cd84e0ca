// The GDAL-free shapefile reader (src/etl/read/shp-stream.ts) and GDAL's translator
// (src/etl/read/translate.ts) against today's reader (stage-vector.ts stageLayers over
// gdal-async), on real shapefiles: every fixture zip and the real agency samples. The
// staged rows must be the same, value for value, and the geometries the same WKB in
// PostGIS (ST_AsEWKB equality).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractZip } from '../src/etl/archive.ts';
import { isAgroError } from '../src/errors.ts';
import { textDecoder } from '../src/etl/read/dbf.ts';
import { fileSources, readShapefile, stageShapefiles } from '../src/etl/read/shp-stream.ts';
import { translateLayer } from '../src/etl/read/translate.ts';
import { ZipEntries } from '../src/etl/read/zip-source.ts';
import { ShapefileWriter, zipFiles, type DbfField } from '../fixtures/lib/shapefile-writer.ts';
import { stageLayers, type FieldSpec } from '../src/etl/stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from '../src/etl/vector-reader.ts';
import type { TestDb } from './helpers/db.ts';
import { closeReaderContext, openReaderContext, rowDifferences, stageWithBothReaders } from './helpers/readers.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULTS = { srid: 4674, encoding: 'ISO-8859-1' };

let db: TestDb;
let client: pg.PoolClient;
let tmp: string;
let n = 0;

beforeAll(async () => void ({ db, client, tmp } = await openReaderContext('agro-read-paths-')));
afterAll(() => closeReaderContext({ db, client, tmp }));

/** Every other field mapped to a column (the rest go to `extra`), so both paths are exercised. */
function specsFor(layers: VectorLayer[]): FieldSpec[] {
  const names = [...new Set(layers.flatMap((l) => l.fields.map((f) => f.name)))];
  return names.filter((_, i) => i % 2 === 0).map((name) => ({ name: `c_${name}`, aliases: [name] }));
}

const differences = (a: string, b: string) => rowDifferences(client, a, b);

async function count(t: string): Promise<number> {
  return (await client.query(`SELECT count(*)::int AS n FROM ${t}`)).rows[0].n;
}

const stageBoth = (layers: VectorLayer[], specs = specsFor(layers)) => stageWithBothReaders(client, layers, specs);

const fixtureZips = (): string[] => {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory() && e.name !== 'samples') walk(p);
      // Shapefile zips only (receita-cnpj's hold CSVs): member names are stored in clear.
      else if (e.name.toLowerCase().endsWith('.zip') && /\.shp/i.test(fs.readFileSync(p).toString('latin1'))) out.push(p);
    }
  };
  walk(path.join(ROOT, 'fixtures'));
  return out.sort();
};

describe('shp-stream reader = GDAL reader', () => {
  const zips = fixtureZips();

  it('finds the fixture zips', () => {
    expect(zips.length).toBeGreaterThanOrEqual(10);
  });

  it.each(zips.map((z) => [path.relative(ROOT, z), z]))('%s: same rows, values and WKB', async (_name, zip) => {
    const dir = path.join(tmp, `z${++n}`);
    const shps = findShapefiles(await extractZip(zip, dir));
    expect(shps.length).toBeGreaterThan(0);
    const layers = shps.map((s) => openLayer(s, DEFAULTS));
    const { a, b, ra, rb } = await stageBoth(layers);
    expect(rb.rows).toBe(ra.rows);
    expect(await count(b)).toBe(ra.rows);
    expect(rb.replacementChars).toBe(ra.replacementChars);
    expect(rb.unknown).toEqual(ra.unknown);
    expect(await differences(a, b)).toEqual([]);
  });

  const samples = ['funai-tis/TerraIn_filtrado.shp', 'cnuc-ucs/UCs_filtradas.shp', 'sicar/car_imoveis_pa_sobre_ucs.shp'];
  it.each(samples)('real sample %s (UTF-8 .cpg): same rows, values and WKB', async (rel) => {
    const layer = openLayer(path.join(ROOT, 'fixtures/samples', rel), DEFAULTS);
    expect(layer.encoding).toBe('UTF-8');
    const { a, b, ra, rb } = await stageBoth([layer]);
    expect(rb.rows).toBe(ra.rows);
    expect(rb.rows).toBeGreaterThan(0);
    expect(await differences(a, b)).toEqual([]);
  });

  it('decodes accents of a UTF-8 DBF (real sample) and of a Latin-1 DBF without .cpg', async () => {
    const utf8 = await readShapefile(fileSources(path.join(ROOT, 'fixtures/samples/cnuc-ucs/UCs_filtradas.shp')), 'UTF-8');
    const nome = utf8.fields.indexOf('nome_uc');
    const names = utf8.records.map((r) => r.values[nome].text);
    expect(names.filter((s) => /[À-ú]/.test(s ?? '')).length).toBeGreaterThan(3);
    expect(names.join('')).not.toContain('\uFFFD');
    // FUNAI's sample already holds U+FFFD in its bytes (damaged upstream): counted by both readers.
    const funai = openLayer(path.join(ROOT, 'fixtures/samples/funai-tis/TerraIn_filtrado.shp'), DEFAULTS);
    const f = await stageBoth([funai], funai.fields.map((x) => ({ name: x.name, aliases: [x.name] })));
    expect(f.rb.replacementChars).toBe(f.ra.replacementChars);
    expect(f.rb.replacementChars).toBeGreaterThan(0);

    const base = path.join(tmp, `latin1_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', cpg: null, fields: [{ name: 'nome', type: 'C', length: 40 }] });
    for (const nome of ['São Félix do Araguaia', 'Cuiabá', 'Poconé']) await w.write({ type: 'Point', coordinates: [-55, -12] }, { nome });
    await w.close();
    const latin1 = await readShapefile(fileSources(`${base}.shp`), 'ISO-8859-1');
    expect(latin1.records.map((r) => r.values[0].text)).toEqual(['São Félix do Araguaia', 'Cuiabá', 'Poconé']);
    // Read with the wrong encoding the damage is visible and counted, not silent.
    const layer = { ...openLayer(`${base}.shp`, { srid: 4674 }), encoding: 'UTF-8' };
    const r = await stageShapefiles(client, `wrong_${n}`, [layer], [{ name: 'nome', aliases: ['nome'] }]);
    expect(r.replacementChars).toBe(3);
    // and GDAL agrees on the same bytes and encoding
    const { a, b } = await stageBoth([openLayer(`${base}.shp`, DEFAULTS)]);
    expect(await differences(a, b)).toEqual([]);
  });

  it('maps .cpg / GDAL encoding names; Latin-1 is ISO-8859-1, not windows-1252', () => {
    const bytes = Buffer.from([0x80, 0xe3]);
    expect(textDecoder('ISO-8859-1')(bytes, 0, 2)).toBe('\u0080ã');
    expect(textDecoder('88591')(bytes, 0, 2)).toBe('\u0080ã');
    expect(textDecoder('1252')(bytes, 0, 2)).toBe('€ã');
    expect(textDecoder('CP1252')(Buffer.from([0x9c, 0x41]), 0, 2)).toBe('œA');
    expect(textDecoder('UTF-8')(Buffer.from('ção'), 0, 5)).toBe('ção');
    expect(() => textDecoder('no-such-encoding')).toThrow(/unknown DBF encoding/);
  });
});

describe('geometry and field types against GDAL', () => {
  const fields: DbfField[] = [
    { name: 'c', type: 'C', length: 20 },
    { name: 'i', type: 'N', length: 9, decimals: 0 },
    { name: 'big', type: 'N', length: 19, decimals: 0 },
    { name: 'f', type: 'N', length: 14, decimals: 4 },
    { name: 'd', type: 'D', length: 8 },
    { name: 'l', type: 'L', length: 1 },
  ];
  const attrs = (k: number) => ({ c: k % 3 ? `  valor ${k} ` : '', i: k % 4 ? -k : null, big: k * 1e12, f: k % 5 ? k / 8 : null, d: k % 2 ? new Date(Date.UTC(2020, k % 12, 1 + k)) : null, l: k % 3 ? k % 2 === 0 : null });
  const sq = (x: number, y: number, s: number) => [[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]];

  it('polygons with holes, multipolygons, lines, multilines and points give the same WKB', async () => {
    const kinds = {
      polygon: [
        { type: 'Polygon', coordinates: [sq(0, 0, 10)] },
        { type: 'Polygon', coordinates: [sq(0, 0, 10), sq(2, 2, 2), sq(6, 6, 2)] },
        { type: 'MultiPolygon', coordinates: [[sq(0, 0, 1)], [sq(5, 5, 10), sq(6, 6, 1)], [sq(20, 0, 3)]] },
        { type: 'MultiPolygon', coordinates: [[sq(0, 0, 100), sq(10, 10, 50)], [sq(20, 20, 10)]] }, // island in a lake
        null,
      ],
      polyline: [
        { type: 'LineString', coordinates: [[0, 0], [1, 1], [2, 0]] },
        { type: 'MultiLineString', coordinates: [[[0, 0], [1, 1]], [[5, 5], [6, 7], [8, 8]]] },
      ],
      point: [{ type: 'Point', coordinates: [-47.9, -15.8] }, { type: 'Point', coordinates: [0, 0] }],
    } as const;
    for (const [shapeType, geoms] of Object.entries(kinds)) {
      const base = path.join(tmp, `${shapeType}_${++n}`);
      const w = await ShapefileWriter.open({ basePath: base, shapeType: shapeType as 'polygon', encoding: 'utf8', cpg: 'UTF-8', fields });
      for (let k = 0; k < 12; k++) await w.write((geoms[k % geoms.length] as never) ?? null, attrs(k));
      await w.close();
      const layer = openLayer(`${base}.shp`, DEFAULTS);
      const specs = fields.map((f) => ({ name: `c_${f.name}`, aliases: [f.name] }));
      const { a, b, rb } = await stageBoth([layer], specs);
      expect(rb.rows).toBe(12);
      expect(await differences(a, b), shapeType).toEqual([]);
      // and with every field but one in `extra`
      const x = await stageBoth([layer], specs.slice(0, 1));
      expect(await differences(x.a, x.b), `${shapeType} extra`).toEqual([]);
    }
  });

  it('keeps digits GDAL loses and counts numbers and dates that are not', async () => {
    const base = path.join(tmp, `odd_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', fields: [{ name: 'n', type: 'N', length: 19, decimals: 0 }, { name: 'q', type: 'N', length: 8, decimals: 2 }, { name: 'd', type: 'D', length: 8 }] });
    await w.write({ type: 'Point', coordinates: [1, 2] }, { n: 1, q: 1.5, d: new Date(Date.UTC(2024, 0, 2)) });
    await w.write({ type: 'Point', coordinates: [1, 2] }, { n: 2, q: 2.5, d: null });
    await w.write({ type: 'Point', coordinates: [1, 2] }, { n: 3, q: 3.5, d: null });
    await w.close();
    // Patch the DBF: a 19-digit integer, a numeric that is not one, a date that is not one,
    // and a deleted record (GDAL skips it; so does the reader).
    const dbf = fs.readFileSync(`${base}.dbf`);
    const header = dbf.readUInt16LE(8), rec = dbf.readUInt16LE(10);
    dbf.write('9007199254740993123', header + 1, 'latin1');
    dbf.write('   12,50', header + rec + 20, 'latin1');
    dbf.write('2024-1-3', header + rec + 28, 'latin1');
    dbf[header + 2 * rec] = 0x2a;
    fs.writeFileSync(`${base}.dbf`, dbf);
    const layer = openLayer(`${base}.shp`, DEFAULTS);
    const r = await stageShapefiles(client, `odd_${n}`, [layer], [{ name: 'n', aliases: ['n'] }, { name: 'q', aliases: ['q'] }, { name: 'd', aliases: ['d'] }]);
    expect(r).toMatchObject({ rows: 2, deleted: 1, unparsed: 2 });
    const rows = (await client.query(`SELECT n, q, d FROM odd_${n} ORDER BY src_seq`)).rows;
    expect(rows).toEqual([
      { n: '9007199254740993123', q: '1.5', d: '2024-01-02' },
      { n: '2', q: '12,50', d: '2024-1-3' },
    ]);
    // GDAL (the reader of a DOS code page): the same two rows, counted alike. GDAL's own reading
    // rounded the digits away and read 12,50 as 12 (a decimal comma published a wrong value).
    const g = `odd_gdal_${n}`;
    const rg = await stageLayers(client, g, [{ ...layer, reader: 'gdal' }], [{ name: 'n', aliases: ['n'] }, { name: 'q', aliases: ['q'] }, { name: 'd', aliases: ['d'] }]);
    expect(rg).toMatchObject({ reader: 'gdal', rows: 2, deleted: 1, unparsed: 2 });
    expect((await client.query(`SELECT n, q, d FROM ${g} ORDER BY src_seq`)).rows).toEqual(rows);
  });
});

describe('read straight from the zip', () => {
  it('two-layer zip: same rows as the extracted files, CRCs checked', async () => {
    const zip = path.join(ROOT, 'fixtures/sicar/GO/GO_AREA_IMOVEL.zip');
    const dir = path.join(tmp, `go_${++n}`);
    const layers = findShapefiles(await extractZip(zip, dir)).map((s) => openLayer(s, DEFAULTS));
    expect(layers.length).toBe(2);
    const specs = specsFor(layers);
    const fromFiles = `files_${n}`, fromZip = `zip_${n}`;
    await stageShapefiles(client, fromFiles, layers, specs);
    const entries = await ZipEntries.open(zip);
    try {
      const r = await stageShapefiles(client, fromZip, layers, specs, (l) => entries.layerSources(`${l.name}.shp`));
      expect(r.rows).toBe(9);
    } finally {
      entries.close();
    }
    expect(await differences(fromFiles, fromZip)).toEqual([]);
  });

  it.each([false, true])('a damaged member (deflated: %s) fails with corrupt_archive and stages nothing', async (compress) => {
    const base = path.join(tmp, `crc_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'utf8', fields: [{ name: 'a', type: 'C', length: 4 }] });
    for (let k = 0; k < 50; k++) await w.write({ type: 'Point', coordinates: [k, k] }, { a: 'x' });
    const { files } = await w.close();
    const zip = `${base}.zip`;
    await zipFiles(zip, files.map((f) => ({ path: f, name: path.basename(f) })), { compress });
    const bytes = fs.readFileSync(zip);
    const at = bytes.indexOf(Buffer.from(path.basename(base) + '.shp')) + path.basename(base).length + 4 + (compress ? 60 : 200); // inside the .shp's data
    bytes[at] ^= 0xff;
    fs.writeFileSync(zip, bytes);
    const layer = openLayer(`${base}.shp`, DEFAULTS);
    const entries = await ZipEntries.open(zip);
    const t = `crc_${n}`;
    try {
      const err = await stageShapefiles(client, t, [layer], [{ name: 'a', aliases: ['a'] }], () => entries.layerSources(path.basename(`${base}.shp`))).catch((e) => e);
      expect(isAgroError(err) && err.code, String(err)).toBe('corrupt_archive');
    } finally {
      entries.close();
    }
    expect(await count(t)).toBe(0);
  });

  it('a .shp cut short fails with malformed_source and stages nothing', async () => {
    const base = path.join(tmp, `cut_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'utf8', fields: [{ name: 'a', type: 'C', length: 4 }] });
    for (let k = 0; k < 20; k++) await w.write({ type: 'Polygon', coordinates: [sqr(k)] }, { a: 'x' });
    await w.close();
    const layer = openLayer(`${base}.shp`, DEFAULTS);
    fs.truncateSync(`${base}.shp`, fs.statSync(`${base}.shp`).size - 30);
    const err = await stageShapefiles(client, `cut_${n}`, [layer], [{ name: 'a', aliases: ['a'] }]).catch((e) => e);
    expect(isAgroError(err) && err.code, String(err)).toBe('malformed_source');
    expect(await count(`cut_${n}`)).toBe(0);
  });
});

const sqr = (k: number) => [[k, 0], [k + 1, 0], [k + 1, 1], [k, 1], [k, 0]];

describe('GDAL translator (vectorTranslateAsync into an unlogged table)', () => {
  it('same rows, values and geometries as the GDAL reader, from /vsizip/', async () => {
    const zip = path.join(ROOT, 'fixtures/sicar/MT/MT_AREA_IMOVEL.zip');
    const dir = path.join(tmp, `mt_${++n}`);
    const [shp] = findShapefiles(await extractZip(zip, dir));
    const layer = openLayer(shp, DEFAULTS);
    const specs = layer.fields.map((f) => ({ name: f.name, aliases: [f.name] }));
    const a = `ref_${n}`, t = `translated_${n}`;
    await stageLayers(client, a, [layer], specs);
    const features = await translateLayer(`/vsizip/${zip}/MT_AREA_IMOVEL.shp`, db.url, { table: t, encoding: layer.encoding, srid: 4674 });
    expect(layer.encoding).toBe('UTF-8'); // from the .cpg: the engine's rule, passed on
    expect(features).toBe(layer.featureCount);
    const unlogged = await client.query(`SELECT relpersistence FROM pg_class WHERE relname = $1`, [t]);
    expect(unlogged.rows[0].relpersistence).toBe('u');
    const textCols = layer.fields.filter((f) => f.type === 'string').map((f) => f.name);
    const numCols = layer.fields.filter((f) => f.type === 'real' || f.type.startsWith('integer')).map((f) => f.name);
    expect(textCols.length).toBeGreaterThan(0);
    expect(numCols.length).toBeGreaterThan(0);
    const diff = await client.query(`
      SELECT a.src_seq FROM ${a} a FULL JOIN ${t} t ON t.src_fid + 1 = a.src_seq
       WHERE a.src_seq IS NULL OR t.src_fid IS NULL
          ${textCols.map((c) => `OR a.${c} IS DISTINCT FROM t.${c}`).join(' ')}
          ${numCols.map((c) => `OR a.${c}::numeric IS DISTINCT FROM t.${c}::numeric`).join(' ')}
          OR ST_AsEWKB(ST_Multi(ST_SetSRID(a.geom, a.src_srid))) IS DISTINCT FROM ST_AsEWKB(t.geom)`);
    if (diff.rows.length) {
      const x = await client.query(`SELECT to_jsonb(a) - 'geom' AS a, to_jsonb(t) - 'geom' AS t, ST_AsText(a.geom) AS ag, ST_AsText(t.geom) AS tg FROM ${a} a JOIN ${t} t ON t.src_fid + 1 = a.src_seq LIMIT 1`);
      expect(x.rows).toEqual([]);
    }
    expect(diff.rows).toEqual([]);
    expect(await count(t)).toBe(layer.featureCount);
  });
});
