// The nearest road piece of a property, and its distance as the SQL it replaces defined it:
// the minimum over every piece of ST_Distance(property::geography, piece::geography), ties
// to the smallest feature code. PostGIS computes each of those calls from scratch (about
// 90 µs for a 50-vertex property); here the pieces sit in a grid in memory, every property
// is streamed past them once, and only the pieces and edge pairs whose lower bound does
// not exceed the best distance so far get the exact computation of geodetic.ts.
//
// Lower bounds (why no piece left out can be nearer):
//  - between pieces (metres): a geodesic of length g from the property stays within
//    g / 110 574 degrees of latitude of its box (the meridional radius is smallest at the
//    equator); over that band kx, ky bound the metres per degree of longitude and latitude
//    from below, so a piece whose box lies dx degrees of longitude and dy of latitude away is
//    at least hypot(kx·dx, ky·dy) away. The boxes hold the great-circle edges: an edge
//    bulges poleward of its end points by under L²/8·(|tan φ| + 1) radians for an edge of L;
//  - between edges (the sphere PostGIS picks the pair on): the straight 3-D segment between
//    an edge's end points (unit vectors) lies within the sagitta 1 − cos(L/2) of its arc, and
//    an arc of angle θ is longer than its chord, so the distance of the two chords less both
//    sagittas bounds the angle between any two points of the arcs from below;
//  - from that angle to metres: the spheroid's line element is at least 6 335 439 m (its
//    smallest radius of curvature) times the unit sphere's in the same latitude and
//    longitude, so a spheroid distance is at least 6 335 439 times the sphere angle.
import { deg2rad, edgeDistanceToEdge, edgeDistanceToPoint, edgesIntersect, geog2cart, makeEdge, roundDistance, sphereDistance, spheroidDistance, type Edge, type GeoPoint } from './geodetic.ts';

const A = 6378137;
const E2 = 0.00669437999014;
const RAD = Math.PI / 180;
/** metres per degree of latitude at the equator, the smallest there is */
const MERIDIONAL_MIN = 110574;
const CELL = 0.05;
/** the smallest radius of curvature of WGS 84 (meridional, at the equator), metres */
const MERIDIONAL_RADIUS_MIN = 6335439;

/** metres per degree of longitude at latitude `far` (the largest |φ| of a band): a lower bound over it */
const kxMin = (far: number) => (A * Math.cos(far * RAD)) / Math.sqrt(1 - E2 * Math.sin(far * RAD) ** 2) * RAD;
/** metres per degree of latitude at latitude `near` (the smallest |φ| of a band): a lower bound over it */
const kyMin = (near: number) => ((A * (1 - E2)) / (1 - E2 * Math.sin(near * RAD) ** 2) ** 1.5) * RAD;

/** How far (degrees) a great-circle edge between two points can bulge past their latitudes. */
function edgeBulge(lon1: number, lat1: number, lon2: number, lat2: number): number {
  const l = Math.hypot(lon2 - lon1, lat2 - lat1) * RAD;
  const far = Math.max(Math.abs(lat1), Math.abs(lat2)) * RAD;
  return ((l * l) / 8) * (Math.abs(Math.tan(far)) + 1) / RAD + 1e-12;
}

/** The road pieces of one layer snapshot, in memory. */
export class RoadPieces {
  readonly count: number;
  /** vertex offsets into lon/lat, count + 1 of them */
  private readonly start: Int32Array;
  private readonly lon: Float64Array;
  private readonly lat: Float64Array;
  /** per piece: min lon, max lon, min lat, max lat (widened by the edges' bulge) */
  private readonly box: Float64Array;
  private readonly grid = new Map<number, number[]>();
  /** the piece's position in the codes' order (the database's collation), for ties */
  readonly rank: Int32Array;
  readonly fid: string[];
  /** per piece, the last property (stamp) that looked at it */
  private readonly seen: Int32Array;
  private stamp = 0;

