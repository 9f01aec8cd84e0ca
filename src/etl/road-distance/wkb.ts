// The two WKB shapes the road distance reads from ST_AsBinary: a property's (multi)polygon
// and a road piece's line string. ISO WKB, either byte order; Z and M are skipped.

/** Coordinates per point and the base type of an ISO WKB type code. */
function typeOf(code: number): { base: number; dims: number } {
  const flags = Math.floor(code / 1000);
  if (flags > 3 || code & 0xe0000000) throw new Error(`WKB: unsupported type code ${code}`);
  return { base: code % 1000, dims: flags === 0 ? 2 : flags === 3 ? 4 : 3 };
}

class Cursor {
  private o = 0;
  private le = true;
  constructor(private readonly b: Buffer) {}
  header(): { base: number; dims: number } {
    if (this.o + 5 > this.b.length) throw new Error('WKB: truncated');
    this.le = this.b[this.o] === 1;
    this.o += 1;
    return typeOf(this.u32());
  }
  u32(): number {
    if (this.o + 4 > this.b.length) throw new Error('WKB: truncated');
    const v = this.le ? this.b.readUInt32LE(this.o) : this.b.readUInt32BE(this.o);
    this.o += 4;
    return v;
  }
  /** `n` points of `dims` coordinates, as lon/lat pairs (into `out` from pair `at`, or a new array). */
  points(n: number, dims: number, out: Float64Array = new Float64Array(n * 2), at = 0): Float64Array {
    if (this.o + n * dims * 8 > this.b.length) throw new Error('WKB: truncated');
    for (let i = 0; i < n; i++) {
      const o = this.o + i * dims * 8;
      out[2 * (at + i)] = this.le ? this.b.readDoubleLE(o) : this.b.readDoubleBE(o);
      out[2 * (at + i) + 1] = this.le ? this.b.readDoubleLE(o + 8) : this.b.readDoubleBE(o + 8);
    }
    this.o += n * dims * 8;
    return out;
  }
}

function polygonBody(c: Cursor, dims: number): Float64Array[] {
  const n = c.u32();
  const rings: Float64Array[] = [];
  for (let r = 0; r < n; r++) rings.push(c.points(c.u32(), dims));
  return rings;
}

/** The polygons of a Polygon or MultiPolygon, each as its rings (outer first; lon/lat pairs). */
export function polygonParts(wkb: Buffer): Float64Array[][] {
  const c = new Cursor(wkb);
  const { base, dims } = c.header();
  if (base === 3) return [polygonBody(c, dims)];
  if (base !== 6) throw new Error(`WKB: expected a polygon, got type ${base}`);
  const parts: Float64Array[][] = [];
  const n = c.u32();
  for (let p = 0; p < n; p++) {
    const h = c.header();
    if (h.base !== 3) throw new Error(`WKB: a MultiPolygon member of type ${h.base}`);
    parts.push(polygonBody(c, h.dims));
  }
  return parts;
}

/** A LineString's cursor at its points: their number and dimensions. */
function lineString(wkb: Buffer): { c: Cursor; n: number; dims: number } {
  const c = new Cursor(wkb);
  const { base, dims } = c.header();
  if (base !== 2) throw new Error(`WKB: expected a line string, got type ${base}`);
  return { c, n: c.u32(), dims };
}

/** The points of a LineString (lon/lat pairs). */
export function lineStringCoords(wkb: Buffer): Float64Array {
  const { c, n, dims } = lineString(wkb);
  return c.points(n, dims);
}

/** How many points a LineString has. */
export function lineStringLength(wkb: Buffer): number {
  return lineString(wkb).n;
}

/** Writes the points of a LineString (lon/lat pairs) into `out` from pair `at`. */
export function readLineString(wkb: Buffer, out: Float64Array, at: number): void {
  const { c, n, dims } = lineString(wkb);
  c.points(n, dims, out, at);
}
