// Reads shapefile layers with GDAL (gdal-async, synchronous API: one native call per
// feature, no thread hop) and hands out attributes plus ISO WKB geometry.
// Encoding: the engine's one rule (layer-encoding.ts: .cpg, .cst, LDID, bytes), set
// explicitly as SHAPE_ENCODING so GDAL's own LDID guess never applies. CRS: the .prj,
// identified tolerantly (layer-crs.ts); without one the pipeline's default (EPSG:4674)
// is assumed and the assumption is reported.
import fs from 'node:fs';
import path from 'node:path';
import gdal from 'gdal-async';
import { AgroError } from '../errors.ts';
import type { ZipBudget } from './archive.ts';
import { identifySrid, readPrj } from './layer-crs.ts';
import { decideEncoding, type EncodingRule } from './layer-encoding.ts';
import { gdalOpenable, layerPart } from './layer-parts.ts';
import { agroTempDir } from './temp-dirs.ts';
import { decodeField, FieldValue, parseDbfHeader, uniqueFieldNames, type DbfHeader } from './read/dbf.ts';

export interface LayerField {
  name: string;
  type: string;
}

export interface VectorLayer {
  file: string;
  /** Layer file name without extension, e.g. GO_AREA_IMOVEL_1. */
  name: string;
  srid: number;
  sridAssumed: boolean;
  encoding: string;
  /** Which step of the encoding rule decided (layer-encoding.ts). */
  encodingDecidedBy: EncodingRule;
  /** No sidecar declared the encoding (it came from the LDID, the bytes or the default). */
  encodingAssumed: boolean;
  /** A .cpg, .cst or LDID that was present but not used (the next rule decided), for the report. */
  encodingIgnored?: string;
  /** The first sidecar present but passed over (not understood, or a UTF-8 label the bytes overruled). */
  encodingPassedOver?: 'cpg' | 'cst';
  fields: LayerField[];
  featureCount: number;
  /**
   * The reader stageLayers uses: 'shp-stream' (the engine's streaming shapefile reader)
   * when the layer was opened for it (layersFromZip), else GDAL's feature loop.
   */
  reader?: 'shp-stream' | 'gdal';
  /**
   * Set when the streaming reader reads the .shp straight from its zip (layersFromZip; `file`
   * is then GDAL's /vsizip/ path of it): the zip holding it (the stored one, or a zip
   * extracted from it), the entry, the stored file the store stops trusting if the member
   * is damaged, what the archive may still inflate, and the extracted .dbf.
   */
  zipped?: { zip: string; entry: string; stored: string; budget: ZipBudget; dbf: string };
}

export interface LayerDefaults {
  /** SRID assumed when a layer has no .prj. */
  srid: number;
}

export interface RawFeature {
  /** Attribute values keyed by lower-cased source field name. */
  props: Record<string, unknown>;
  wkb: Buffer | null;
  /** Polygon rings whose last point was not their first, closed in `wkb` (as the streaming reader does: read/shp-wkb.ts). */
  ringsClosed: number;
}

/** Closes the open rings of a (multi)polygon in place; returns how many were open. */
function closeOpenRings(g: gdal.Geometry): number {
  const polygons: gdal.Polygon[] = [];
  if (g instanceof gdal.Polygon) polygons.push(g);
  else if (g instanceof gdal.MultiPolygon) for (let i = 0; i < g.children.count(); i++) polygons.push(g.children.get(i) as gdal.Polygon);
  let open = 0;
  for (const poly of polygons) {
    for (const ring of poly.rings.toArray()) {
      const n = ring.points.count();
      if (n < 2) continue;
      const a = ring.points.get(0), z = ring.points.get(n - 1);
      if (a.x !== z.x || a.y !== z.y) open++;
    }
  }
  if (open) g.closeRings();
  return open;
}

/** Every .shp among `files` (all parts of a split layer), with its sidecars checked. */
export function findShapefiles(files: string[]): string[] {
  const shps = files.filter((f) => f.toLowerCase().endsWith('.shp')).sort();
  for (const shp of shps) {
    for (const ext of ['.shx', '.dbf'] as const) {
      if (!layerPart(shp, ext)) throw new AgroError('missing_layer_part', `${path.basename(shp)} has no ${ext} file`, { file: path.basename(shp), part: ext });
    }
  }
  return shps;
}

