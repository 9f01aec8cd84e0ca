// Stored WFS pages (GeoJSON FeatureCollections) into an unlogged staging table through
// COPY, with the same columns stageLayers gives a shapefile (canonical fields from any
// known spelling, unknown ones in `extra`, WKB geometry with its source SRID), so the
// normalisation SQL does not know which route a row came by. One page is in memory at a
// time: memory is bounded by the page size, not by the state.
//
// Axis order: GeoServer serves lat/lon for some srsName spellings under WFS 1.1/2.0
// (SOURCES.md §1.1), and GeoJSON's own `crs` member does not say which order it used. So
// each page's order is decided from the data: the first coordinate of every feature is
// tested against the bounds the caller knows the layer lies in, read both ways; the
// order that fits more features wins and is reported. A forced order (settings) skips
// the vote. Coordinates are swapped to lon/lat here; ST_Transform(4674 → 4326) follows in SQL.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { ident } from '../db/pool.ts';
import { copyLine, copyLines, jsonText, type CopyValue } from './copy.ts';
import { createStagingTable, mapFields, schemaFingerprint, type FieldSpec, type StageResult } from './stage-vector.ts';
import type { QualityFacts } from './quality.ts';
import type { VectorLayer } from './vector-reader.ts';
import type { PagedManifest } from './wfs.ts';

export type AxisOrder = 'lon-lat' | 'lat-lon';

/** Where the layer's features are known to lie, in degrees (lon/lat). */
export interface Bounds {
  lon: [number, number];
  lat: [number, number];
}

/** Where Brazilian features lie, for the axis vote of a paged route's pages (SOURCES.md §1.8 envelope). */
export const BRAZIL_BOUNDS: Bounds = { lon: [-75, -28], lat: [-35, 6] };

export interface WfsStageOptions {
  /** Folder holding the pages the manifest lists. */
  dir: string;
  /** Layer name in reports. */
  layerName: string;
  axisOrder: 'auto' | AxisOrder;
  bounds: Bounds;
  /** A property's value as staged under its canonical column (e.g. ArcGIS epoch-ms dates as ISO text); default: as served. */
  value?: (column: string, v: unknown) => unknown;
}

export interface WfsStageResult extends StageResult {
  layer: VectorLayer;
  /** Pages read in each axis order. */
  axis: Record<AxisOrder, number>;
  /** Features whose first coordinate fits neither order (they will be rejected as outside the bounds). */
  axisUnplaceable: number;
}