  constructor(pieces: { fid: string; rank: number; coords: Float64Array }[]) {
    this.count = pieces.length;
    this.start = new Int32Array(this.count + 1);
    let n = 0;
    pieces.forEach((p, i) => {
      this.start[i] = n;
      n += p.coords.length / 2;
    });
    this.start[this.count] = n;
    this.lon = new Float64Array(n);
    this.lat = new Float64Array(n);
    this.box = new Float64Array(this.count * 4);
    this.rank = new Int32Array(this.count);
    this.fid = new Array(this.count);
    this.seen = new Int32Array(this.count);
    pieces.forEach((p, i) => {
      this.rank[i] = p.rank;
      this.fid[i] = p.fid;
      const s = this.start[i];
      let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
      for (let k = 0; k < p.coords.length / 2; k++) {
        const x = p.coords[2 * k], y = p.coords[2 * k + 1];
        this.lon[s + k] = x;
        this.lat[s + k] = y;
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
        if (k > 0) {
          const b = edgeBulge(p.coords[2 * k - 2], p.coords[2 * k - 1], x, y);
          y0 = Math.min(y0, Math.min(y, p.coords[2 * k - 1]) - b);
          y1 = Math.max(y1, Math.max(y, p.coords[2 * k - 1]) + b);
        }
      }
      this.box.set([x0, x1, y0, y1], i * 4);
      for (let cx = cell(x0); cx <= cell(x1); cx++)
        for (let cy = cell(y0); cy <= cell(y1); cy++) {
          const key = cellKey(cx, cy);
          const list = this.grid.get(key);
          if (list) list.push(i);
          else this.grid.set(key, [i]);
        }
    });
  }

  /** The nearest piece of `poly` and its distance in metres; null without pieces or an empty polygon. */
  nearest(poly: Polygon): { piece: number; metres: number } | null {
    if (this.count === 0 || poly.edgeCount === 0) return null;
    const stamp = ++this.stamp;
    const [px0, px1, py0, py1] = poly.box;
    const cosY = Math.cos(Math.max(Math.abs(py0), Math.abs(py1)) * RAD);
    let best = Infinity;
    let bestPiece = -1;
    let r = CELL;
    let searched: [number, number, number, number] | null = null;
    for (;;) {
      // this round's new pieces, and the one nearest by box (measured first: it sets the cut)
      let count = 0;
      let nearestAt = -1;
      const cx0 = cell(px0 - r), cx1 = cell(px1 + r), cy0 = cell(py0 - r), cy1 = cell(py1 + r);
      for (let cx = cx0; cx <= cx1; cx++)
        for (let cy = cy0; cy <= cy1; cy++) {
          if (searched && cx >= searched[0] && cx <= searched[1] && cy >= searched[2] && cy <= searched[3]) continue;
          const list = this.grid.get(cellKey(cx, cy));
          if (!list) continue;
          for (const p of list) {
            if (this.seen[p] === stamp) continue;
            this.seen[p] = stamp;
            const gx = this.gapX(p, poly.box) * cosY, gy = this.gapY(p, poly.box);
            const key = gx * gx + gy * gy;
            if (count === candPieces.length) growCandidates();
            candPieces[count] = p;
            candKeys[count] = key;
            if (nearestAt < 0 || key < candKeys[nearestAt]) nearestAt = count;
            count++;
          }
        }
      searched = [cx0, cx1, cy0, cy1];
      let k = boundsOver(py0, py1, best);
      let cut2 = (best * (1 + 1e-9)) ** 2;
      for (let c = -1; c < count; c++) {
        if (c === nearestAt) continue;
        const p = candPieces[c < 0 ? nearestAt : c];
        if (best < Infinity) {
          const gx = k.kx * this.gapX(p, poly.box), gy = k.ky * this.gapY(p, poly.box);
          if (gx * gx + gy * gy > cut2) continue;
        }
        const d = this.pieceDistance(p, poly, best);
        if (d < best || (d === best && this.rank[p] < this.rank[bestPiece])) {
          if (d < best) k = boundsOver(py0, py1, d);
          best = d;
          cut2 = (best * (1 + 1e-9)) ** 2;
          bestPiece = p;
        }
      }
      if (best < Infinity) {
        // a piece not yet seen lies more than r degrees away in longitude or latitude
        const reach = r * Math.min(k.kx, k.ky);
        if (reach >= best) return { piece: bestPiece, metres: best };
        r = (best / Math.min(k.kx, k.ky)) * (1 + 1e-9) + 1e-9;
      } else {
        if (r > 360) return null;
        r *= 2;
      }
    }
  }