/** Runs `fn` (synchronous: no other GDAL call in between) with a GDAL configuration option set. */
function withOption<T>(key: string, value: string, fn: () => T): T {
  const before = gdal.config.get(key);
  gdal.config.set(key, value);
  try {
    return fn();
  } finally {
    gdal.config.set(key, before ?? null);
  }
}

const withEncoding = <T>(encoding: string, fn: () => T): T => withOption('SHAPE_ENCODING', encoding, fn);

const within = (a: gdal.Envelope, b: gdal.Envelope) => a.minX >= b.minX && a.maxX <= b.maxX && a.minY >= b.minY && a.maxY <= b.maxY;

/**
 * Whether GDAL's reading of a multi-part polygon record by ring orientation (its default for
 * shapefiles, METHOD=ONLY_CCW) may contradict the rings' positions: a hole reaching outside its
 * shell, or a part inside another part. Rings written the other way round (GeoJSON's order) read
 * like that: a land with a hole became a polygon whose shell is the hole. Such a record is read
 * again with the rings nested by containment (METHOD=DEFAULT), as read/shp-wkb.ts nests them.
 */
function mayBeMisnested(g: gdal.Geometry): boolean {
  const polys: gdal.Polygon[] = [];
  if (g instanceof gdal.Polygon) polys.push(g);
  else if (g instanceof gdal.MultiPolygon) for (let i = 0; i < g.children.count(); i++) polys.push(g.children.get(i) as gdal.Polygon);
  const shells: gdal.Envelope[] = [];
  for (const poly of polys) {
    const rings = poly.rings.toArray();
    if (rings.length === 0) continue;
    const shell = rings[0].getEnvelope();
    for (let i = 1; i < rings.length; i++) if (!within(rings[i].getEnvelope(), shell)) return true;
    shells.push(shell);
  }
  return shells.some((a, i) => shells.some((b, j) => i !== j && within(a, b)));
}

/** An empty .prj (0 bytes or blanks) says no more than a missing one: the default SRID is assumed and noted. */
const declaresCrs = (prj: string | null): prj is string => prj !== null && fs.readFileSync(prj, 'latin1').trim() !== '';

export function openLayer(shp: string, defaults: LayerDefaults): VectorLayer {
  const prjFile = layerPart(shp, '.prj');
  const prj = declaresCrs(prjFile) ? prjFile : null;
  const dbf = layerPart(shp, '.dbf');
  if (!dbf) throw new AgroError('missing_layer_part', `${path.basename(shp)} has no .dbf file`, { file: path.basename(shp), part: '.dbf' });
  const decision = decideEncoding({ cpg: layerPart(shp, '.cpg'), cst: layerPart(shp, '.cst'), dbf });
  return withEncoding(decision.encoding, () => {
    const opened = gdalOpenable(shp);
    let ds: gdal.Dataset;
    try {
      ds = gdal.open(opened.shp);
    } catch (e) {
      opened.release();
      throw new AgroError('malformed_source', `${path.basename(shp)}: ${(e as Error).message}`);
    }
    try {
      const layer = ds.layers.get(0);
      const srid = prj ? identifySrid(readPrj(prj), shp) : null;
      const types = layer.fields.map((f) => f.type);
      return {
        file: shp,
        name: path.basename(shp).slice(0, -4),
        srid: srid ?? defaults.srid,
        sridAssumed: srid === null,
        encoding: decision.encoding,
        encodingDecidedBy: decision.decidedBy,
        encodingAssumed: decision.decidedBy !== 'cpg' && decision.decidedBy !== 'cst',
        ...(decision.ignored ? { encodingIgnored: decision.ignored } : {}),
        ...(decision.passedOver ? { encodingPassedOver: decision.passedOver } : {}),
        fields: uniqueFieldNames(layer.fields.map((f) => f.name.toLowerCase())).map((name, i) => ({ name, type: types[i] })),
        featureCount: layer.features.count(),
      };
    } finally {
      ds.close();
      opened.release();
    }
  });
}

/** The header of the .dbf open as `fd` (throws when it is cut or not a DBF). */
function readDbfHeader(fd: number, dbf: string): DbfHeader {
  const head = Buffer.alloc(32);
  if (fs.readSync(fd, head, 0, 32, 0) < 32) throw new Error(`${path.basename(dbf)}: no DBF header`);
  const all = Buffer.alloc(head.readUInt16LE(8));
  return parseDbfHeader(all.subarray(0, fs.readSync(fd, all, 0, all.length, 0)), path.basename(dbf));
}

