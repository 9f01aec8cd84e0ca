// The nearest road piece of a property, and its distance as the SQL it replaces defined it:
// the minimum over every piece of ST_Distance(property::geography, piece::geography), ties
// to the smallest feature code. PostGIS computes each of those calls from scratch (about
// 90 µs for a 50-vertex property); here the pieces sit in a packed R-tree in memory
// (box-tree.ts), every property is streamed past them once, and only the pieces and edge
// pairs whose lower bound does not exceed the best distance so far (plus TOUCH_M / TOUCH_RAD,
// below) get the exact computation of geodetic.ts.
//
// Lower bounds (why no piece left out can be nearer):
//  - between pieces (metres): a geodesic of length g from the property stays within
//    g / 110 574 degrees of latitude of its box (the meridional radius is smallest at the
//    equator); over that band kx, ky bound the metres per degree of longitude and latitude
//    from below, so a piece whose box lies dx degrees of longitude and dy of latitude away is
//    at least hypot(kx·dx, ky·dy) away (the walk starts with the band of a 600 km geodesic,
//    valid for every piece that near, and walks again with the wider band when the answer
//    is farther). The boxes hold the great-circle edges: an edge bulges poleward of its end
//    points by under L²/8·(|tan φ| + 1) radians, L its length in the lon/lat plane in
//    radians (the arc's curvature there stays far below |tan φ| + 1, which covers the
//    higher-order terms for edges of any length a road or property has);
//  - between edges (the sphere PostGIS picks the pair on): the straight 3-D segment between
//    an edge's end points (unit vectors) lies within the sagitta 1 − cos(L/2) of its arc, and
//    an arc of angle θ is longer than its chord, so the distance of the two chords less both
//    sagittas bounds the angle between any two points of the arcs from below;
//  - from that angle to metres: the spheroid's line element is at least 6 335 439 m (its
//    smallest radius of curvature) times the unit sphere's in the same latitude and
//    longitude, so a spheroid distance is at least 6 335 439 times the sphere angle;
//  - with a cut-off (the best piece so far), a piece's edge pairs, blocks of polygon edges
//    (against the piece's ball) and road edges (against the polygon's ball) whose bound
//    exceeds it are left out: they cannot bring the piece within it, whichever pair is the
//    piece's nearest;
//  - inside an edge pair, PostGIS measures four point-to-edge distances; one whose bound
//    (point to chord, less the sagitta) exceeds the smallest measured by more than CONE_RAD
//    is left out. PostGIS's cone test can put a point up to ~2.8e-8 rad below its distance
//    to the arc (see CONE_RAD), so the room there is for that, not for rounding.
// Every bound is compared with TOUCH_RAD / TOUCH_M of room (PostGIS's touching rule), which
// also covers the cone test's undercut; the within-pair rule has CONE_RAD.
import { BoxTree, packBoxTree, type BoxBound, type PackedBoxTree } from './box-tree.ts';
import { BLOCK, Chords, pointArcBound } from './chords.ts';
import { sharedArray } from './shared.ts';
import { eachPolygonRing, lineStringLength, readLineString } from './wkb.ts';
import { edgeDistanceToPoint, edgesIntersect, geog2cart, PIR_B_TOUCH_RIGHT, PIR_COLINEAR, PIR_INTERSECTS, geoPoint as point, roundDistance, spheroidDistance, type Edge, type GeoPoint } from './geodetic.ts';

const A = 6378137;
const E2 = 0.00669437999014;
const RAD = Math.PI / 180;
/** metres per degree of latitude at the equator, the smallest there is */
const MERIDIONAL_MIN = 110574;
/** the smallest radius of curvature of WGS 84 (meridional, at the equator), metres */
const MERIDIONAL_RADIUS_MIN = 6335439;
/**
 * How far apart two edges PostGIS 3.3.2 calls touching can be: co-linear within FP_TOLERANCE
 * (normals within acos(1 − 5e-14) ≈ 3.17e-7 rad) with overlapping ranges gives distance 0 to
 * edges up to that angle (~2 m) apart. Every bound is compared with this much room, in
 * radians and in metres, so no piece or pair PostGIS would put at 0 is ruled out.
 */