  /** degrees of longitude between the boxes of piece p and b (0 where they overlap) */
  private gapX(p: number, b: readonly number[]): number {
    const g = Math.max(this.box[p * 4] - b[1], b[0] - this.box[p * 4 + 1]);
    return g > 0 ? g : 0;
  }

  /** degrees of latitude between the boxes of piece p and b (0 where they overlap) */
  private gapY(p: number, b: readonly number[]): number {
    const g = Math.max(this.box[p * 4 + 2] - b[3], b[2] - this.box[p * 4 + 3]);
    return g > 0 ? g : 0;
  }

  /**
   * ST_Distance(poly::geography, piece::geography) in metres, rounded as PostGIS rounds it;
   * Infinity when it provably exceeds `cutoff` (a nearer piece is already known).
   */
  pieceDistance(p: number, poly: Polygon, cutoff = Infinity): number {
    const s = this.start[p], e = this.start[p + 1];
    // a piece starting inside the property: PostGIS's point-in-polygon short cut
    if (poly.contains(this.lon[s], this.lat[s])) return 0;
    const road: RoadEdge[] = [];
    for (let v = s; v + 1 < e; v++) {
      const x0 = this.lon[v], y0 = this.lat[v], x1 = this.lon[v + 1], y1 = this.lat[v + 1];
      // a zero-length edge gets no node in PostGIS's tree
      if (Math.abs(x1 - x0) < 1e-9 && Math.abs(y1 - y0) < 1e-9 && sphereDistance(point(x0, y0), point(x1, y1)) <= 5e-14) continue;
      road.push(chord(x0, y0, x1, y1));
    }
    // only zero-length edges: PostGIS makes the piece a point
    if (road.length === 0) return poly.distanceToPoint(point(this.lon[s], this.lat[s]));
    return poly.distanceToEdges(road, cutoff);
  }
}

/** kx, ky over the latitudes a geodesic of length `g` metres from [y0, y1] can reach. */
function boundsOver(y0: number, y1: number, g: number): { kx: number; ky: number } {
  const reach = Number.isFinite(g) ? (g / MERIDIONAL_MIN) * (1 + 1e-9) : 90;
  const lo = Math.max(-90, y0 - reach), hi = Math.min(90, y1 + reach);
  const far = Math.max(Math.abs(lo), Math.abs(hi));
  const near = lo <= 0 && hi >= 0 ? 0 : Math.min(Math.abs(lo), Math.abs(hi));
  return { kx: Math.max(0, kxMin(far)), ky: kyMin(near) };
}

const cell = (deg: number) => Math.floor(deg / CELL);
const cellKey = (cx: number, cy: number) => (cx + 10000) * 20000 + (cy + 10000);

const point = (lonDeg: number, latDeg: number): GeoPoint => ({ lon: deg2rad(lonDeg), lat: deg2rad(latDeg) });

/**
 * An edge as its chord between unit vectors (for the bounds), with the sagitta of its arc
 * and a ball holding the arc; its geodetic form (for the exact distance) is made on demand.
 */
interface Chord {
  lon0: number;
  lat0: number;
  lon1: number;
  lat1: number;
  ax: number;
  ay: number;
  az: number;
  bx: number;
  by: number;
  bz: number;
  /** how far the arc lies outside its chord */
  sag: number;
  /** the ball: the chord's middle, and half its length plus the sagitta */
  mx: number;
  my: number;
  mz: number;
  r: number;
  edge?: Edge;
}
type RoadEdge = Chord;

function chord(lon0: number, lat0: number, lon1: number, lat1: number): Chord {
  const c0 = Math.cos(lat0 * RAD), c1 = Math.cos(lat1 * RAD);
  const ax = c0 * Math.cos(lon0 * RAD), ay = c0 * Math.sin(lon0 * RAD), az = Math.sin(lat0 * RAD);
  const bx = c1 * Math.cos(lon1 * RAD), by = c1 * Math.sin(lon1 * RAD), bz = Math.sin(lat1 * RAD);
  const len = Math.hypot(bx - ax, by - ay, bz - az);
  // 1 − cos(L/2) = 1 − sqrt(1 − len²/4), written so short chords lose no digits; with room for rounding
  const sag = (len * len) / 4 / (1 + Math.sqrt(Math.max(0, 1 - (len * len) / 4))) * (1 + 1e-6) + 1e-15;
  return { lon0, lat0, lon1, lat1, ax, ay, az, bx, by, bz, sag, mx: (ax + bx) / 2, my: (ay + by) / 2, mz: (az + bz) / 2, r: len / 2 + sag };
}