/** EPSG code of an srsName in any of its spellings (EPSG:4674, urn:ogc:def:crs:EPSG::4674, http://www.opengis.net/def/crs/EPSG/0/4674, …#4674). */
export function sridOf(srsName: string): number {
  const m = /(?:EPSG:+|EPSG\/\d+\/|#)(\d+)\s*$/i.exec(srsName.trim());
  if (!m) throw new AgroError('usage', `cannot read an EPSG code from srsName "${srsName}"`);
  return Number(m[1]);
}

// ---------- GeoJSON → ISO WKB (little-endian, 2D) ----------

type Coords = number[] | Coords[];
interface Geometry {
  type: string;
  coordinates?: Coords;
  geometries?: Geometry[];
}

const WKB_TYPES: Record<string, number> = { Point: 1, LineString: 2, Polygon: 3, MultiPoint: 4, MultiLineString: 5, MultiPolygon: 6, GeometryCollection: 7 };
/** Nesting depth of each type's coordinates: 0 = one position. */
const DEPTH: Record<string, number> = { Point: 0, LineString: 1, Polygon: 2, MultiPoint: 1, MultiLineString: 2, MultiPolygon: 3 };

function wkbSize(g: Geometry): number {
  if (g.type === 'GeometryCollection') return 9 + (g.geometries ?? []).reduce((a, x) => a + wkbSize(x), 0);
  const c = g.coordinates as Coords;
  switch (g.type) {
    case 'Point': return 5 + 16;
    case 'LineString': return 9 + c.length * 16;
    case 'Polygon': return 9 + (c as number[][][]).reduce((a, r) => a + 4 + r.length * 16, 0);
    case 'MultiPoint': return 9 + c.length * 21;
    case 'MultiLineString': return 9 + (c as number[][][]).reduce((a, l) => a + 9 + l.length * 16, 0);
    case 'MultiPolygon': return 9 + (c as number[][][][]).reduce((a, p) => a + wkbSize({ type: 'Polygon', coordinates: p }), 0);
    default: throw new AgroError('malformed_source', `unsupported GeoJSON geometry type ${g.type}`);
  }
}

class WkbWriter {
  off = 0;
  constructor(readonly buf: Buffer, readonly swap: boolean) {}
  header(type: number) {
    this.buf.writeUInt8(1, this.off);
    this.buf.writeUInt32LE(type, this.off + 1);
    this.off += 5;
  }
  u32(n: number) {
    this.buf.writeUInt32LE(n, this.off);
    this.off += 4;
  }
  pos(p: number[]) {
    const [a, b] = this.swap ? [p[1], p[0]] : [p[0], p[1]];
    this.buf.writeDoubleLE(a, this.off);
    this.buf.writeDoubleLE(b, this.off + 8);
    this.off += 16;
  }
  positions(ps: number[][]) {
    this.u32(ps.length);
    for (const p of ps) this.pos(p);
  }
  geometry(g: Geometry) {
    const c = g.coordinates as Coords;
    this.header(WKB_TYPES[g.type]);
    switch (g.type) {
      case 'Point': return this.pos(c as number[]);
      case 'LineString': return this.positions(c as number[][]);
      case 'Polygon':
        this.u32(c.length);
        for (const r of c as number[][][]) this.positions(r);
        return;
      case 'MultiPoint':
        this.u32(c.length);
        for (const p of c as number[][]) this.geometry({ type: 'Point', coordinates: p });
        return;
      case 'MultiLineString':
        this.u32(c.length);
        for (const l of c as number[][][]) this.geometry({ type: 'LineString', coordinates: l });
        return;
      case 'MultiPolygon':
        this.u32(c.length);
        for (const p of c as number[][][][]) this.geometry({ type: 'Polygon', coordinates: p });
        return;
      case 'GeometryCollection':
        this.u32(g.geometries!.length);
        for (const x of g.geometries!) this.geometry(x);
    }
  }
}

/** ISO WKB of a GeoJSON geometry (x/y swapped when `swap`); null for null or an empty one. */
export function geojsonToWkb(g: Geometry | null | undefined, swap = false): Buffer | null {
  if (!g || !(g.type in WKB_TYPES)) {
    if (g) throw new AgroError('malformed_source', `unsupported GeoJSON geometry type ${String(g.type)}`);
    return null;
  }
  if (g.type === 'GeometryCollection' ? !g.geometries?.length : !Array.isArray(g.coordinates) || g.coordinates.length === 0) return null;
  const w = new WkbWriter(Buffer.allocUnsafe(wkbSize(g)), swap);
  w.geometry(g);
  return w.buf;
}

// ---------- axis order ----------

function firstPosition(g: Geometry | null | undefined): number[] | null {
  if (!g) return null;
  if (g.type === 'GeometryCollection') return firstPosition(g.geometries?.[0]);
  let c: unknown = g.coordinates;
  for (let d = DEPTH[g.type] ?? 0; d > 0 && Array.isArray(c); d--) c = (c as unknown[])[0];
  return Array.isArray(c) && typeof c[0] === 'number' && typeof c[1] === 'number' ? (c as number[]) : null;
}

const within = (v: number, [lo, hi]: [number, number]) => v >= lo && v <= hi;

/** The order of one page's coordinates, and how many features fit neither order. */
export function pageAxisOrder(features: { geometry?: Geometry | null }[], bounds: Bounds, configured: 'auto' | AxisOrder): { order: AxisOrder; unplaceable: number } {
  let lonLat = 0;
  let latLon = 0;
  let unplaceable = 0;
  for (const f of features) {
    const p = firstPosition(f.geometry);
    if (!p) continue;
    const a = within(p[0], bounds.lon) && within(p[1], bounds.lat);
    const b = within(p[1], bounds.lon) && within(p[0], bounds.lat);
    if (a && !b) lonLat++;
    else if (b && !a) latLon++;
    else if (!a && !b) unplaceable++;
  }
  // Without evidence, GeoJSON's own rule (RFC 7946: lon/lat).
  const order = configured !== 'auto' ? configured : latLon > lonLat ? 'lat-lon' : 'lon-lat';
  return { order, unplaceable };
}

// ---------- staging ----------

interface Feature {
  id?: string | number;
  properties?: Record<string, unknown> | null;
  geometry?: Geometry | null;
}

interface Page {
  features: Feature[];
  crs?: { properties?: { name?: string } };
}

async function readPage(file: string): Promise<Page> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as Page;
  } catch (e) {
    throw new AgroError('malformed_source', `${path.basename(file)}: ${(e as Error).message}`);
  }
}

/** Property names lower-cased, the feature id as `fid` (the name GeoServer's CSV output gives it). */
function propsOf(f: Feature): Record<string, unknown> {
  const props: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(f.properties ?? {})) props[k.toLowerCase()] = v;
  if (f.id !== undefined && f.id !== null && !('fid' in props)) props.fid = String(f.id);
  return props;
}

const asText = (v: unknown): CopyValue => {
  if (v === null || v === undefined) return null;
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
};

/**
 * Stages every page the manifest lists into `table` (created here), in page order. The
 * field list is the union of the first page's property names (GeoJSON has no schema);
 * required fields are checked on it before a row is written.
 */