/**
 * A DBF's record count as its header declares it. Refused as the streaming reader refuses them:
 * a .dbf cut inside its records (GDAL dropped the cut ones without a word), and a C field wider
 * than 254 bytes (read/dbf.ts widenCharFields: GDAL reads 254 bytes at most of it and every
 * field after it from the wrong bytes).
 */
function dbfRecordCount(dbf: string): number | null {
  const fd = fs.openSync(dbf, 'r');
  let header: DbfHeader;
  let size: number;
  try {
    header = readDbfHeader(fd, dbf);
    size = fs.fstatSync(fd).size;
  } catch {
    return null; // GDAL opened it: its reading stands
  } finally {
    fs.closeSync(fd);
  }
  const present = header.recordLength ? Math.max(0, Math.floor((size - header.headerLength) / header.recordLength)) : header.records;
  if (present < header.records) throw new AgroError('malformed_source', `${path.basename(dbf)}: ${header.records} records declared, ${present} present`);
  if (header.widened.length) {
    const widths = header.fields.filter((f) => header.widened.includes(f.name)).map((f) => `${f.name} (${f.length} bytes)`);
    throw new AgroError('malformed_source', `${path.basename(dbf)}: text field(s) wider than GDAL reads: ${widths.join(', ')}`, { file: path.basename(dbf) });
  }
  return header.records;
}

/** What the feature loop skipped, as the streaming reader counts it (read/shp-stream.ts). */
export interface ReadCounts {
  /** DBF records flagged deleted (GDAL skips them). */
  deleted: number;
  /** Shapes after the .dbf's last record (GDAL reads as many features as the .dbf has records). */
  shapesWithoutRecord: number;
  /** Numeric/date DBF cells that were not numbers/dates, kept as written (as the streaming reader counts them). */
  unparsed: number;
}

/**
 * The N, F and D cells of a .dbf read by record number (a shapefile feature's fid), as the
 * streaming reader decodes them (read/dbf.ts decodeField), so that both readers stage the same
 * value. GDAL's own reading of them is lossy: a cell that is not a plain number is read as far
 * as it parses ('5000,75' → 5000, '1.234.567,5' → 1.234, 'n/d' → 0: a Brazilian decimal comma
 * published a wrong value, nothing counted), and an 18-digit code of an N(18,0) field loses its
 * last digits above 2^53. Here such a cell is a number with every digit, or its text as written
 * (counted; the SQL conversions read it, or keep it in `extra`).
 */
class DbfCells {
  private readonly fd: number;
  private readonly header: DbfHeader;
  private readonly value = new FieldValue((b, s, e) => b.toString('latin1', s, e));
  private readonly rec: Buffer;

  constructor(dbf: string) {
    this.fd = fs.openSync(dbf, 'r');
    try {
      this.header = readDbfHeader(this.fd, dbf);
      this.rec = Buffer.alloc(this.header.recordLength);
    } catch (e) {
      fs.closeSync(this.fd);
      throw e;
    }
  }

  /** Whether the .dbf has N, F or D fields (else GDAL's values stand and no record is read). */
  get typed(): boolean {
    return this.header.fields.some((f) => f.type === 'N' || f.type === 'F' || f.type === 'D');
  }