const TOUCH_RAD = 3.2e-7;
const TOUCH_M = TOUCH_RAD * 6378137 * 1.01;
/** The nearest road is almost always nearer than this: the search's first bounds assume it, and check. */
const REACH_M = 600_000;

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

/**
 * Widens `box` (min lon, max lon, min lat, max lat) to hold the great-circle edges between
 * the points coords[from..to) (lon/lat pairs, degrees): their ends, and their bulge. The
 * bulge is computed only for the edges it could carry past the box (most edges are short and
 * far from the box's latitudes: a cheap upper bound of their bulge shows they cannot).
 */
function widenBox(box: number[], coords: Float64Array, from: number, to: number): void {
  for (let k = from; k < to; k++) {
    const x = coords[2 * k], y = coords[2 * k + 1];
    if (x < box[0]) box[0] = x;
    if (x > box[1]) box[1] = x;
    if (y < box[2]) box[2] = y;
    if (y > box[3]) box[3] = y;
  }
  // an edge of length l (degrees) bulges by at most l² · bulgeMax (degrees) + 1e-12, as
  // edgeBulge computes it (with room for its rounding)
  const far = Math.max(Math.abs(box[2]), Math.abs(box[3]));
  const bulgeMax = far < 89 ? ((RAD / 8) * (Math.tan(far * RAD) + 1)) * (1 + 1e-6) : Infinity;
  for (let k = from + 1; k < to; k++) {
    const x = coords[2 * k], y = coords[2 * k + 1], px = coords[2 * k - 2], py = coords[2 * k - 1];
    const lo = Math.min(y, py), hi = Math.max(y, py);
    const most = ((x - px) * (x - px) + (y - py) * (y - py)) * bulgeMax + 1e-12;
    if (lo - most >= box[2] && hi + most <= box[3]) continue;
    const b = edgeBulge(px, py, x, y);
    box[2] = Math.min(box[2], lo - b);
    box[3] = Math.max(box[3], hi + b);
  }
}

/** The pieces of one layer snapshot, their numbers and points in shared memory. */
export interface RoadPiecesFlat {
  /** the piece's number in its table */
  pid: Float64Array;
  fid: string[];
  /** the piece's position in the codes' order (the database's collation), for ties */
  rank: Int32Array;
  /** vertex offsets into coords (pairs), one more than the pieces */
  start: Int32Array;
  /** lon/lat pairs (degrees) of every piece, one after the other */
  coords: Float64Array;
}

/**
 * The pieces (one row a piece: pid, code, the code's rank, and its points: lon/lat pairs or
 * the line string's WKB, read straight into shared memory) as flat arrays in shared memory.
 */
export function flattenPieces(pieces: { pid: number; fid: string; rank: number; points: Float64Array | Buffer }[]): RoadPiecesFlat {
  const n = pieces.length;
  const start = sharedArray(Int32Array, n + 1);
  pieces.forEach((p, i) => (start[i + 1] = start[i] + (p.points instanceof Float64Array ? p.points.length / 2 : lineStringLength(p.points))));
  const coords = sharedArray(Float64Array, 2 * start[n]);
  pieces.forEach((p, i) => (p.points instanceof Float64Array ? coords.set(p.points, 2 * start[i]) : readLineString(p.points, coords, start[i])));
  const pid = sharedArray(Float64Array, n);
  const rank = sharedArray(Int32Array, n);
  pieces.forEach((p, i) => ((pid[i] = p.pid), (rank[i] = p.rank)));
  return { pid, fid: pieces.map((p) => p.fid), rank, start, coords };
}