function geodeticEdge(c: Chord): Edge {
  return (c.edge ??= makeEdge(point(c.lon0, c.lat0), point(c.lon1, c.lat1)));
}

/** Distance between the 3-D segments pq and rs (Ericson, Real-Time Collision Detection, 5.1.9). */
function segmentDistance(p: Chord, q: Chord): number {
  const d1x = p.bx - p.ax, d1y = p.by - p.ay, d1z = p.bz - p.az;
  const d2x = q.bx - q.ax, d2y = q.by - q.ay, d2z = q.bz - q.az;
  const rx = p.ax - q.ax, ry = p.ay - q.ay, rz = p.az - q.az;
  const a = d1x * d1x + d1y * d1y + d1z * d1z;
  const e = d2x * d2x + d2y * d2y + d2z * d2z;
  const f = d2x * rx + d2y * ry + d2z * rz;
  let s: number, t: number;
  if (a <= 1e-30 && e <= 1e-30) {
    s = 0;
    t = 0;
  } else if (a <= 1e-30) {
    s = 0;
    t = clamp01(f / e);
  } else {
    const c = d1x * rx + d1y * ry + d1z * rz;
    if (e <= 1e-30) {
      t = 0;
      s = clamp01(-c / a);
    } else {
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
    }
  }
  const x = p.ax + d1x * s - (q.ax + d2x * t);
  const y = p.ay + d1y * s - (q.ay + d2y * t);
  const z = p.az + d1z * s - (q.az + d2z * t);
  return Math.sqrt(x * x + y * y + z * z);
}

const clamp01 = (v: number) => (v < 0 ? 0 : v > 1 ? 1 : v);

/** A lower bound of the sphere angle between any point of arc p and any point of arc q, from the balls. */
function ballBound(p: Chord, q: Chord): number {
  const x = p.mx - q.mx, y = p.my - q.my, z = p.mz - q.mz;
  return Math.sqrt(x * x + y * y + z * z) - p.r - q.r;
}

/** The same from the chords: tighter, dearer. */
const chordBound = (p: Chord, q: Chord) => segmentDistance(p, q) - p.sag - q.sag;

/** A property's (multi)polygon in degrees, its edges as chords, and its box. */
export class Polygon {
  /** min lon, max lon, min lat, max lat, widened by the edges' bulge */
  readonly box: [number, number, number, number];
  readonly vertexCount: number;
  readonly edgeCount: number;
  private readonly lon: Float64Array;
  private readonly lat: Float64Array;
  /** ring offsets into lon/lat */
  private readonly rings: Int32Array;
  private readonly chords: Chord[];

  /** `rings`: each ring closed (first vertex repeated last), as lon/lat pairs in degrees. */
  constructor(rings: Float64Array[]) {
    const n = rings.reduce((t, r) => t + r.length / 2, 0);
    this.vertexCount = n;
    this.lon = new Float64Array(n);
    this.lat = new Float64Array(n);
    this.rings = new Int32Array(rings.length + 1);
    this.chords = [];
    let v = 0;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    rings.forEach((r, i) => {
      this.rings[i] = v;
      for (let k = 0; k < r.length / 2; k++, v++) {
        const x = r[2 * k], y = r[2 * k + 1];
        this.lon[v] = x;
        this.lat[v] = y;
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
        if (k === 0) continue;
        const px = r[2 * k - 2], py = r[2 * k - 1];
        // a zero-length edge gets no node in PostGIS's tree
        if (Math.abs(x - px) < 1e-9 && Math.abs(y - py) < 1e-9 && sphereDistance(point(px, py), point(x, y)) <= 5e-14) continue;
        const b = edgeBulge(px, py, x, y);
        y0 = Math.min(y0, Math.min(y, py) - b);
        y1 = Math.max(y1, Math.max(y, py) + b);
        this.chords.push(chord(px, py, x, y));
      }
    });
    this.rings[rings.length] = v;
    this.edgeCount = this.chords.length;
    this.box = [x0, x1, y0, y1];
  }

