// The engine's reading rules on their own: which encoding a DBF is read with (.cpg, .cst,
// LDID, bytes), and which SRID a .prj names (GDAL's own identification, then the
// candidates by isSame / isSameGeogCS), on shapefiles written by the fixture writer.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import gdal from 'gdal-async';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { inCodePage } from '../fixtures/code-pages.ts';
import { PRJ_SIRGAS2000, PRJ_WGS84, type DbfField } from '../fixtures/lib/shapefile-writer.ts';
import { PRJ_GEOSERVER_SIRGAS2000, PRJ_SIRGAS2000_UTM23S, PRJ_WEB_MERCATOR, writeLayer, type LayerFormat } from '../fixtures/readers.ts';
import { identifySrid } from '../src/etl/layer-crs.ts';
import { codePageName, decideEncoding, scanDbfBytes, utf8Sequences } from '../src/etl/layer-encoding.ts';
import { openLayer, readFeatures } from '../src/etl/vector-reader.ts';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'layer-readers-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const FIELDS: DbfField[] = [{ name: 'nome', type: 'C', length: 60 }];
const SQUARE = { type: 'Polygon' as const, coordinates: [[[-48, -16], [-48, -15.9], [-47.9, -15.9], [-47.9, -16], [-48, -16]]] };

let n = 0;
/** Writes a one-field layer holding `names` and returns its .shp. */
async function layer(names: string[], f: LayerFormat): Promise<string> {
  const dir = path.join(tmp, `l${++n}`);
  fs.mkdirSync(dir);
  await writeLayer(dir, 'camada', FIELDS, names.map((nome) => ({ geometry: SQUARE, attributes: { nome } })), f);
  return path.join(dir, 'camada.shp');
}
const parts = (shp: string) => {
  const side = (ext: string) => (fs.existsSync(shp.replace(/\.shp$/, ext)) ? shp.replace(/\.shp$/, ext) : null);
  return { cpg: side('.cpg'), cst: side('.cst'), dbf: shp.replace(/\.shp$/, '.dbf') };
};
const namesRead = (shp: string) => [...readFeatures(openLayer(shp, { srid: 4674 }))].map((f) => f.props.nome);