/**
 * The road pieces of one layer snapshot and their search structures, every number in shared
 * memory: built once by the main thread (RoadPieces.buildIndex), wrapped by each thread without a
 * copy (new RoadPieces).
 */
export interface RoadIndex extends RoadPiecesFlat {
  /** per piece: a ball (centre x, y, z and radius) holding its arcs */
  ball: Float64Array;
  /** the pieces' boxes (min lon, max lon, min lat, max lat, widened by the edges' bulge) in a packed R-tree */
  tree: PackedBoxTree;
}

/** The road pieces of one layer snapshot, searchable by one thread. */
export class RoadPieces {
  readonly count: number;
  private readonly start: Int32Array;
  private readonly coords: Float64Array;
  private readonly ball: Float64Array;
  private readonly tree: BoxTree;
  readonly rank: Int32Array;
  readonly fid: string[];
  readonly pid: Float64Array;
  // this thread's own: the measured piece's chords, and per piece the last search (stamp)
  // that measured it
  private readonly scratch = new Chords();
  private readonly seen: Int32Array;
  private stamp = 0;

  /** The pieces' search structures, built once into shared memory: every worker thread reads the same copy. */
  static buildIndex(flat: RoadPiecesFlat): RoadIndex {
    const { start, coords } = flat;
    const n = flat.pid.length;
    const boxes = new Float64Array(4 * n);
    const balls = sharedArray(Float64Array, 4 * n);
    const box = [0, 0, 0, 0];
    const ball = [0, 0, 0, 0];
    const chords = new Chords();
    for (let i = 0; i < n; i++) {
      box[0] = box[2] = Infinity;
      box[1] = box[3] = -Infinity;
      widenBox(box, coords, start[i], start[i + 1]);
      boxes.set(box, i * 4);
      chords.clear();
      chords.addPath(coords, start[i], start[i + 1]);
      chords.ball(ball);
      balls.set(ball, i * 4);
    }
    return { ...flat, ball: balls, tree: packBoxTree(boxes) };
  }

  /** Wraps the shared structures (nothing is rebuilt); a thread's scratch space is its own. */
  constructor(index: RoadIndex) {
    ({ pid: this.pid, fid: this.fid, rank: this.rank, start: this.start, coords: this.coords, ball: this.ball } = index);
    this.count = this.pid.length;
    const n = this.count;
    if (this.fid.length !== n || this.rank.length !== n || this.start.length !== n + 1 || this.coords.length !== 2 * this.start[n] || this.ball.length !== 4 * n || index.tree.count !== n)
      throw new Error('road distance: road pieces of inconsistent sizes');
    this.tree = new BoxTree(index.tree);
    this.seen = new Int32Array(n);
  }

  // The current search, for the walk's callbacks (made once, not a closure a property): the
  // property, the best piece so far and its distance, the reach the bounds kx, ky hold for.
  private poly = Polygon.reused;
  private best = Infinity;
  private bestPiece = -1;
  private cap = REACH_M;
  private kx = 0;
  private ky = 0;
  /** a piece's box against the property's: the metres between them, squared (a lower bound) */
  private readonly bound: BoxBound = (x0, x1, y0, y1) => {
    const q = this.poly.box;
    const gx = this.kx * gap(x0, x1, q[0], q[1]), gy = this.ky * gap(y0, y1, q[2], q[3]);
    return gx * gx + gy * gy;
  };
  /** measures a piece the walk reaches; the new cut: the best answer so far (squared metres) */
  private readonly visit = (p: number): number => {
    this.measure(p);
    return (this.best * (1 + 1e-9) + TOUCH_M) ** 2;
  };

