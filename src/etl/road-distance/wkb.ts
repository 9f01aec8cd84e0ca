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
  /** `n` points of `dims` coordinates, as lon/lat pairs. */
  points(n: number, dims: number): Float64Array {
    if (this.o + n * dims * 8 > this.b.length) throw new Error('WKB: truncated');
    const out = new Float64Array(n * 2);
    for (let i = 0; i < n; i++) {
      const at = this.o + i * dims * 8;
      out[2 * i] = this.le ? this.b.readDoubleLE(at) : this.b.readDoubleBE(at);
      out[2 * i + 1] = this.le ? this.b.readDoubleLE(at + 8) : this.b.readDoubleBE(at + 8);
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

/** The points of a LineString (lon/lat pairs). */
export function lineStringCoords(wkb: Buffer): Float64Array {
  const c = new Cursor(wkb);
  const { base, dims } = c.header();
  if (base !== 2) throw new Error(`WKB: expected a line string, got type ${base}`);
  return c.points(c.u32(), dims);
}
