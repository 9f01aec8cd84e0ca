// The nearest road piece of a property, and its distance as the SQL it replaces defined it:
// the minimum over every piece of ST_Distance(property::geography, piece::geography), ties
// to the smallest feature code. PostGIS computes each of those calls from scratch (about
// 90 µs for a 50-vertex property); here the pieces sit in a grid in memory, every property
// is streamed past them once, and only the pieces and edge pairs whose lower bound does
// not exceed the best distance so far get the exact computation of geodetic.ts.
//
// Lower bounds (why no piece outside the candidates can be nearer):
//  - a geodesic of length g from the property stays within g / 110 574 degrees of latitude
//    of its box (the meridional radius is smallest at the equator); over that band kx, ky
//    bound the metres per degree of longitude and latitude from below, so a piece whose box
//    lies dx degrees of longitude and dy of latitude away is at least hypot(kx·dx, ky·dy);
//  - the boxes hold the great-circle edges, not just their vertices: an edge bulges
//    poleward of its end points by under L²/8·(|tan φ| + 1) radians for an edge of L;
//  - on the sphere (the edge-pair search), the same with cos φ over the latitudes an arc
//    as short as the best pair can reach.
import { deg2rad, edgeDistanceToEdge, edgeDistanceToPoint, edgesIntersect, geog2cart, makeEdge, roundDistance, sphereDistance, spheroidDistance, type Edge, type GeoPoint } from './geodetic.ts';