  /** The nearest piece of `poly` and its distance in metres; null without pieces or an empty polygon. */
  nearest(poly: Polygon): { piece: number; metres: number } | null {
    if (this.count === 0 || poly.edgeCount === 0) return null;
    this.poly = poly;
    // The bounds hold for the pieces a geodesic of `cap` metres can reach: the first walk
    // takes cap = REACH_M, right whenever its answer is within REACH_M (checked after).
    this.cap = REACH_M;
    this.boundsOver(this.cap);
    this.search();
    if (this.best > REACH_M) {
      // farther than that from every road: again, over the latitudes that answer can reach
      this.cap = Infinity;
      this.boundsOver(this.best);
      this.search();
    }
    return this.bestPiece < 0 ? null : { piece: this.bestPiece, metres: this.best };
  }

  /**
   * Every piece whose box is not provably farther than the best answer so far, the nearest
   * bound first: the first piece measured sets the cut.
   */
  private search(): void {
    this.stamp++;
    this.best = Infinity;
    this.bestPiece = -1;
    this.tree.walk(this.bound, this.visit);
  }

  private measure(p: number): void {
    if (this.seen[p] === this.stamp) return;
    this.seen[p] = this.stamp;
    const d = this.pieceDistance(p, this.poly, this.best);
    if (d < this.best || (d === this.best && this.rank[p] < this.rank[this.bestPiece])) {
      if (d < this.best && d < this.cap) this.boundsOver(d);
      this.best = d;
      this.bestPiece = p;
    }
  }

  /** kx, ky over the latitudes a geodesic of length `g` metres from the property's can reach. */
  private boundsOver(g: number): void {
    const y0 = this.poly.box[2], y1 = this.poly.box[3];
    const reach = Number.isFinite(g) ? (g / MERIDIONAL_MIN) * (1 + 1e-9) : 90;
    const lo = Math.max(-90, y0 - reach), hi = Math.min(90, y1 + reach);
    const far = Math.max(Math.abs(lo), Math.abs(hi));
    const near = lo <= 0 && hi >= 0 ? 0 : Math.min(Math.abs(lo), Math.abs(hi));
    this.kx = Math.max(0, kxMin(far));
    this.ky = kyMin(near);
  }

  /**
   * ST_Distance(poly::geography, piece::geography) in metres, rounded as PostGIS rounds it;
   * Infinity when it provably exceeds `cutoff` (a nearer piece is already known).
   */
  pieceDistance(p: number, poly: Polygon, cutoff = Infinity): number {
    const s = this.start[p], e = this.start[p + 1];
    // a piece starting inside the property: PostGIS's point-in-polygon short cut
    if (poly.contains(this.coords[2 * s], this.coords[2 * s + 1])) return 0;
    if (Number.isFinite(cutoff)) {
      const b = this.ball, o = 4 * p, q = poly.ball;
      const x = b[o] - q[0], y = b[o + 1] - q[1], z = b[o + 2] - q[2];
      if ((Math.sqrt(x * x + y * y + z * z) - b[o + 3] - q[3]) * MERIDIONAL_RADIUS_MIN > cutoff * (1 + 1e-9) + TOUCH_M) return Infinity;
    }
    const road = this.scratch;
    road.clear();
    road.addPath(this.coords, s, e);
    // only zero-length edges: PostGIS makes the piece a point
    if (road.count === 0) return poly.distanceToPoint(point(this.coords[2 * s], this.coords[2 * s + 1]));
    return poly.distanceToEdges(road, cutoff, this.ball, 4 * p);
  }
}

/** How far apart the intervals [a0, a1] and [b0, b1] are (0 where they overlap). */
function gap(a0: number, a1: number, b0: number, b1: number): number {
  const g = a0 - b1 > b0 - a1 ? a0 - b1 : b0 - a1;
  return g > 0 ? g : 0;
}

/** A property's (multi)polygon in degrees, its edges as chords, its box and its ball. */
export class Polygon {
  /** min lon, max lon, min lat, max lat, widened by the edges' bulge */
  readonly box: [number, number, number, number] = [0, 0, 0, 0];
  /** a ball (centre x, y, z and radius) holding every edge */
  readonly ball: [number, number, number, number] = [0, 0, 0, 0];
  private readonly chords = new Chords();
  /** per polygon of the property: where its chords end (they start where the previous one's end) */
  private partEnds: number[] = [];
  /** a one-chord stab line for the point-in-polygon test */
  private readonly stab = new Chords();

