// ESRI shapefile records (.shp) straight to ISO WKB (little-endian), with the geometry
// GDAL's shapefile driver builds from the same record (shape2ogr.cpp), so that the
// staged geometries are equal to the GDAL reader's (test/read-paths.test.ts):
// - Point/MultiPoint; PolyLine: one part = LineString, more = MultiLineString;
// - Polygon: one part = Polygon; more: clockwise rings are outer rings in file order and
//   each counter-clockwise ring is a hole of the smallest outer ring that contains it
//   (GDAL's organizePolygons METHOD=ONLY_CCW); with one outer ring every other ring is
//   its hole. One polygon = Polygon, more = MultiPolygon. When the orientation contradicts
//   the rings' positions (a 'hole' in no outer ring, a ring outside the one outer ring, no
//   clockwise ring at all: a writer that wrote the rings the other way round, as GeoJSON
//   orders them), the rings are nested by containment instead (GDAL's METHOD=DEFAULT, which
//   vector-reader.ts then asks of GDAL too): read by orientation, a land with a hole became a
//   polygon whose shell is the hole (repaired to EMPTY) and a multi-part land's holes became
//   parts of their own (repaired into filled holes);
// - Z types carry Z and, when the record has them, M (PolygonZ always has M in GDAL);
//   M types carry M; null shapes and shapes without parts/points are NULL.
// Coordinates are copied as they are (no re-orientation), except that a polygon ring whose
// last point is not its first gets its first point again (ringsClosed counts them): PostGIS
// refuses an unclosed ring, and one such record failed the whole load ('Polygon must have
// closed rings'); closed, the polygon goes to the repair like any invalid one.
import { AgroError } from '../../errors.ts';
import { dataView } from './data-view.ts';

const T_NULL = 0, T_POINT = 1, T_ARC = 3, T_POLYGON = 5, T_MULTIPOINT = 8;

interface Dims {
  z: boolean;
  m: boolean;
}

/** Base type (1, 3, 5, 8) and dimensions of a shape type code; null for Null/MultiPatch/unknown. */
function baseType(t: number): { base: number; dims: Dims } | null {
  if (t === T_NULL) return null;
  const base = t % 10;
  if (![T_POINT, T_ARC, T_POLYGON, T_MULTIPOINT].includes(base) || t > 28) return null;
  return { base, dims: { z: t > 10 && t < 20, m: t > 20 } };
}

/** A record's parsed view: parts and where X/Y, Z and M arrays start in the buffer. */
interface Parsed {
  base: number;
  z: boolean;
  m: boolean;
  nParts: number;
  nPoints: number;
  partsAt: number;
  xyAt: number;
  zAt: number;
  mAt: number;
}

function parse(buf: Buffer, at: number, len: number, file: string): Parsed | null {
  if (len < 4) return null;
  const type = buf.readInt32LE(at);
  const bt = baseType(type);
  if (!bt) {
    if (type === T_NULL) return null;
    throw new AgroError('malformed_source', `${file}: unsupported shape type ${type}`);
  }
  const end = at + len;
  const p: Parsed = { base: bt.base, z: bt.dims.z, m: bt.dims.m, nParts: 1, nPoints: 1, partsAt: 0, xyAt: at + 4, zAt: 0, mAt: 0 };
  if (bt.base === T_POINT) {
    if (len < 20) throw cut(file);
    p.zAt = at + 20;
    if (p.z) {
      if (len < 28) throw cut(file);
      p.mAt = at + 28;
      p.m = len >= 36; // PointZ: M is optional
    } else if (p.m) {
      if (len < 28) throw cut(file);
      p.mAt = at + 20;
    }
    return p;
  }
  if (bt.base === T_MULTIPOINT) {
    p.nPoints = buf.readInt32LE(at + 36);
    p.nParts = 0;
    p.xyAt = at + 40;
  } else {
    p.nParts = buf.readInt32LE(at + 36);
    p.nPoints = buf.readInt32LE(at + 40);
    p.partsAt = at + 44;
    p.xyAt = p.partsAt + 4 * p.nParts;
  }
  if (p.nParts < 0 || p.nPoints < 0 || p.xyAt + 16 * p.nPoints > end) throw cut(file);
  let next = p.xyAt + 16 * p.nPoints;
  if (p.z) {
    p.zAt = next + 16;
    next = p.zAt + 8 * p.nPoints;
    if (next > end) throw cut(file);
  }
  if (p.z || p.m) {
    p.mAt = next + 16;
    const hasM = p.mAt + 8 * p.nPoints <= end;
    if (p.m && !hasM && p.nPoints > 0) throw cut(file);
    // GDAL: PolygonZ is always XYZM (M = 0 when absent); other Z types only when present.
    p.m = hasM || (p.z && p.base === T_POLYGON);
    if (!hasM) p.mAt = -1;
  }
  return p;
}

