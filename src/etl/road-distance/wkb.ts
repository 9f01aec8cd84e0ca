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

// one ring at a time, reused (a thread measures one property at a time)
let ringScratch = new Float64Array(1024);

/**
 * The rings of a Polygon or MultiPolygon (outer first), each handed to `ring` as its `n`
 * lon/lat pairs at the start of an array that is reused for the next ring, and `part` after
 * each polygon: no array a ring, for the search that reads every property once.
 */
export function eachPolygonRing(wkb: Buffer, ring: (coords: Float64Array, n: number) => void, part: () => void): void {
  const c = new Cursor(wkb);
  const body = (dims: number) => {
    const rings = c.u32();
    for (let r = 0; r < rings; r++) {
      const n = c.u32();
      // a corrupt count is refused before anything is allocated for it
      if (n * dims * 8 > wkb.length) throw new Error('WKB: truncated');
      if (ringScratch.length < 2 * n) ringScratch = new Float64Array(Math.max(2 * n, 2 * ringScratch.length));
      ring(c.points(n, dims, ringScratch), n);
    }
    part();
  };
  const { base, dims } = c.header();
  if (base === 3) return body(dims);
  if (base !== 6) throw new Error(`WKB: expected a polygon, got type ${base}`);
  const n = c.u32();
  for (let p = 0; p < n; p++) {
    const h = c.header();
    if (h.base !== 3) throw new Error(`WKB: a MultiPolygon member of type ${h.base}`);
    body(h.dims);
  }
}

/** The polygons of a Polygon or MultiPolygon, each as its rings (outer first; lon/lat pairs). */
export function polygonParts(wkb: Buffer): Float64Array[][] {
  const parts: Float64Array[][] = [];
  let rings: Float64Array[] = [];
  eachPolygonRing(wkb, (coords, n) => rings.push(coords.slice(0, 2 * n)), () => {
    parts.push(rings);
    rings = [];
  });
  return parts;
}

/** A LineString's cursor at its points: their number and dimensions. */
function lineString(wkb: Buffer): { c: Cursor; n: number; dims: number } {
  const c = new Cursor(wkb);
  const { base, dims } = c.header();
  if (base !== 2) throw new Error(`WKB: expected a line string, got type ${base}`);
  return { c, n: c.u32(), dims };
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