  get edgeCount(): number {
    return this.chords.count;
  }

  /** One polygon reused for every property of a stream (one thread). */
  static reused = new Polygon();

  /**
   * `parts`: the polygons, each its rings closed (first vertex repeated last), as lon/lat
   * pairs in degrees. A valid (Multi)Polygon, as the loaders keep them: a ring collapsed to
   * one point would be a point to PostGIS and is left out here.
   */
  set(parts: Float64Array[][]): this {
    this.begin();
    for (const rings of parts) {
      for (const r of rings) this.ring(r, r.length / 2);
      this.part();
    }
    return this.finish();
  }

  /** The same from the property's WKB, its rings read one at a time into a reused array. */
  setWkb(wkb: Buffer): this {
    this.begin();
    eachPolygonRing(wkb, this.ring, this.part);
    return this.finish();
  }

  private begin(): void {
    this.chords.clear();
    this.partEnds = [];
    this.box[0] = this.box[2] = Infinity;
    this.box[1] = this.box[3] = -Infinity;
  }

  private readonly ring = (coords: Float64Array, n: number): void => {
    widenBox(this.box, coords, 0, n);
    this.chords.addPath(coords, 0, n);
  };

  private readonly part = (): void => {
    this.partEnds.push(this.chords.count);
  };

  private finish(): this {
    this.chords.closeBlocks();
    this.chords.ball(this.ball);
    return this;
  }

  /**
   * Is the point inside one of the polygons (and outside its holes), on the sphere? PostGIS's
   * circ_tree_contains_point, per polygon: the crossings of a great-circle stab line to a
   * point outside with the edges, those where an edge only grazes the line from the right or
   * runs along it not counted. Our outside point is south-west of the box (PostGIS takes a
   * corner of its geocentric box): for a point not on the boundary, any outside point gives
   * the same parity, and a point on the boundary is at distance 0 either way.
   */
  contains(x: number, y: number): boolean {
    if (x < this.box[0] || x > this.box[1] || y < this.box[2] || y > this.box[3]) return false;
    const stab = this.stab;
    stab.clear();
    stab.addPath(Float64Array.of(x, y, this.box[0] - 0.05, this.box[2] - 0.05), 0, 2);
    const s = stab.edge(0);
    let from = 0;
    for (const end of this.partEnds) {
      let crossings = 0;
      for (let i = from; i < end; i++) {
        // a chord whose arc cannot reach the stab line's cannot cross it
        if (this.chords.chordBound(i, stab, 0) > 1e-12) continue;
        const e = this.chords.edge(i);
        const inter = edgesIntersect(s.vs, s.ve, e.vs, e.ve);
        if (inter & PIR_INTERSECTS && !(inter & (PIR_B_TOUCH_RIGHT | PIR_COLINEAR))) crossings++;
      }
      if (crossings % 2 === 1) return true;
      from = end;
    }
    return false;
  }

