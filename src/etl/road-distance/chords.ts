// Edges as chords between unit vectors, for the lower bounds of nearest.ts: the straight
// 3-D segment between an edge's end points lies within the sagitta 1 − cos(L/2) of its
// great-circle arc, and an arc is longer than its chord, so (chord distance − both
// sagittas) bounds the sphere angle between any points of two arcs from below. A ball
// (the chord's middle, half its length plus the sagitta) gives a cheaper, looser bound.
// Stored in typed arrays and reused from property to property: no garbage per edge.
import { geoPoint as point, makeEdge, sphereDistance, type Edge, type Vec3 } from './geodetic.ts';

const RAD = Math.PI / 180;
/** per chord: lon0, lat0, lon1, lat1 (degrees), ax, ay, az, bx, by, bz, sag, mx, my, mz, r */
const STRIDE = 15;

/** How far an arc lies outside its chord of length `len` (unit sphere), short chords losing no digits. */
const sagitta = (len: number) => ((len * len) / 4 / (1 + Math.sqrt(Math.max(0, 1 - (len * len) / 4)))) * (1 + 1e-6) + 1e-15;

/** chords per block: a block's ball rules out its chords together */
export const BLOCK = 8;

export class Chords {
  count = 0;
  private v = new Float64Array(64 * STRIDE);
  /** chord i's edge, made on demand: valid while made[i] is this generation (clear starts a new one) */
  private edges: Edge[] = [];
  private made = new Int32Array(64);
  private generation = 1;
  /** per block of BLOCK consecutive chords: centre x, y, z and radius of a ball holding their arcs */
  private blocks = new Float64Array(32);

  clear(): void {
    this.count = 0;
    if (++this.generation === 0x7fffffff) {
      this.made.fill(0);
      this.generation = 1;
    }
  }

  get blockCount(): number {
    return Math.ceil(this.count / BLOCK);
  }

  /** Computes the blocks' balls (after the last addPath). */
  closeBlocks(): void {
    const nb = this.blockCount;
    if (this.blocks.length < nb * 4) this.blocks = new Float64Array(nb * 8);
    const v = this.v;
    for (let b = 0; b < nb; b++) {
      const from = b * BLOCK, to = Math.min(this.count, from + BLOCK);
      let cx = 0, cy = 0, cz = 0;
      for (let i = from; i < to; i++) {
        cx += v[i * STRIDE + 11];
        cy += v[i * STRIDE + 12];
        cz += v[i * STRIDE + 13];
      }
      cx /= to - from; cy /= to - from; cz /= to - from;
      let r = 0;
      for (let i = from; i < to; i++) {
        const o = i * STRIDE;
        const x = v[o + 11] - cx, y = v[o + 12] - cy, z = v[o + 13] - cz;
        r = Math.max(r, Math.sqrt(x * x + y * y + z * z) + v[o + 14]);
      }
      this.blocks[4 * b] = cx;
      this.blocks[4 * b + 1] = cy;
      this.blocks[4 * b + 2] = cz;
      this.blocks[4 * b + 3] = r * (1 + 1e-9) + 1e-15;
    }
  }

  /** Lower bound of the sphere angle between any arc of block b and arc j of `other`. */
  blockBound(b: number, other: Chords, j: number): number {
    const a = this.blocks, q = j * STRIDE, w = other.v;
    const x = a[4 * b] - w[q + 11], y = a[4 * b + 1] - w[q + 12], z = a[4 * b + 2] - w[q + 13];
    return Math.sqrt(x * x + y * y + z * z) - a[4 * b + 3] - w[q + 14];
  }

  /** Lower bound of the sphere angle between any arc of block b and the ball at `ball[at..at+4)` (centre, radius). */
  blockBoundTo(b: number, ball: ArrayLike<number>, at: number): number {
    const a = this.blocks;
    const x = a[4 * b] - ball[at], y = a[4 * b + 1] - ball[at + 1], z = a[4 * b + 2] - ball[at + 2];
    return Math.sqrt(x * x + y * y + z * z) - a[4 * b + 3] - ball[at + 3];
  }

  /** Lower bound of the sphere angle between arc i and the ball at `ball[at..at+4)` (centre, radius). */
  ballBoundTo(i: number, ball: ArrayLike<number>, at: number): number {
    const v = this.v, o = i * STRIDE;
    const x = v[o + 11] - ball[at], y = v[o + 12] - ball[at + 1], z = v[o + 13] - ball[at + 2];
    return Math.sqrt(x * x + y * y + z * z) - v[o + 14] - ball[at + 3];
  }

  /**
   * Adds the edges between consecutive points coords[from..to) (lon/lat pairs, degrees),
   * leaving out those of zero length (PostGIS's tree gives them no node).
   */
  addPath(coords: Float64Array, from: number, to: number): void {
    let px = 0, py = 0, pz = 0, plon = 0, plat = 0;
    for (let k = from; k < to; k++) {
      const lon = coords[2 * k], lat = coords[2 * k + 1];
      const c = Math.cos(lat * RAD);
      const x = c * Math.cos(lon * RAD), y = c * Math.sin(lon * RAD), z = Math.sin(lat * RAD);
      if (k > from && !(Math.abs(lon - plon) < 1e-9 && Math.abs(lat - plat) < 1e-9 && sphereDistance(point(plon, plat), point(lon, lat)) <= 5e-14)) {
        if ((this.count + 1) * STRIDE > this.v.length) {
          const grown = new Float64Array(this.v.length * 2);
          grown.set(this.v);
          this.v = grown;
          const made = new Int32Array(this.made.length * 2);
          made.set(this.made);
          this.made = made;
        }
        const o = this.count * STRIDE;
        const dx = x - px, dy = y - py, dz = z - pz;
        const len = Math.sqrt(dx * dx + dy * dy + dz * dz);
        const sag = sagitta(len);
        const v = this.v;
        v[o] = plon; v[o + 1] = plat; v[o + 2] = lon; v[o + 3] = lat;
        v[o + 4] = px; v[o + 5] = py; v[o + 6] = pz; v[o + 7] = x; v[o + 8] = y; v[o + 9] = z;
        v[o + 10] = sag;
        v[o + 11] = (px + x) / 2; v[o + 12] = (py + y) / 2; v[o + 13] = (pz + z) / 2;
        v[o + 14] = len / 2 + sag;
        this.count++;
      }
      px = x; py = y; pz = z; plon = lon; plat = lat;
    }
  }