const A = 6378137;
const E2 = 0.00669437999014;
const RAD = Math.PI / 180;
/** metres per degree of latitude at the equator, the smallest there is */
const MERIDIONAL_MIN = 110574;
const CELL = 0.05;

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
    let best = Infinity;
    let bestPiece = -1;
    let r = 0.02;
    let searched: [number, number, number, number] | null = null;
    for (;;) {
      const cands: { p: number; key: number }[] = [];
      const cx0 = cell(px0 - r), cx1 = cell(px1 + r), cy0 = cell(py0 - r), cy1 = cell(py1 + r);
      for (let cx = cx0; cx <= cx1; cx++)
        for (let cy = cy0; cy <= cy1; cy++) {
          if (searched && cx >= searched[0] && cx <= searched[1] && cy >= searched[2] && cy <= searched[3]) continue;
          const list = this.grid.get(cellKey(cx, cy));
          if (!list) continue;
          for (const p of list) {
            if (this.seen[p] === stamp) continue;
            this.seen[p] = stamp;
            const [gx, gy] = this.gap(p, poly.box);
            cands.push({ p, key: Math.hypot(gx * Math.cos(py0 * RAD), gy) });
          }
        }
      searched = [cx0, cx1, cy0, cy1];
      cands.sort((a, b) => a.key - b.key);
      let k = boundsOver(py0, py1, best);
      for (const { p } of cands) {
        if (best < Infinity) {
          const [gx, gy] = this.gap(p, poly.box);
          if (Math.hypot(k.kx * gx, k.ky * gy) > best * (1 + 1e-9)) continue;
        }
        const d = this.pieceDistance(p, poly);
        if (d < best || (d === best && this.rank[p] < this.rank[bestPiece])) {
          if (d < best) k = boundsOver(py0, py1, d);
          best = d;
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

  /** degrees of longitude and latitude between the boxes of piece p and b (0 where they overlap) */
  private gap(p: number, b: readonly number[]): [number, number] {
    const o = p * 4;
    const gx = Math.max(0, this.box[o] - b[1], b[0] - this.box[o + 1]);
    const gy = Math.max(0, this.box[o + 2] - b[3], b[2] - this.box[o + 3]);
    return [gx, gy];
  }

  /** ST_Distance(poly::geography, piece::geography) in metres, rounded as PostGIS rounds it. */
  pieceDistance(p: number, poly: Polygon): number {
    const s = this.start[p], e = this.start[p + 1];
    // a piece starting inside the property: PostGIS's point-in-polygon short cut
    if (poly.contains(this.lon[s], this.lat[s])) return 0;
    const road: { edge: Edge; box: number[] }[] = [];
    for (let v = s; v + 1 < e; v++) {
      const a: GeoPoint = { lon: deg2rad(this.lon[v]), lat: deg2rad(this.lat[v]) };
      const b: GeoPoint = { lon: deg2rad(this.lon[v + 1]), lat: deg2rad(this.lat[v + 1]) };
      if (sphereDistance(a, b) <= 5e-14) continue; // a zero-length edge gets no node in PostGIS's tree
      const bulge = edgeBulge(this.lon[v], this.lat[v], this.lon[v + 1], this.lat[v + 1]);
      road.push({
        edge: makeEdge(a, b),
        box: [Math.min(this.lon[v], this.lon[v + 1]), Math.max(this.lon[v], this.lon[v + 1]), Math.min(this.lat[v], this.lat[v + 1]) - bulge, Math.max(this.lat[v], this.lat[v + 1]) + bulge],
      });
    }
    if (road.length === 0) {
      // only zero-length edges: PostGIS makes the piece a point
      const pt: GeoPoint = { lon: deg2rad(this.lon[s]), lat: deg2rad(this.lat[s]) };
      return poly.distanceToPoint(pt);
    }
    return poly.distanceToEdges(road);
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

/** A property's (multi)polygon in degrees, its edges and their boxes. */
export class Polygon {
  /** min lon, max lon, min lat, max lat, widened by the edges' bulge */
  readonly box: [number, number, number, number];
  readonly vertexCount: number;
  readonly edgeCount: number;
  private readonly lon: Float64Array;
  private readonly lat: Float64Array;
  /** per edge: index of its first vertex (the second is the next one) */
  private readonly edgeStart: Int32Array;
  private readonly edgeBox: Float64Array;
  /** ring offsets into lon/lat */
  private readonly rings: Int32Array;
  private readonly edges: (Edge | undefined)[];

  /** `rings`: each ring closed (first vertex repeated last), as lon/lat pairs in degrees. */
  constructor(rings: Float64Array[]) {
    const n = rings.reduce((t, r) => t + r.length / 2, 0);
    this.vertexCount = n;
    this.lon = new Float64Array(n);
    this.lat = new Float64Array(n);
    this.rings = new Int32Array(rings.length + 1);
    const starts: number[] = [];
    let v = 0;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    rings.forEach((r, i) => {
      this.rings[i] = v;
      for (let k = 0; k < r.length / 2; k++, v++) {
        this.lon[v] = r[2 * k];
        this.lat[v] = r[2 * k + 1];
        x0 = Math.min(x0, r[2 * k]); x1 = Math.max(x1, r[2 * k]); y0 = Math.min(y0, r[2 * k + 1]); y1 = Math.max(y1, r[2 * k + 1]);
        if (k > 0) starts.push(v - 1);
      }
    });
    this.rings[rings.length] = v;
    const keep: number[] = [];
    const boxes: number[] = [];
    for (const s of starts) {
      const a: GeoPoint = { lon: deg2rad(this.lon[s]), lat: deg2rad(this.lat[s]) };
      const b: GeoPoint = { lon: deg2rad(this.lon[s + 1]), lat: deg2rad(this.lat[s + 1]) };
      if (Math.abs(this.lon[s] - this.lon[s + 1]) < 1e-9 && Math.abs(this.lat[s] - this.lat[s + 1]) < 1e-9 && sphereDistance(a, b) <= 5e-14) continue;
      const bulge = edgeBulge(this.lon[s], this.lat[s], this.lon[s + 1], this.lat[s + 1]);
      const lo = Math.min(this.lat[s], this.lat[s + 1]) - bulge, hi = Math.max(this.lat[s], this.lat[s + 1]) + bulge;
      y0 = Math.min(y0, lo);
      y1 = Math.max(y1, hi);
      keep.push(s);
      boxes.push(Math.min(this.lon[s], this.lon[s + 1]), Math.max(this.lon[s], this.lon[s + 1]), lo, hi);
    }
    this.edgeStart = Int32Array.from(keep);
    this.edgeBox = Float64Array.from(boxes);
    this.edgeCount = keep.length;
    this.edges = new Array(keep.length);
    this.box = [x0, x1, y0, y1];
  }

  private edge(i: number): Edge {
    let e = this.edges[i];
    if (!e) {
      const s = this.edgeStart[i];
      e = makeEdge({ lon: deg2rad(this.lon[s]), lat: deg2rad(this.lat[s]) }, { lon: deg2rad(this.lon[s + 1]), lat: deg2rad(this.lat[s + 1]) });
      this.edges[i] = e;
    }
    return e;
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
   * distance (circ_tree_distance_tree): edge pairs in order of a lower bound, exact only
   * while the bound does not exceed the best pair.
   */
  distanceToEdges(road: { edge: Edge; box: number[] }[]): number {
    const m = this.edgeCount;
    const lbs = new Float64Array(m * road.length);
    let far = Math.max(Math.abs(this.box[2]), Math.abs(this.box[3]));
    for (const r of road) far = Math.max(far, Math.abs(r.box[2]), Math.abs(r.box[3]));
    const cosFar = Math.cos(Math.min(90, far) * RAD);
    let first = 0;
    for (let j = 0; j < road.length; j++) {
      const rb = road[j].box;
      for (let i = 0; i < m; i++) {
        const o = i * 4;
        const gx = Math.max(0, this.edgeBox[o] - rb[1], rb[0] - this.edgeBox[o + 1]);
        const gy = Math.max(0, this.edgeBox[o + 2] - rb[3], rb[2] - this.edgeBox[o + 3]);
        const lb = Math.hypot(cosFar * gx, gy) * RAD;
        lbs[j * m + i] = lb;
        if (lb < lbs[first]) first = j * m + i;
      }
    }
    let best = this.pair(first % m, road[(first / m) | 0].edge);
    if (best.d === 0) return 0;
    // The bounds above took cos φ at the boxes' latitudes; an arc no longer than the best pair
    // reaches at most best.d radians further poleward. Scaling a bound by cos(far + d) / cos(far)
    // shrinks both its terms at least as much as that smaller cos φ would: a lower bound again.
    const scale = Math.cos(Math.min(90, far + best.d / RAD) * RAD) / cosFar;
    for (let k = 0; k < lbs.length; k++) {
      if (k === first) continue;
      if (lbs[k] * scale > best.d) continue;
      const c = this.pair(k % m, road[(k / m) | 0].edge);
      if (c.d < best.d) {
        best = c;
        if (c.d === 0) return 0;
      }
    }
    return roundDistance(spheroidDistance(best.c1, best.c2));
  }

  /** Nearest distance to a point (a piece whose edges all have zero length). */
  distanceToPoint(pt: GeoPoint): number {
    const cart = geog2cart(pt);
    let best = { d: Infinity, c: pt };
    for (let i = 0; i < this.edgeCount; i++) {
      const r = edgeDistanceToPoint(this.edge(i), pt, cart);
      if (r.d < best.d) best = { d: r.d, c: r.closest };
    }
    if (best.d === 0) return 0;
    return roundDistance(spheroidDistance(best.c, pt));
  }

  private pair(i: number, road: Edge): { d: number; c1: GeoPoint; c2: GeoPoint } {
    const e = this.edge(i);
    if (edgesIntersect(e.vs, e.ve, road.vs, road.ve)) return { d: 0, c1: e.start, c2: e.start };
    return edgeDistanceToEdge(e, road);
  }
}