const cut = (file: string) => new AgroError('malformed_source', `${file}: a .shp record is cut short`);

const WKB_POINT = 1, WKB_LINESTRING = 2, WKB_POLYGON = 3, WKB_MULTIPOINT = 4, WKB_MULTILINESTRING = 5, WKB_MULTIPOLYGON = 6;

/**
 * Signed shoelace area of a ring (negative = clockwise), closing edge included: it is 0 for a
 * closed ring, and an open one (closed later, markOpenRings) must get its true orientation,
 * or a hole judged an outer ring becomes a part of its own and the repair fills the hole.
 */
function ringArea(v: DataView<ArrayBufferLike>, xy: number, n: number): number {
  let s = 0;
  for (let i = 0; i < n; i++) {
    const a = xy + 16 * i;
    const b = xy + 16 * (i + 1 < n ? i + 1 : 0);
    s += v.getFloat64(a, true) * v.getFloat64(b + 8, true) - v.getFloat64(b, true) * v.getFloat64(a + 8, true);
  }
  return s / 2;
}

/** Even-odd point-in-ring test (the point on the ring counts as outside). */
function pointInRing(v: DataView<ArrayBufferLike>, xy: number, n: number, x: number, y: number): boolean {
  let inside = false;
  for (let i = 0, j = n - 1; i < n; j = i++) {
    const xi = v.getFloat64(xy + 16 * i, true), yi = v.getFloat64(xy + 16 * i + 8, true);
    const xj = v.getFloat64(xy + 16 * j, true), yj = v.getFloat64(xy + 16 * j + 8, true);
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

interface Ring {
  start: number;
  n: number;
  /** A polygon ring whose last point differs from its first: written with its first point again. */
  open: boolean;
  area: number;
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

function ringsOf(buf: Buffer, p: Parsed): Ring[] {
  const rings: Ring[] = [];
  for (let i = 0; i < p.nParts; i++) {
    const start = buf.readInt32LE(p.partsAt + 4 * i);
    const stop = i + 1 < p.nParts ? buf.readInt32LE(p.partsAt + 4 * i + 4) : p.nPoints;
    if (start < 0 || stop > p.nPoints || stop < start) throw new AgroError('malformed_source', 'a .shp record has bad part offsets');
    rings.push({ start, n: stop - start, open: false, area: 0, minX: Infinity, minY: Infinity, maxX: -Infinity, maxY: -Infinity });
  }
  return rings;
}

/** Marks the polygon rings whose last point (x, y) is not their first; returns how many. */
function markOpenRings(buf: Buffer, p: Parsed, rings: Ring[]): number {
  let open = 0;
  for (const r of rings) {
    if (r.n < 2) continue;
    const a = p.xyAt + 16 * r.start, z = p.xyAt + 16 * (r.start + r.n - 1);
    r.open = buf.readDoubleLE(a) !== buf.readDoubleLE(z) || buf.readDoubleLE(a + 8) !== buf.readDoubleLE(z + 8);
    if (r.open) open++;
  }
  return open;
}

/**
 * Polygon rings grouped into polygons (arrays of ring indexes, outer first), as
 * GDAL's ONLY_CCW organisation does for multi-part records.
 */
function organise(buf: Buffer, p: Parsed, rings: Ring[]): number[][] {
  if (rings.length === 1) return [[0]];
  const v = dataView(buf);
  const outers: number[] = [];
  for (let i = 0; i < rings.length; i++) {
    const r = rings[i];
    r.area = ringArea(v, p.xyAt + 16 * r.start, r.n);
    if (r.area < 0) outers.push(i);
  }
  if (outers.length === 1) {
    const o = outers[0];
    ringBox(v, p, rings[o]);
    const h = rings[o];
    const poly = [o];
    for (let i = 0; i < rings.length; i++) {
      if (i === o) continue;
      // A 'hole' larger than the outer ring, or starting outside its box: the rings are the other way round.
      const xy = p.xyAt + 16 * rings[i].start;
      const x = v.getFloat64(xy, true), y = v.getFloat64(xy + 8, true);
      if (Math.abs(rings[i].area) >= -h.area || (rings[i].n > 0 && (x < h.minX || x > h.maxX || y < h.minY || y > h.maxY))) return byContainment(v, p, rings);
      poly.push(i);
    }
    return [poly];
  }
  if (outers.length === 0) return byContainment(v, p, rings);
  // Boxes only when a hole has more than one candidate outer ring.
  for (const r of rings) ringBox(v, p, r);
  // Smallest containing outer ring first (GDAL walks outers by increasing area).
  const bySize = [...outers].sort((a, b) => rings[a].area - rings[b].area).reverse();
  const holesOf = new Map<number, number[]>(outers.map((o) => [o, []]));
  const alone: number[] = [];
  for (let i = 0; i < rings.length; i++) {
    const r = rings[i];
    if (r.area < 0) continue;
    let host = -1;
    for (const o of bySize) {
      const h = rings[o];
      if (-h.area <= Math.abs(r.area)) continue;
      if (h.minX > r.minX || h.maxX < r.maxX || h.minY > r.minY || h.maxY < r.maxY) continue;
      const xy = p.xyAt + 16 * r.start;
      if (r.n === 0 || pointInRing(v, p.xyAt + 16 * h.start, h.n, v.getFloat64(xy, true), v.getFloat64(xy + 8, true))) {
        host = o;
        break;
      }
    }
    if (host >= 0) holesOf.get(host)!.push(i);
    else alone.push(i);
  }
  // A hole in no outer ring: the orientation is not to be trusted, the positions are.
  if (alone.length) return byContainment(v, p, rings);
  const polys: number[][] = [];
  for (let i = 0; i < rings.length; i++) {
    if (holesOf.has(i)) polys.push([i, ...holesOf.get(i)!]);
    else if (alone.includes(i)) polys.push([i]);
  }
  return polys;
}

/** Sets a ring's bounding box (once). */
function ringBox(v: DataView<ArrayBufferLike>, p: Parsed, r: Ring): void {
  if (r.minX <= r.maxX) return;
  const xy = p.xyAt + 16 * r.start;
  for (let k = 0; k < r.n; k++) {
    const x = v.getFloat64(xy + 16 * k, true), y = v.getFloat64(xy + 16 * k + 8, true);
    if (x < r.minX) r.minX = x;
    if (x > r.maxX) r.maxX = x;
    if (y < r.minY) r.minY = y;
    if (y > r.maxY) r.maxY = y;
  }
}

/** Whether ring `r` lies in ring `h` (boxes, then a point of `r` that is not a vertex of `h`: a hole touching its shell). */
function ringInRing(v: DataView<ArrayBufferLike>, p: Parsed, r: Ring, h: Ring): boolean {
  if (r.n === 0 || h.n === 0 || h.minX > r.minX || h.maxX < r.maxX || h.minY > r.minY || h.maxY < r.maxY) return false;
  const xy = p.xyAt + 16 * r.start, hxy = p.xyAt + 16 * h.start;
  const isVertexOfH = (x: number, y: number) => {
    for (let k = 0; k < h.n; k++) if (v.getFloat64(hxy + 16 * k, true) === x && v.getFloat64(hxy + 16 * k + 8, true) === y) return true;
    return false;
  };
  for (let k = 0; k < r.n; k++) {
    const x = v.getFloat64(xy + 16 * k, true), y = v.getFloat64(xy + 16 * k + 8, true);
    if (!isVertexOfH(x, y)) return pointInRing(v, hxy, h.n, x, y);
  }
  return false;
}

/**
 * Rings nested by containment, whatever their orientation (GDAL's organizePolygons
 * METHOD=DEFAULT): a ring inside an even number of rings is an outer ring, one inside an odd
 * number is a hole of the smallest ring containing it. Polygons in the file order of their
 * outer rings.
 */
function byContainment(v: DataView<ArrayBufferLike>, p: Parsed, rings: Ring[]): number[][] {
  for (const r of rings) ringBox(v, p, r);
  const bySize = rings.map((_, i) => i).sort((a, b) => Math.abs(rings[b].area) - Math.abs(rings[a].area) || a - b);
  const depth = new Array<number>(rings.length).fill(0);
  const parent = new Array<number>(rings.length).fill(-1);
  for (let k = 0; k < bySize.length; k++) {
    const i = bySize[k];
    // the smallest larger ring that contains it: walk back from the rings just larger
    for (let j = k - 1; j >= 0; j--) {
      const o = bySize[j];
      if (Math.abs(rings[o].area) > Math.abs(rings[i].area) && ringInRing(v, p, rings[i], rings[o])) {
        parent[i] = o;
        depth[i] = depth[o] + 1;
        break;
      }
    }
  }
  const polys: number[][] = [];
  const at = new Map<number, number[]>();
  for (let i = 0; i < rings.length; i++) {
    if (depth[i] % 2 === 0) {
      const poly = [i];
      at.set(i, poly);
      polys.push(poly);
    }
  }
  for (let i = 0; i < rings.length; i++) if (depth[i] % 2 === 1) at.get(parent[i])!.push(i);
  return polys;
}

/** Writes a WKB geometry header (byte order + ISO type code). */
function header(out: Buffer, o: number, type: number, p: Parsed): number {
  out[o] = 1;
  out.writeUInt32LE(type + (p.z ? 1000 : 0) + (p.m ? 2000 : 0), o + 1);
  return o + 5;
}

/** Copies points [start, start + n) of the record as WKB coordinates. */
function points(buf: Buffer, p: Parsed, start: number, n: number, out: Buffer, o: number): number {
  if (!p.z && !p.m) {
    buf.copy(out, o, p.xyAt + 16 * start, p.xyAt + 16 * (start + n));
    return o + 16 * n;
  }
  for (let i = start; i < start + n; i++) {
    buf.copy(out, o, p.xyAt + 16 * i, p.xyAt + 16 * i + 16);
    o += 16;
    if (p.z) {
      buf.copy(out, o, p.zAt + 8 * i, p.zAt + 8 * i + 8);
      o += 8;
    }
    if (p.m) {
      if (p.mAt >= 0) buf.copy(out, o, p.mAt + 8 * i, p.mAt + 8 * i + 8);
      else out.writeDoubleLE(0, o);
      o += 8;
    }
  }
  return o;
}

/** A shapefile record prepared for writing: its WKB size, then `write` (no closure per record). */
export class ShapeWkb {
  readonly size: number;
  private readonly dim: number;

  constructor(
    private readonly buf: Buffer,
    private readonly p: Parsed,
    private readonly rings: Ring[],
    /** Polygons as ring indexes (polygon records only). */
    private readonly polys: number[][] | null,
    /** Polygon rings that were not closed in the file (closed in the WKB). */
    readonly ringsClosed = 0,
  ) {
    this.dim = 16 + (p.z ? 8 : 0) + (p.m ? 8 : 0);
    const dim = this.dim;
    if (p.base === T_POINT) this.size = 5 + dim;
    else if (p.base === T_MULTIPOINT) this.size = 9 + p.nPoints * (5 + dim);
    else if (p.base === T_ARC) this.size = rings.length === 1 ? 9 + rings[0].n * dim : 9 + rings.reduce((s, r) => s + 9 + r.n * dim, 0);
    else this.size = polys!.length === 1 ? this.polySize(polys![0]) : 9 + polys!.reduce((s, poly) => s + this.polySize(poly), 0);
  }

  private polySize(poly: number[]): number {
    let s = 9;
    for (const i of poly) s += 4 + (this.rings[i].n + (this.rings[i].open ? 1 : 0)) * this.dim;
    return s;
  }

  /** Writes the WKB at `o` in `out`; returns the end offset. Call before the record's buffer changes. */
  write(out: Buffer, o: number): number {
    const { buf, p, rings, polys } = this;
    if (p.base === T_POINT) return points(buf, p, 0, 1, out, header(out, o, WKB_POINT, p));
    if (p.base === T_MULTIPOINT) {
      o = header(out, o, WKB_MULTIPOINT, p);
      out.writeUInt32LE(p.nPoints, o);
      o += 4;
      for (let i = 0; i < p.nPoints; i++) o = points(buf, p, i, 1, out, header(out, o, WKB_POINT, p));
      return o;
    }
    if (p.base === T_ARC) {
      if (rings.length === 1) return this.line(out, o, rings[0]);
      o = header(out, o, WKB_MULTILINESTRING, p);
      out.writeUInt32LE(rings.length, o);
      o += 4;
      for (const r of rings) o = this.line(out, o, r);
      return o;
    }
    if (polys!.length === 1) return this.polygon(out, o, polys![0]);
    o = header(out, o, WKB_MULTIPOLYGON, p);
    out.writeUInt32LE(polys!.length, o);
    o += 4;
    for (const poly of polys!) o = this.polygon(out, o, poly);
    return o;
  }

  private line(out: Buffer, o: number, r: Ring): number {
    o = header(out, o, WKB_LINESTRING, this.p);
    out.writeUInt32LE(r.n, o);
    return points(this.buf, this.p, r.start, r.n, out, o + 4);
  }

  private polygon(out: Buffer, o: number, poly: number[]): number {
    o = header(out, o, WKB_POLYGON, this.p);
    out.writeUInt32LE(poly.length, o);
    o += 4;
    for (const i of poly) {
      const r = this.rings[i];
      out.writeUInt32LE(r.n + (r.open ? 1 : 0), o);
      o = points(this.buf, this.p, r.start, r.n, out, o + 4);
      if (r.open) o = points(this.buf, this.p, r.start, 1, out, o);
    }
    return o;
  }
}

/**
 * The WKB of the record content `buf[at, at + len)` (after the 8-byte record header),
 * or null for a null/empty shape.
 */
export function shapeWkb(buf: Buffer, at: number, len: number, file: string): ShapeWkb | null {
  const p = parse(buf, at, len, file);
  if (!p) return null;
  if (p.base === T_POINT) return new ShapeWkb(buf, p, [], null);
  if (p.nPoints === 0) return null;
  if (p.base === T_MULTIPOINT) return new ShapeWkb(buf, p, [], null);
  if (p.nParts === 0) return null;
  const rings = ringsOf(buf, p);
  if (p.base !== T_POLYGON) return new ShapeWkb(buf, p, rings, null);
  return new ShapeWkb(buf, p, rings, organise(buf, p, rings), markOpenRings(buf, p, rings));
}