  /**
   * The sphere-nearest pair between this polygon's edges and `road`'s, then their spheroid
   * distance (circ_tree_distance_tree); Infinity when that provably exceeds `cutoff` metres.
   * Only pairs whose lower bound does not exceed the best pair so far are measured exactly.
   * `roadBall` (at `at`): the piece's ball, which puts whole blocks of this polygon's edges
   * beyond the cut-off at once.
   */
  distanceToEdges(road: Chords, cutoff: number, roadBall: Float64Array, at: number): number {
    const m = this.chords.count;
    const blocks = this.chords.blockCount;
    // bounds per (block of this polygon's edges, road edge): the cheapest, loosest
    const lbs = scratch(blocks * road.count);
    const limit = Number.isFinite(cutoff) ? (cutoff * (1 + 1e-9) + TOUCH_M) / MERIDIONAL_RADIUS_MIN : Infinity;
    // with a cut-off, blocks beyond it from the whole piece (its ball) and road edges beyond
    // it from the whole polygon are left out first (1e-12: the bounds' rounding)
    const out = blockScratch(blocks);
    for (let b = 0; b < blocks; b++) out[b] = limit < Infinity && this.chords.blockBoundTo(b, roadBall, at) > limit + 1e-12 ? 1 : 0;
    let first = -1;
    for (let j = 0; j < road.count; j++) {
      const edgeOut = limit < Infinity && road.ballBoundTo(j, this.ball, 0) > limit + 1e-12;
      for (let b = 0; b < blocks; b++) {
        const k = j * blocks + b;
        if (edgeOut || out[b]) {
          lbs[k] = Infinity;
          continue;
        }
        lbs[k] = this.chords.blockBound(b, road, j);
        if (first < 0 || lbs[k] < lbs[first]) first = k;
      }
    }
    if (first < 0) return Infinity;
    if (lbs[first] > limit) return Infinity;
    // a first pair: the tightest bound in the nearest block
    const firstJ = (first / blocks) | 0;
    let firstI = -1;
    for (let i = (first % blocks) * BLOCK, atLb = Infinity; i < Math.min(m, (first % blocks) * BLOCK + BLOCK); i++) {
      const lb = this.chords.chordBound(i, road, firstJ);
      if (lb < atLb) (firstI = i), (atLb = lb);
    }
    let best = this.pair(firstI, road, firstJ);
    if (best.d === 0) return 0;
    // then every pair whose bounds (block, ball, chord) exceed neither the best pair so far
    // (with the room PostGIS's touching rule needs) nor the cut-off: a pair beyond the
    // cut-off cannot make the piece near enough to count, whether it is the piece's nearest or not
    let cap = Math.min(best.d + TOUCH_RAD, limit);
    for (let k = 0; k < blocks * road.count; k++) {
      if (lbs[k] > cap) continue;
      const j = (k / blocks) | 0, b = k % blocks;
      for (let i = b * BLOCK; i < Math.min(m, b * BLOCK + BLOCK); i++) {
        if (i === firstI && j === firstJ) continue;
        if (this.chords.ballBound(i, road, j) > cap) continue;
        // the chords' distance L bounds the points' chord; their angle is 2·asin(chord / 2) > L
        const lb = this.chords.chordBound(i, road, j);
        if (lb > cap || 2 * Math.asin(Math.max(0, lb) / 2) > cap) continue;
        const p = this.pair(i, road, j);
        if (p.d < best.d) {
          best = p;
          if (p.d === 0) return 0;
          cap = Math.min(best.d + TOUCH_RAD, limit);
        }
      }
    }
    // the spheroid distance is at least 6 335 439 m a radian of the sphere's: no need to
    // compute it for a piece that cannot reach the cut-off
    if (best.d * MERIDIONAL_RADIUS_MIN > cutoff * (1 + 1e-9)) return Infinity;
    return roundDistance(spheroidDistance(best.c1, best.c2));
  }

  /** Nearest distance to a point (a piece whose edges all have zero length). */
  distanceToPoint(pt: GeoPoint): number {
    const cart = geog2cart(pt);
    let best = { d: Infinity, c: pt };
    for (let i = 0; i < this.chords.count; i++) {
      const r = edgeDistanceToPoint(this.chords.edge(i), pt, cart);
      if (r.d < best.d) best = { d: r.d, c: r.closest };
    }
    if (best.d === 0) return 0;
    return roundDistance(spheroidDistance(best.c, pt));
  }

  private pair(i: number, road: Chords, j: number): { d: number; c1: GeoPoint; c2: GeoPoint } {
    const e = this.chords.edge(i);
    const r = road.edge(j);
    if (edgesIntersect(e.vs, e.ve, r.vs, r.ve) !== 0) return { d: 0, c1: e.start, c2: e.start };
    return edgeDistanceToEdgeBounded(e, r);
  }
}