export async function stageWfsPages(client: pg.ClientBase, table: string, manifest: PagedManifest<{ srsName: string }>, specs: FieldSpec[], o: WfsStageOptions): Promise<WfsStageResult> {
  const srid = sridOf(manifest.request.srsName);
  const pageFiles = manifest.pages.filter((p) => p.features > 0).map((p) => path.join(o.dir, p.file));
  if (pageFiles.length === 0) throw new AgroError('source_not_found', `${o.layerName} has no features (expected count ${manifest.numberMatched})`);

  let first: Page | null = await readPage(pageFiles[0]);
  const names = new Set<string>();
  for (const f of first.features) for (const k of Object.keys(propsOf(f))) names.add(k);
  const layer: VectorLayer = {
    file: path.join(o.dir, 'manifest.json'), name: o.layerName, srid, sridAssumed: false,
    // JSON is UTF-8 by definition (RFC 8259): no DBF rule applies.
    encoding: 'UTF-8', encodingAssumed: false, encodingDecidedBy: 'default',
    fields: [...names].map((name) => ({ name, type: 'json' })), featureCount: manifest.features,
  };
  const { index, missing } = mapFields(layer, specs);
  await createStagingTable(client, table, specs);

  const axis: Record<AxisOrder, number> = { 'lon-lat': 0, 'lat-lon': 0 };
  const unknown = new Set<string>();
  let axisUnplaceable = 0;
  let replacementChars = 0;
  let seq = 0;
  // Source spelling of each canonical column, in column order.
  const sourceOf = specs.map((s) => [...index].find(([, canon]) => canon === s.name)?.[0]);
  const value = o.value ?? ((_c: string, v: unknown) => v);
  const columns = ['src_seq', 'src_layer', 'src_srid', ...specs.map((s) => s.name), 'extra', 'geom'];
  async function* lines(): AsyncGenerator<string> {
    for (let i = 0; i < pageFiles.length; i++) {
      const page = first ?? (await readPage(pageFiles[i]));
      first = null; // one page alive at a time
      const declared = page.crs?.properties?.name;
      if (declared && sridOf(declared) !== srid) {
        throw new AgroError('malformed_source', `${path.basename(pageFiles[i])}: the server answered in ${declared}, not the ${manifest.request.srsName} asked for`);
      }
      const { order, unplaceable } = pageAxisOrder(page.features, o.bounds, o.axisOrder);
      axis[order]++;
      axisUnplaceable += unplaceable;
      for (const f of page.features) {
        const props = propsOf(f);
        const row: CopyValue[] = [++seq, o.layerName, srid];
        for (const [k, src] of sourceOf.entries()) {
          const v = src === undefined ? null : asText(value(specs[k].name, props[src]));
          if (typeof v === 'string' && v.includes('\uFFFD')) replacementChars++;
          row.push(v);
        }
        let extra: Record<string, unknown> | null = null;
        for (const [k, v] of Object.entries(props)) {
          if (index.has(k)) continue;
          unknown.add(k);
          if (v !== null && v !== undefined && v !== '') (extra ??= {})[k] = v;
        }
        const wkb = geojsonToWkb(f.geometry, order === 'lat-lon');
        row.push(extra ? jsonText(extra) : null, wkb ? wkb.toString('hex') : null);
        yield copyLine(row);
      }
    }
  }
  const rows = await copyLines(client, `${table} (${columns.map(ident).join(', ')})`, lines());
  return {
    rows, missingOptional: missing, unknown: [...unknown], replacementChars,
    fingerprint: schemaFingerprint([layer]), layer, axis, axisUnplaceable,
  };
}

/** How a paged route names its completeness check in the report. */
export interface PagedCountWords {
  /** The gate rule (wfs_count, rest_count). */
  rule: string;
  /** The failure's message for the server's count and the distinct features downloaded. */
  shortfall: (count: number, distinct: number) => string;
  /** The pages' name in the note on features that came twice ('WFS', 'REST'). */
  pages: string;
  /** The note's start when the count asked again after the last page differs ("numberMatched changed"). */
  countChanged: string;
}

/**
 * A paged route's completeness check on its staged rows: features of distinct server ids
 * (`idKeys` under `extra`, the first present; a row without one counts alone) against the
 * count asked before paging. Fewer means the download lost some (a page that shifted while
 * paging repeats some and misses others) and the gate rule blocks the snapshot. Returns the
 * distinct count.
 */
export async function checkPagedCount(
  client: pg.ClientBase, stage: string, m: PagedManifest<unknown>, facts: QualityFacts, idKeys: string[], w: PagedCountWords,
): Promise<number> {
  const ids = idKeys.map((k) => `extra->>'${k.replace(/'/g, "''")}'`).join(', ');
  const r = await client.query(`SELECT count(DISTINCT coalesce(${ids}, 'seq:' || src_seq))::int AS n FROM ${stage}`);
  const distinct: number = r.rows[0].n;
  if (distinct < m.numberMatched) {
    facts.failures.push({ rule: w.rule, message: w.shortfall(m.numberMatched, distinct), value: distinct, threshold: m.numberMatched });
  }
  if (m.features > distinct) facts.notes.push(`${m.features - distinct} features came twice across ${w.pages} pages (the layer changed while paging)`);
  if (m.numberMatchedAfter !== m.numberMatched) facts.notes.push(`${w.countChanged} during the download: ${m.numberMatched} → ${m.numberMatchedAfter}`);
  return distinct;
}