describe('the encoding rule', () => {
  const ACCENTED = ['Plácido de Castro', 'FAMÍLIA Conceição', 'São Félix do Araguaia'];

  test('code page names as .cpg and .cst files spell them', () => {
    expect(['UTF-8', 'utf8', ' UTF-8\r\n', '65001', '\uFEFFUTF-8'].map(codePageName)).toEqual(Array(5).fill('UTF-8'));
    expect(['ISO-8859-1', 'ISO8859-1', '88591', '8859-1', 'latin1', '28591'].map(codePageName)).toEqual(Array(6).fill('ISO-8859-1'));
    expect(['1252', 'ANSI 1252', 'windows-1252', 'Cp1252'].map(codePageName)).toEqual(Array(4).fill('CP1252'));
    expect(codePageName('850')).toBe('CP850');
    expect(codePageName('ISO-8859-15')).toBe('ISO-8859-15');
    expect(codePageName('')).toBeNull();
    expect(codePageName('EBCDIC-XYZ')).toBeNull();
  });

  test('UTF-8 bytes without a .cpg under LDID 0x57 are read as UTF-8, decided by the bytes', async () => {
    const shp = await layer(ACCENTED, { encoding: 'utf8', cpg: null, ldid: 0x57 });
    expect(fs.readFileSync(shp.replace(/shp$/, 'dbf'))[29]).toBe(0x57);
    expect(decideEncoding(parts(shp))).toEqual({ encoding: 'UTF-8', decidedBy: 'bytes' });
    expect(namesRead(shp)).toEqual(ACCENTED);
  });

  test('ISO-8859-1 bytes without a .cpg (LDID 0x00, 0x03 or 0x57) are read as ISO-8859-1, decided by the bytes', async () => {
    for (const ldid of [0x00, 0x03, 0x57]) {
      const shp = await layer(ACCENTED, { encoding: 'latin1', cpg: null, ldid });
      expect(decideEncoding(parts(shp))).toEqual({ encoding: 'ISO-8859-1', decidedBy: 'bytes' });
      expect(namesRead(shp)).toEqual(ACCENTED);
    }
  });

  test('plain ASCII proves nothing: read as ISO-8859-1 by default', async () => {
    const shp = await layer(['Rio Verde', 'Sorriso'], { encoding: 'utf8', cpg: null });
    expect(decideEncoding(parts(shp))).toEqual({ encoding: 'ISO-8859-1', decidedBy: 'default' });
    expect(scanDbfBytes(parts(shp).dbf)).toBe('ascii');
  });

  test('a .cpg decides before everything, a .cst before the LDID and the bytes', async () => {
    const cpg = await layer(ACCENTED, { encoding: 'latin1', cpg: 'ISO-8859-1', cst: 'UTF-8', ldid: 0x57 });
    expect(decideEncoding(parts(cpg))).toEqual({ encoding: 'ISO-8859-1', decidedBy: 'cpg' });
    const cst = await layer(ACCENTED, { encoding: 'utf8', cpg: null, cst: 'UTF-8', ldid: 0x57 });
    expect(decideEncoding(parts(cst))).toEqual({ encoding: 'UTF-8', decidedBy: 'cst' });
    expect(namesRead(cst)).toEqual(ACCENTED);
    expect(openLayer(cst, { srid: 4674 })).toMatchObject({ encoding: 'UTF-8', encodingDecidedBy: 'cst', encodingAssumed: false });
  });

  test('a .cpg or .cst saying UTF-8 over bytes that cannot be UTF-8 is overruled by the bytes, and said so', async () => {
    const cpg = await layer(ACCENTED, { encoding: 'latin1', cpg: 'UTF-8' });
    // 'Plácido', 'FAMÍLIA', 'Conceição' (ç, ã), 'São', 'Félix': six accents, each a lead byte
    // without its continuation, each inside a word
    expect(utf8Sequences(parts(cpg).dbf)).toEqual({ multibyte: 0, invalid: 6, midWord: 6 });
    const said = ".cpg says UTF-8 but the DBF's bytes are not UTF-8 (6 byte sequences undecodable, 6 of them inside words; 0 multibyte)";
    expect(decideEncoding(parts(cpg))).toEqual({ encoding: 'ISO-8859-1', decidedBy: 'bytes', ignored: said, passedOver: 'cpg' });
    expect(namesRead(cpg)).toEqual(ACCENTED);
    expect(openLayer(cpg, { srid: 4674 })).toMatchObject({ encoding: 'ISO-8859-1', encodingDecidedBy: 'bytes', encodingAssumed: true, encodingIgnored: said, encodingPassedOver: 'cpg' });
    // overruled, the label is passed over like an unreadable one: a DOS file's LDID still decides
    const dosNames = ['JOÃO', 'SÃO', 'PÓ'];
    const dos = await layer(dosNames.map((t) => inCodePage(t, 'cp850')), { encoding: 'latin1', cpg: 'UTF-8', ldid: 0x02 });
    expect(decideEncoding(parts(dos))).toMatchObject({ encoding: 'CP850', decidedBy: 'ldid', passedOver: 'cpg' });
    expect(namesRead(dos)).toEqual(dosNames);
    // Windows punctuation among them: read as CP1252, as without a .cpg
    const win = await layer(['Olho d’Água', ...ACCENTED].map((t) => inCodePage(t, 'cp1252')), { encoding: 'latin1', cpg: null, cst: 'UTF-8' });
    expect(decideEncoding(parts(win))).toMatchObject({ encoding: 'CP1252', decidedBy: 'bytes' });
    expect(namesRead(win)).toEqual(['Olho d’Água', ...ACCENTED]);
  });

  test('a UTF-8 .cpg stands over UTF-8 bytes with a few damaged ones (their U+FFFD are the loud part)', async () => {
    // the first two names as UTF-8 bytes, the third in latin1: 4 valid multibyte sequences, 2 not
    const mixed = [Buffer.from(ACCENTED[0], 'utf8').toString('latin1'), Buffer.from(ACCENTED[1], 'utf8').toString('latin1'), ACCENTED[2]];
    const shp = await layer(mixed, { encoding: 'latin1', cpg: 'UTF-8' });
    expect(utf8Sequences(parts(shp).dbf)).toEqual({ multibyte: 4, invalid: 2, midWord: 2 });
    expect(decideEncoding(parts(shp))).toEqual({ encoding: 'UTF-8', decidedBy: 'cpg' });
    expect(namesRead(shp)).toEqual([ACCENTED[0], ACCENTED[1], 'S\uFFFDo F\uFFFDlix do Araguaia']);
    // values cut by the field's width inside their last character ('JOSÉ' as 'JOS' + 0xC3), and
    // no other accent: the cut lead bytes sit before the padding, not inside words
    const cut = await layer(['JOS\u00c3', 'ARAGUAÍ'.slice(0, 6) + '\u00c3', 'Rio Verde'], { encoding: 'latin1', cpg: 'UTF-8' });
    expect(utf8Sequences(parts(cut).dbf)).toEqual({ multibyte: 0, invalid: 2, midWord: 0 });
    expect(decideEncoding(parts(cut))).toEqual({ encoding: 'UTF-8', decidedBy: 'cpg' });
  });

  test('an unreadable .cpg is passed over and said so; a specific LDID (0x02, DOS 850) is honoured', async () => {
    const odd = await layer(ACCENTED, { encoding: 'utf8', cpg: 'what?' });
    expect(decideEncoding(parts(odd))).toEqual({ encoding: 'UTF-8', decidedBy: 'bytes', ignored: '.cpg "what?" not recognised', passedOver: 'cpg' });
    const dos = await layer(['ASCII only'], { encoding: 'latin1', cpg: null, ldid: 0x02 });
    expect(decideEncoding(parts(dos))).toEqual({ encoding: 'CP850', decidedBy: 'ldid' });
  });

  test('the byte scan streams: a UTF-8 sequence split across a 1 MiB chunk boundary stays valid', async () => {
    // 1 MiB of records, the accented value placed so that its 2 bytes straddle the chunk edge.
    const dir = path.join(tmp, 'big');
    fs.mkdirSync(dir);
    const fields: DbfField[] = [{ name: 'nome', type: 'C', length: 100 }];
    const recordLen = 101;
    const headerLen = 32 + 32 + 1;
    const edge = headerLen + (1 << 20);
    const rows = Math.ceil((1 << 20) / recordLen) + 2;
    const atRecord = Math.floor((edge - headerLen) / recordLen);
    const offsetInValue = edge - headerLen - atRecord * recordLen - 1 - 1; // 'á' starts 1 byte before the edge
    const names = Array.from({ length: rows }, (_, i) => (i === atRecord ? `${'x'.repeat(offsetInValue)}á` : 'abc'));
    await writeLayer(dir, 'grande', fields, names.map((nome) => ({ geometry: SQUARE, attributes: { nome } })), { encoding: 'utf8', cpg: null });
    const dbf = path.join(dir, 'grande.dbf');
    expect(fs.readFileSync(dbf).subarray(edge - 1, edge + 1)).toEqual(Buffer.from('á'));
    expect(scanDbfBytes(dbf)).toBe('utf8');
  });
});