  /** Even-odd over every ring: inside a polygon and outside its holes. */
  contains(x: number, y: number): boolean {
    if (x < this.box[0] || x > this.box[1] || y < this.box[2] || y > this.box[3]) return false;
    let inside = false;
    for (let r = 0; r + 1 < this.rings.length; r++) {
      for (let i = this.rings[r], j = this.rings[r + 1] - 1; i < this.rings[r + 1]; j = i++) {
        const yi = this.lat[i], yj = this.lat[j];
        if (yi > y !== yj > y && x < ((this.lon[j] - this.lon[i]) * (y - yi)) / (yj - yi) + this.lon[i]) inside = !inside;
      }
    }
    return inside;
  }

  /**
   * The sphere-nearest pair between this polygon's edges and `road`'s, then their spheroid
   * distance (circ_tree_distance_tree); Infinity when that provably exceeds `cutoff` metres.
   * Only pairs whose lower bound does not exceed the best pair so far are measured exactly.
   */
  distanceToEdges(road: RoadEdge[], cutoff: number): number {
    const m = this.edgeCount;
    const n = m * road.length;
    const lbs = scratch(n);
    // the balls first (cheap); the chords where the balls cannot rule a pair out
    const limit = Number.isFinite(cutoff) ? (cutoff * (1 + 1e-9)) / MERIDIONAL_RADIUS_MIN : Infinity;
    let first = -1;
    for (let j = 0; j < road.length; j++) {
      const r = road[j];
      for (let i = 0; i < m; i++) {
        const k = j * m + i;
        let lb = ballBound(this.chords[i], r);
        if (lb <= limit) lb = chordBound(this.chords[i], r);
        lbs[k] = lb;
        if (first < 0 || lb < lbs[first]) first = k;
      }
    }
    if (lbs[first] > limit) return Infinity;
    let best = this.pair(first % m, road[(first / m) | 0]);
    if (best.d === 0) return 0;
    for (let k = 0; k < n; k++) {
      if (k === first || lbs[k] > best.d) continue;
      const i = k % m, r = road[(k / m) | 0];
      // a ball bound that let the pair through the cut-off may still lose to the chord's
      if (chordBound(this.chords[i], r) > best.d) continue;
      const p = this.pair(i, r);
      if (p.d < best.d) {
        best = p;
        if (p.d === 0) return 0;
      }
    }
    return roundDistance(spheroidDistance(best.c1, best.c2));
  }

  /** Nearest distance to a point (a piece whose edges all have zero length). */
  distanceToPoint(pt: GeoPoint): number {
    const cart = geog2cart(pt);
    let best = { d: Infinity, c: pt };
    for (const c of this.chords) {
      const r = edgeDistanceToPoint(geodeticEdge(c), pt, cart);
      if (r.d < best.d) best = { d: r.d, c: r.closest };
    }
    if (best.d === 0) return 0;
    return roundDistance(spheroidDistance(best.c, pt));
  }

  private pair(i: number, r: RoadEdge): { d: number; c1: GeoPoint; c2: GeoPoint } {
    const e = geodeticEdge(this.chords[i]);
    const road = geodeticEdge(r);
    if (edgesIntersect(e.vs, e.ve, road.vs, road.ve)) return { d: 0, c1: e.start, c2: e.start };
    return edgeDistanceToEdge(e, road);
  }
}

// scratch space, reused from property to property (one thread)
let candPieces = new Int32Array(1024);
let candKeys = new Float64Array(1024);
function growCandidates(): void {
  const p = new Int32Array(candPieces.length * 2), k = new Float64Array(candKeys.length * 2);
  p.set(candPieces);
  k.set(candKeys);
  candPieces = p;
  candKeys = k;
}

let lbScratch = new Float64Array(1024);
function scratch(n: number): Float64Array {
  if (lbScratch.length < n) lbScratch = new Float64Array(Math.max(n, 2 * lbScratch.length));
  return lbScratch;
}