  /**
   * The N, F and D cells of record `fid` by field index (JSON-ready: a big whole number as its
   * digits, a date as yyyy-mm-dd, a cell that is neither as written, counted in `counts`), or
   * null when the record cannot be read.
   */
  record(fid: number, counts?: ReadCounts): Map<number, string | number | null> | null {
    const at = this.header.headerLength + fid * this.header.recordLength;
    if (fs.readSync(this.fd, this.rec, 0, this.rec.length, at) < this.rec.length) return null;
    const cells = new Map<number, string | number | null>();
    this.header.fields.forEach((f, i) => {
      if (f.type !== 'N' && f.type !== 'F' && f.type !== 'D') return;
      if (decodeField(this.rec, 0, f, this.value) && counts) counts.unparsed++;
      cells.set(i, this.value.json);
    });
    return cells;
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}

/** The .dbf's cells, or null when it cannot be parsed (GDAL's values then stand). */
function dbfCells(dbf: string | null): DbfCells | null {
  if (!dbf) return null;
  let cells: DbfCells;
  try {
    cells = new DbfCells(dbf);
  } catch {
    return null;
  }
  if (cells.typed) return cells;
  cells.close();
  return null;
}

/**
 * A feature's attributes under the layer's (lower-cased, de-duplicated) field names; its N, F
 * and D cells from the DBF itself when the layer has one (`cells`: DbfCells says why).
 */
function propsOf(f: gdal.Feature, names: string[], cells: DbfCells | null, counts?: ReadCounts): Record<string, unknown> {
  const values = f.fields.toArray();
  const own = cells?.record(f.fid, counts) ?? null;
  const props: Record<string, unknown> = {};
  for (let i = 0; i < names.length; i++) props[names[i]] = own?.has(i) ? own.get(i) : values[i];
  return props;
}

/**
 * The .dbf records after the .shp's last shape, with no geometry. GDAL's layer ends with the
 * .shp, and those records were dropped without a word (the streaming reader loads them with a
 * NULL geometry): they are read from the .dbf opened alone (a link in a folder of its own,
 * or GDAL would open the .shp beside it).
 */
function* recordsAfterShapes(layer: VectorLayer, dbf: string, shapes: number, counts?: ReadCounts): Generator<RawFeature> {
  const dir = agroTempDir('dbf'); // the source's folder may be read-only
  try {
    const alone = path.join(dir, path.basename(dbf, path.extname(dbf)) + '.dbf'); // as GDAL finds it (layer-parts.ts)
    try {
      fs.linkSync(dbf, alone);
    } catch {
      fs.copyFileSync(dbf, alone);
    }
    const ds = withEncoding(layer.encoding, () => gdal.open(alone));
    const cells = dbfCells(alone);
    try {
      const lyr = ds.layers.get(0);
      const names = uniqueFieldNames(lyr.fields.map((f) => f.name.toLowerCase()));
      for (let f = lyr.features.first(); f; f = lyr.features.next()) {
        if (f.fid < shapes) continue;
        yield { props: propsOf(f, names, cells, counts), wkb: null, ringsClosed: 0 };
      }
    } finally {
      cells?.close();
      ds.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Streams a layer's features; the dataset stays open only while iterating. A shapefile's
 * `counts` (when given) are added to once the loop has run to its end.
 */
export function* readFeatures(layer: VectorLayer, counts?: ReadCounts): Generator<RawFeature> {
  const opened = /\.shp$/i.test(layer.file) ? gdalOpenable(layer.file) : { shp: layer.file, release: () => {} };
  let ds: gdal.Dataset;
  try {
    ds = withEncoding(layer.encoding, () => gdal.open(opened.shp));
  } catch (e) {
    opened.release();
    throw e;
  }
  let read = 0;
  let cells: DbfCells | null = null;
  try {
    const lyr = ds.layers.get(0);
    const names = uniqueFieldNames(lyr.fields.map((f) => f.name.toLowerCase()));
    // Only the shapefile driver organises rings into polygons (mayBeMisnested).
    const shapefile = /\.shp$/i.test(layer.file);
    const dbf = shapefile ? layerPart(layer.file, '.dbf') : null;
    const records = dbf ? dbfRecordCount(dbf) : null;
    cells = dbfCells(dbf);
    // first() rewinds the layer and returns feature 1; next() continues from there.
    for (let f = lyr.features.first(); f; f = lyr.features.next()) {
      const props = propsOf(f, names, cells, counts);
      let g = f.getGeometry();
      if (g && shapefile && !g.isEmpty() && mayBeMisnested(g)) {
        const fid = f.fid;
        g = withOption('OGR_ORGANIZE_POLYGONS', 'DEFAULT', () => lyr.features.get(fid)).getGeometry();
      }
      const ringsClosed = g && !g.isEmpty() ? closeOpenRings(g) : 0;
      read++;
      yield { props, wkb: g && !g.isEmpty() ? g.toWKB() : null, ringsClosed };
    }
    if (dbf && records !== null) {
      const shapes = lyr.features.count();
      if (records > shapes) for (const f of recordsAfterShapes(layer, dbf, shapes, counts)) read++, yield f;
      if (counts) {
        counts.shapesWithoutRecord += Math.max(0, shapes - records);
        counts.deleted += Math.max(0, records - read);
      }
    }
  } finally {
    cells?.close();
    ds.close();
    opened.release();
  }
}