describe('CRS identification', () => {
  const srsOf = (wkt: string) => gdal.SpatialReference.fromWKT(wkt);
  const viaShapefile = async (prj: string, epsg?: number) => openLayer(await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj, epsg }), { srid: 4674 });

  test("GeoServer's SIRGAS 2000 (TOWGS84, AXIS) is EPSG:4674, though GDAL's autoIdentifyEPSG fails on it", async () => {
    const srs = srsOf(PRJ_GEOSERVER_SIRGAS2000);
    expect(() => srs.clone().autoIdentifyEPSG()).toThrow();
    expect(identifySrid(srs, 'tis.shp')).toBe(4674);
    expect(await viaShapefile(PRJ_GEOSERVER_SIRGAS2000)).toMatchObject({ srid: 4674, sridAssumed: false });
  });

  test('ESRI WKTs: SIRGAS 2000, WGS 84, Web Mercator, SIRGAS 2000 / UTM 23S', async () => {
    expect((await viaShapefile(PRJ_SIRGAS2000)).srid).toBe(4674);
    expect((await viaShapefile(PRJ_WGS84)).srid).toBe(4326);
    expect((await viaShapefile(PRJ_WEB_MERCATOR, 3857)).srid).toBe(3857);
    expect((await viaShapefile(PRJ_SIRGAS2000_UTM23S, 31983)).srid).toBe(31983);
    expect(identifySrid(gdal.SpatialReference.fromEPSG(29193), 'x.shp')).toBe(29193);
  });

  test('layers in different CRSs opened one after another each get their own SRID', async () => {
    // gdal-async returns a closed layer's SRS wrapper for any new SRS that reuses its address
    // until the collector drops it: read through `layer.srs`, about one file in twenty took the
    // CRS of a file opened before it (a FUNAI .prj read as Web Mercator).
    const layers: [string, number][] = [
      [await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_WEB_MERCATOR, epsg: 3857 }), 3857],
      [await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_GEOSERVER_SIRGAS2000 }), 4674],
      [await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_SIRGAS2000_UTM23S, epsg: 31983 }), 31983],
      [await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_WGS84 }), 4326],
    ];
    const wrong: string[] = [];
    for (let round = 0; round < 150; round++) {
      for (const [shp, srid] of layers) {
        const got = openLayer(shp, { srid: 4674 }).srid;
        if (got !== srid) wrong.push(`round ${round}: EPSG:${srid} read as ${got}`);
      }
      const sad69 = identifySrid(gdal.SpatialReference.fromEPSG(29193), 'x.shp');
      if (sad69 !== 29193) wrong.push(`round ${round}: EPSG:29193 read as ${sad69}`);
    }
    expect(wrong).toEqual([]);
  });

  test('the CRSs of Brazilian sources, as ArcGIS (ESRI WKT) and as OGC WKT, each read as its own code', async () => {
    // SIRGAS 2000, SAD69, SAD69(96), WGS 84, Córrego Alegre (1970-72 and 1961): UTM south and
    // north, the Brazil polyconic and Mercator, and their geographic CRSs.
    const codes = [31972, 31977, 31985, 29169, 29187, 29195, 5875, 5533, 32618, 32723, 22523, 5538, 5880, 29101, 5530, 5641, 4618, 5527, 4225];
    const read: Record<string, number | string> = {};
    for (const code of codes) {
      for (const flavour of ['esri', 'ogc'] as const) {
        const srs = gdal.SpatialReference.fromEPSG(code);
        if (flavour === 'esri') srs.morphToESRI();
        const shp = await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: srs.toWKT() });
        try {
          read[`${flavour}:${code}`] = openLayer(shp, { srid: 4674 }).srid;
        } catch (e) {
          read[`${flavour}:${code}`] = (e as Error).message;
        }
      }
    }
    expect(read).toEqual(Object.fromEntries(codes.flatMap((c) => [[`esri:${c}`, c], [`ogc:${c}`, c]])));
  });

  test('a .prj with a byte-order mark and CRLF lines, and a deprecated code, read as GDAL reads them', async () => {
    const bom = await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: `\uFEFF${PRJ_SIRGAS2000_UTM23S.replace('GEOGCS', '\r\nGEOGCS')}\r\n`, epsg: 31983 });
    expect(openLayer(bom, { srid: 4674 })).toMatchObject({ srid: 31983, sridAssumed: false });
    // EPSG:29183 is the deprecated twin of SAD69 / UTM 23S (29193): the same CRS, the current code.
    const deprecated = await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: gdal.SpatialReference.fromEPSG(29183).toWKT() });
    expect(openLayer(deprecated, { srid: 4674 }).srid).toBe(29193);
  });

  test('a CRS matching no candidate fails, naming its datum', async () => {
    const unknown =
      'GEOGCS["GCS_Local",DATUM["D_Fazenda_Local",SPHEROID["Local_Sphere",6370000.0,0.0]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]';
    const shp = await layer(['a'], { encoding: 'utf8', cpg: 'UTF-8', prj: unknown });
    expect(() => openLayer(shp, { srid: 4674 })).toThrow(/cannot identify the CRS in the \.prj of camada\.shp: "GCS_Local" on datum "(D_)?Fazenda_Local"/);
  });
});