/**
 * How far below the true point-to-arc angle PostGIS's point-to-edge distance can come out
 * (radians). edge_point_in_cone accepts a point whose projection lies past the edge's end as
 * long as its dot product with the edge's centre is within 2e-16 of the end's: for an edge
 * of angle L that is an overshoot θ − L/2 ≤ √(L²/4 + 4e-16) − L/2 ≤ 2e-8 (largest as L → 0;
 * ~2.8e-8 with the dot products' rounding), and the distance measured to that projection
 * is less than the distance to the arc by at most the overshoot (a review found 2.26e-8).
 * The other bounds here are compared with TOUCH_RAD or TOUCH_M of room, far more than this.
 */
const CONE_RAD = 5e-8;

/**
 * edgeDistanceToEdge's answer (geodetic.ts), without the point-to-edge distances whose bound
 * shows they exceed one already measured: of its four candidates (each end of one edge to
 * the other edge) the one with the smallest bound is measured first; a candidate is left
 * out only when its bound exceeds the smallest measured by more than CONE_RAD, so that what
 * PostGIS would measure for it is larger still (the bound is of the true arc, which PostGIS's
 * cone test undercuts by up to CONE_RAD); among those measured the first in
 * edgeDistanceToEdge's order with the smallest distance wins, as there.
 */
export function edgeDistanceToEdgeBounded(e1: Edge, e2: Edge): { d: number; c1: GeoPoint; c2: GeoPoint } {
  const la = pointArcBound(e2.vs, e1), lb = pointArcBound(e2.ve, e1), lc = pointArcBound(e1.vs, e2), lf = pointArcBound(e1.ve, e2);
  const low = Math.min(la, lb, lc, lf);
  let a, b, c, f;
  let cap: number;
  if (la === low) cap = (a = edgeDistanceToPoint(e1, e2.start, e2.vs)).d;
  else if (lb === low) cap = (b = edgeDistanceToPoint(e1, e2.end, e2.ve)).d;
  else if (lc === low) cap = (c = edgeDistanceToPoint(e2, e1.start, e1.vs)).d;
  else cap = (f = edgeDistanceToPoint(e2, e1.end, e1.ve)).d;
  if (!a && la <= cap + CONE_RAD) cap = Math.min(cap, (a = edgeDistanceToPoint(e1, e2.start, e2.vs)).d);
  if (!b && lb <= cap + CONE_RAD) cap = Math.min(cap, (b = edgeDistanceToPoint(e1, e2.end, e2.ve)).d);
  if (!c && lc <= cap + CONE_RAD) cap = Math.min(cap, (c = edgeDistanceToPoint(e2, e1.start, e1.vs)).d);
  if (!f && lf <= cap + CONE_RAD) f = edgeDistanceToPoint(e2, e1.end, e1.ve);
  let d = Infinity;
  let c1 = e1.start, c2 = e2.start;
  if (a && a.d < d) (d = a.d), (c1 = a.closest), (c2 = e2.start);
  if (b && b.d < d) (d = b.d), (c1 = b.closest), (c2 = e2.end);
  if (c && c.d < d) (d = c.d), (c1 = e1.start), (c2 = c.closest);
  if (f && f.d < d) (d = f.d), (c1 = e1.end), (c2 = f.closest);
  return { d, c1, c2 };
}

// scratch space for the pair bounds, reused from property to property (one thread)
let lbScratch = new Float64Array(1024);
function scratch(n: number): Float64Array {
  if (lbScratch.length < n) lbScratch = new Float64Array(Math.max(n, 2 * lbScratch.length));
  return lbScratch;
}
let outScratch = new Uint8Array(256);
function blockScratch(n: number): Uint8Array {
  if (outScratch.length < n) outScratch = new Uint8Array(Math.max(n, 2 * outScratch.length));
  return outScratch;
}