  /** A ball holding every arc: centre x, y, z and radius, into `out` (without arcs, one that rules nothing out). */
  ball(out: number[]): void {
    if (this.count === 0) {
      out[0] = out[1] = out[2] = 0;
      out[3] = Infinity;
      return;
    }
    const v = this.v;
    let cx = 0, cy = 0, cz = 0;
    for (let i = 0; i < this.count; i++) {
      cx += v[i * STRIDE + 11];
      cy += v[i * STRIDE + 12];
      cz += v[i * STRIDE + 13];
    }
    cx /= this.count; cy /= this.count; cz /= this.count;
    let r = 0;
    for (let i = 0; i < this.count; i++) {
      const o = i * STRIDE;
      const x = v[o + 11] - cx, y = v[o + 12] - cy, z = v[o + 13] - cz;
      r = Math.max(r, Math.sqrt(x * x + y * y + z * z) + v[o + 14]);
    }
    out[0] = cx; out[1] = cy; out[2] = cz; out[3] = r * (1 + 1e-9) + 1e-15;
  }

  /** Chord i's geodetic edge (geodetic.ts), made once until the next clear (a generation). */
  edge(i: number): Edge {
    if (this.made[i] === this.generation) return this.edges[i];
    const o = i * STRIDE;
    const e = makeEdge(point(this.v[o], this.v[o + 1]), point(this.v[o + 2], this.v[o + 3]));
    this.edges[i] = e;
    this.made[i] = this.generation;
    return e;
  }

  /** Lower bound of the sphere angle between arc i and arc j of `other`, from their balls. */
  ballBound(i: number, other: Chords, j: number): number {
    const a = this.v, b = other.v, o = i * STRIDE, q = j * STRIDE;
    const x = a[o + 11] - b[q + 11], y = a[o + 12] - b[q + 12], z = a[o + 13] - b[q + 13];
    return Math.sqrt(x * x + y * y + z * z) - a[o + 14] - b[q + 14];
  }

  /** The same from the chords (Ericson, Real-Time Collision Detection, 5.1.9): tighter, dearer. */
  chordBound(i: number, other: Chords, j: number): number {
    const P = this.v, Q = other.v, o = i * STRIDE, q = j * STRIDE;
    const pax = P[o + 4], pay = P[o + 5], paz = P[o + 6];
    const qax = Q[q + 4], qay = Q[q + 5], qaz = Q[q + 6];
    const d1x = P[o + 7] - pax, d1y = P[o + 8] - pay, d1z = P[o + 9] - paz;
    const d2x = Q[q + 7] - qax, d2y = Q[q + 8] - qay, d2z = Q[q + 9] - qaz;
    const rx = pax - qax, ry = pay - qay, rz = paz - qaz;
    const a = d1x * d1x + d1y * d1y + d1z * d1z;
    const e = d2x * d2x + d2y * d2y + d2z * d2z;
    const f = d2x * rx + d2y * ry + d2z * rz;
    const c = d1x * rx + d1y * ry + d1z * rz;
    let s = 0, t = 0;
    // zero-length chords are left out when added: a and e are positive
    const b = d1x * d2x + d1y * d2y + d1z * d2z;
    const denom = a * e - b * b;
    s = denom > 0 ? clamp01((b * f - c * e) / denom) : 0;
    t = (b * s + f) / e;
    if (t < 0) {
      t = 0;
      s = clamp01(-c / a);
    } else if (t > 1) {
      t = 1;
      s = clamp01((b - c) / a);
    }
    const x = pax + d1x * s - (qax + d2x * t);
    const y = pay + d1y * s - (qay + d2y * t);
    const z = paz + d1z * s - (qaz + d2z * t);
    return Math.sqrt(x * x + y * y + z * z) - P[o + 10] - Q[q + 10];
  }
}

const clamp01 = (v: number) => (v < 0 ? 0 : v > 1 ? 1 : v);

/**
 * Lower bound of the sphere angle between the point `p` (a unit vector) and edge `e`'s arc:
 * the point's distance to the chord between the edge's ends, less the sagitta.
 */
export function pointArcBound(p: Vec3, e: Edge): number {
  const ax = e.vs.x, ay = e.vs.y, az = e.vs.z;
  const dx = e.ve.x - ax, dy = e.ve.y - ay, dz = e.ve.z - az;
  const rx = p.x - ax, ry = p.y - ay, rz = p.z - az;
  const len2 = dx * dx + dy * dy + dz * dz;
  const t = len2 > 0 ? clamp01((rx * dx + ry * dy + rz * dz) / len2) : 0;
  const x = rx - t * dx, y = ry - t * dy, z = rz - t * dz;
  return Math.sqrt(x * x + y * y + z * z) - sagitta(Math.sqrt(len2));
}
