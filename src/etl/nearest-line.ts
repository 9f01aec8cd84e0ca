// The nearest line feature (a road) to a polygon (a property), by PostGIS' geography
// rules, without PostGIS' all-pairs comparison. ST_Distance(geography) takes, per pair of
// sub-geometries (a polygon ring and a line part), the closest points on the sphere
// (edge against edge: an intersection is 0, otherwise the least of the four vertex-to-arc
// distances) and returns the ellipsoidal (WGS 84) distance between those two points. Here:
//  1. a uniform grid of the roads' edges is searched outward from the property, in a
//     planar frame scaled at the property's latitude (x = lon·cos φ0, y = lat), until no
//     unvisited cell can hold an edge nearer than the best found (with a margin η that
//     bounds how far this frame strays from the sphere over that distance);
//  2. only the (property edge, road edge) pairs within the margin are measured on the
//     sphere, with PostGIS' own formulas (lwgeodetic.c: robust_cross_product,
//     edge_distance_to_point, edge_point_in_cone), giving each (ring, piece)'s closest
//     points, a piece being a run of 7 edges of a line part (PIECE_EDGES);
//  3. every (ring, piece) whose sphere distance is within 0.8 % of the least is a
//     candidate: the ellipsoid's radii of curvature differ by at most 0.7 % (N/M), so the
//     feature with the smallest ellipsoidal distance is among them. The caller measures
//     the candidates' point pairs with ST_Distance(geography) and keeps the least (ties to
//     the smallest feature id): PostGIS' figure for the whole features, to rounding.
// A road inside or crossing the property is at distance 0 (planar test, as PostGIS' own
// polygon-contains-line shortcut).

/** Paths of a WKB geometry: each a flat [lon, lat, lon, lat, …] array; polygons give their rings. */
export interface Paths {
  paths: Float64Array[];
  /** Index of the polygon each path belongs to (rings of one polygon share it). */
  polygon: Int32Array;
}

/** Parses 2D WKB (NDR or XDR) Point/LineString/Polygon and their Multi* and collections; Z/M are skipped. */
export function wkbPaths(buf: Uint8Array): Paths {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const paths: Float64Array[] = [];
  const polygon: number[] = [];
  let pos = 0;
  let polygons = 0;
  const read = (): void => {
    const le = dv.getUint8(pos) === 1;
    pos += 1;
    let type = dv.getUint32(pos, le);
    pos += 4;
    let dims = 2;
    if (type & 0x20000000) pos += 4; // EWKB SRID
    if (type & 0x80000000) dims++;
    if (type & 0x40000000) dims++;
    type &= 0x0fffffff;
    if (type >= 1000) {
      dims += type >= 3000 ? 2 : 1;
      type %= 1000;
    }
    const points = (n: number): Float64Array => {
      const out = new Float64Array(n * 2);
      for (let i = 0; i < n; i++) {
        out[2 * i] = dv.getFloat64(pos, le);
        out[2 * i + 1] = dv.getFloat64(pos + 8, le);
        pos += 8 * dims;
      }
      return out;
    };
    const count = () => {
      const n = dv.getUint32(pos, le);
      pos += 4;
      return n;
    };
    switch (type) {
      case 1:
        paths.push(points(1));
        polygon.push(-1);
        return;
      case 2:
        paths.push(points(count()));
        polygon.push(-1);
        return;
      case 3: {
        const rings = count();
        for (let r = 0; r < rings; r++) {
          paths.push(points(count()));
          polygon.push(polygons);
        }
        polygons++;
        return;
      }
      case 4:
      case 5:
      case 6:
      case 7: {
        const n = count();
        for (let k = 0; k < n; k++) read();
        return;
      }
      default:
        throw new Error(`WKB geometry type ${type} is not supported`);
    }
  };
  read();
  return { paths, polygon: Int32Array.from(polygon) };
}

const RAD = Math.PI / 180;

// ---------------------------------------------------------------------------------
// Sphere formulas, as PostGIS' lwgeodetic.c (lat/lon in radians)

type V3 = [number, number, number];

function cart(lon: number, lat: number): V3 {
  const c = Math.cos(lat);
  return [c * Math.cos(lon), c * Math.sin(lon), Math.sin(lat)];
}

function normalize(v: V3): V3 {
  const d = Math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  return d === 0 ? v : [v[0] / d, v[1] / d, v[2] / d];
}

/** robust_cross_product: the normal of the great circle through p and q, stable for short edges. */
function robustCross(plon: number, plat: number, qlon: number, qlat: number): V3 {
  const lonQpp = (qlon + plon) / -2.0;
  const lonQmp = (qlon - plon) / 2.0;
  const sMinus = Math.sin(plat - qlat);
  const sPlus = Math.sin(plat + qlat);
  const sQpp = Math.sin(lonQpp);
  const sQmp = Math.sin(lonQmp);
  const cQpp = Math.cos(lonQpp);
  const cQmp = Math.cos(lonQmp);
  return [
    sMinus * sQpp * cQmp - sPlus * cQpp * sQmp,
    sMinus * cQpp * cQmp + sPlus * sQpp * sQmp,
    Math.cos(plat) * Math.cos(qlat) * Math.sin(qlon - plon),
  ];
}

/** sphere_distance: the angle between two points. */
function sphereDistance(slon: number, slat: number, elon: number, elat: number): number {
  const dLon = elon - slon;
  const cosDLon = Math.cos(dLon);
  const cosLatE = Math.cos(elat);
  const sinLatE = Math.sin(elat);
  const cosLatS = Math.cos(slat);
  const sinLatS = Math.sin(slat);
  const a1 = (cosLatE * Math.sin(dLon)) ** 2;
  const a2 = (cosLatS * sinLatE - sinLatS * cosLatE * cosDLon) ** 2;
  return Math.atan2(Math.sqrt(a1 + a2), sinLatS * sinLatE + cosLatS * cosLatE * cosDLon);
}

/** edge_point_in_cone */
function inCone(s: V3, e: V3, p: V3): boolean {
  if (s[0] === -e[0] && s[1] === -e[1] && s[2] === -e[2]) return true;
  const c = normalize([s[0] + e[0], s[1] + e[1], s[2] + e[2]]);
  const vs = s[0] * c[0] + s[1] * c[1] + s[2] * c[2];
  const vp = p[0] * c[0] + p[1] * c[1] + p[2] * c[2];
  return vp > vs || Math.abs(vp - vs) < 2e-16;
}

/** A point: lon, lat in radians. */
type G = [number, number];

/** edge_distance_to_point: angle from p to the arc s–e, and the arc's closest point. */
function edgeToPoint(s: G, e: G, p: G): [number, G] {
  if (s[0] === e[0] && s[1] === e[1]) return [sphereDistance(s[0], s[1], p[0], p[1]), s];
  const n = normalize(robustCross(s[0], s[1], e[0], e[1]));
  const pc = cart(p[0], p[1]);
  const dot = pc[0] * n[0] + pc[1] * n[1] + pc[2] * n[2];
  const k = normalize([pc[0] - n[0] * dot, pc[1] - n[1] * dot, pc[2] - n[2] * dot]);
  const gk: G = [Math.atan2(k[1], k[0]), Math.asin(k[2])];
  let best = 1e9;
  let near: G = gk;
  // edge_contains_point: on the plane (by construction) and inside the cone
  const kc = cart(gk[0], gk[1]);
  if (Math.abs(n[0] * kc[0] + n[1] * kc[1] + n[2] * kc[2]) <= 1e-12 && inCone(cart(s[0], s[1]), cart(e[0], e[1]), kc)) {
    best = sphereDistance(p[0], p[1], gk[0], gk[1]);
  }
  const d2 = sphereDistance(p[0], p[1], s[0], s[1]);
  const d3 = sphereDistance(p[0], p[1], e[0], e[1]);
  if (d2 < best) {
    best = d2;
    near = s;
  }
  if (d3 < best) {
    best = d3;
    near = e;
  }
  return [best, near];
}

/** edge_distance_to_edge (edges that do not intersect): angle and closest points on each. */
function edgeToEdge(a1: G, a2: G, b1: G, b2: G): [number, G, G] {
  const [d1s, c1s] = edgeToPoint(a1, a2, b1);
  const [d1e, c1e] = edgeToPoint(a1, a2, b2);
  const [d2s, c2s] = edgeToPoint(b1, b2, a1);
  const [d2e, c2e] = edgeToPoint(b1, b2, a2);
  let d = d1s;
  let p: G = c1s;
  let q: G = b1;
  if (d1e < d) [d, p, q] = [d1e, c1e, b2];
  if (d2s < d) [d, p, q] = [d2s, a1, c2s];
  if (d2e < d) [d, p, q] = [d2e, a2, c2e];
  return [d, p, q];
}

// ---------------------------------------------------------------------------------
// Planar helpers (scaled frame)

function pointSegment2(px: number, py: number, ax: number, ay: number, bx: number, by: number): number {
  const dx = bx - ax;
  const dy = by - ay;
  const l2 = dx * dx + dy * dy;
  let t = l2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / l2 : 0;
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  const ex = ax + t * dx - px;
  const ey = ay + t * dy - py;
  return ex * ex + ey * ey;
}

function orient(ax: number, ay: number, bx: number, by: number, cx: number, cy: number): number {
  return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
}

/** Squared distance between two segments (0 when they cross or touch). */
function segmentSegment2(ax: number, ay: number, bx: number, by: number, cx: number, cy: number, dx: number, dy: number): number {
  const o1 = orient(ax, ay, bx, by, cx, cy);
  const o2 = orient(ax, ay, bx, by, dx, dy);
  const o3 = orient(cx, cy, dx, dy, ax, ay);
  const o4 = orient(cx, cy, dx, dy, bx, by);
  if (((o1 > 0 && o2 < 0) || (o1 < 0 && o2 > 0)) && ((o3 > 0 && o4 < 0) || (o3 < 0 && o4 > 0))) return 0;
  return Math.min(pointSegment2(ax, ay, cx, cy, dx, dy), pointSegment2(bx, by, cx, cy, dx, dy), pointSegment2(cx, cy, ax, ay, bx, by), pointSegment2(dx, dy, ax, ay, bx, by));
}

// ---------------------------------------------------------------------------------
// The roads' grid

/**
 * Edges of a piece: a line part is measured as runs of 7 edges (~1 km of SNV road), each
 * as PostGIS measures one line. PostGIS takes the ellipsoidal distance between the
 * closest points on the sphere, which over a long line can exceed the ellipsoidal minimum
 * by ~1e-4 (65 m seen on a 5–40 km SNV segment); ~1 km pieces keep it under a metre or
 * so, and give the figure the derive stage published before (pieces of 8 vertices).
 */
const PIECE_EDGES = 7;

/** Grid cell size in degrees: about 11 km, a few road edges a cell. */
const CELL = 0.1;

export interface LineIndex {
  /** Feature ids, by feature number. */
  fids: string[];
  /** Per edge: start lon, lat, end lon, lat (degrees). */
  xy: Float64Array;
  /** Per edge: its feature number and its piece number (a run of PIECE_EDGES edges of a line part). */
  feature: Int32Array;
  part: Int32Array;
  x0: number;
  y0: number;
  nx: number;
  ny: number;
  cellStart: Int32Array;
  /** Per cell entry (cell order, so a cell's edges are read in sequence): the edge and its ends on the unit sphere. */
  cellEdges: Int32Array;
  cellXyz: Float64Array;
  edges: number;
}

/** Builds the grid of the line features' edges. */
export function lineIndex(features: Iterable<{ fid: string; wkb: Uint8Array }>): LineIndex {
  const fids: string[] = [];
  const chunks: Float64Array[] = [];
  const owners: number[] = [];
  const parts: number[] = [];
  let edges = 0;
  let part = 0;
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const f of features) {
    const { paths } = wkbPaths(f.wkb);
    for (const p of paths) {
      const n = p.length / 2;
      if (n === 0) continue;
      // a one-vertex path is a zero-length edge (a point)
      const e = new Float64Array(Math.max(1, n - 1) * 4);
      for (let i = 0; i < Math.max(1, n - 1); i++) {
        const j = Math.min(i + 1, n - 1);
        e.set([p[2 * i], p[2 * i + 1], p[2 * j], p[2 * j + 1]], 4 * i);
        owners.push(fids.length);
        parts.push(part + Math.floor(i / PIECE_EDGES));
      }
      for (let i = 0; i < n; i++) {
        x0 = Math.min(x0, p[2 * i]);
        x1 = Math.max(x1, p[2 * i]);
        y0 = Math.min(y0, p[2 * i + 1]);
        y1 = Math.max(y1, p[2 * i + 1]);
      }
      chunks.push(e);
      edges += e.length / 4;
      part += Math.ceil(Math.max(1, n - 1) / PIECE_EDGES);
    }
    fids.push(f.fid);
  }
  const xy = new Float64Array(edges * 4);
  let o = 0;
  for (const c of chunks) {
    xy.set(c, o);
    o += c.length;
  }
  const xyz = new Float64Array(edges * 6);
  for (let k = 0; k < edges; k++) {
    xyz.set(cart(xy[4 * k] * RAD, xy[4 * k + 1] * RAD), 6 * k);
    xyz.set(cart(xy[4 * k + 2] * RAD, xy[4 * k + 3] * RAD), 6 * k + 3);
  }
  if (edges === 0) {
    x0 = y0 = 0;
    x1 = y1 = 0;
  }
  const nx = Math.max(1, Math.ceil((x1 - x0) / CELL) + 1);
  const ny = Math.max(1, Math.ceil((y1 - y0) / CELL) + 1);
  const cellOf = (x: number, y: number) => [Math.min(nx - 1, Math.floor((x - x0) / CELL)), Math.min(ny - 1, Math.floor((y - y0) / CELL))];
  const counts = new Int32Array(nx * ny + 1);
  const visit = (k: number, f: (cell: number) => void) => {
    const [ax, ay] = cellOf(Math.min(xy[4 * k], xy[4 * k + 2]), Math.min(xy[4 * k + 1], xy[4 * k + 3]));
    const [bx, by] = cellOf(Math.max(xy[4 * k], xy[4 * k + 2]), Math.max(xy[4 * k + 1], xy[4 * k + 3]));
    for (let cy = ay; cy <= by; cy++) for (let cx = ax; cx <= bx; cx++) f(cy * nx + cx);
  };
  for (let k = 0; k < edges; k++) visit(k, (c) => counts[c + 1]++);
  for (let c = 0; c < nx * ny; c++) counts[c + 1] += counts[c];
  const cellEdges = new Int32Array(counts[nx * ny]);
  const fill = counts.slice(0, nx * ny);
  for (let k = 0; k < edges; k++) visit(k, (c) => (cellEdges[fill[c]++] = k));
  const cellXyz = new Float64Array(cellEdges.length * 6);
  for (let j = 0; j < cellEdges.length; j++) {
    const k = cellEdges[j];
    cellXyz.set(xyz.subarray(6 * k, 6 * k + 6), 6 * j);
  }
  return { fids, xy, feature: Int32Array.from(owners), part: Int32Array.from(parts), x0, y0, nx, ny, cellStart: counts, cellEdges, cellXyz, edges };
}

/** A candidate nearest feature: closest points in degrees (on the polygon, on the line). */
export interface Candidate {
  fid: string;
  px: number;
  py: number;
  qx: number;
  qy: number;
}

/** Sphere distances within this factor of the least are candidates (N/M ≤ 1.0068 on WGS 84). */
const ELLIPSOID_SPREAD = 1.008;

export class NearestLine {
  constructor(private readonly index: LineIndex) {}

  /** Candidates for the nearest feature to a polygon (see the module comment); [] when there are no lines. */
  candidates(poly: Paths): Candidate[] {
    const ix = this.index;
    if (ix.edges === 0 || poly.paths.length === 0) return [];
    let minx = Infinity;
    let miny = Infinity;
    let maxx = -Infinity;
    let maxy = -Infinity;
    for (const p of poly.paths)
      for (let i = 0; i < p.length; i += 2) {
        if (p[i] < minx) minx = p[i];
        if (p[i] > maxx) maxx = p[i];
        if (p[i + 1] < miny) miny = p[i + 1];
        if (p[i + 1] > maxy) maxy = p[i + 1];
      }
    // The gnomonic projection centred on the property: great circles (PostGIS' edges) are
    // straight lines, and a planar distance g is within [θ, θ·sec²ρ] of the angle θ it
    // stands for, ρ the angular reach from the centre (sec²ρ − 1 ≈ 6e-5 at 50 km).
    const lam = ((minx + maxx) / 2) * RAD;
    const phi = ((miny + maxy) / 2) * RAD;
    const [c0, c1, c2] = cart(lam, phi);
    const e10 = -Math.sin(lam);
    const e11 = Math.cos(lam);
    const e20 = -Math.sin(phi) * Math.cos(lam);
    const e21 = -Math.sin(phi) * Math.sin(lam);
    const e22 = Math.cos(phi);
    const gpaths: Float64Array[] = [];
    let reach = 0; // the property's radius in the projection
    for (const p of poly.paths) {
      const g = new Float64Array(p.length);
      for (let i = 0; i < p.length; i += 2) {
        const cl = Math.cos(p[i + 1] * RAD);
        const x = cl * Math.cos(p[i] * RAD);
        const y = cl * Math.sin(p[i] * RAD);
        const z = Math.sin(p[i + 1] * RAD);
        const w = x * c0 + y * c1 + z * c2;
        g[i] = (x * e10 + y * e11) / w;
        g[i + 1] = (x * e20 + y * e21 + z * e22) / w;
        reach = Math.max(reach, Math.hypot(g[i], g[i + 1]));
      }
      gpaths.push(g);
    }
    let gx0 = Infinity;
    let gy0 = Infinity;
    let gx1 = -Infinity;
    let gy1 = -Infinity;
    for (const g of gpaths)
      for (let i = 0; i < g.length; i += 2) {
        gx0 = Math.min(gx0, g[i]);
        gx1 = Math.max(gx1, g[i]);
        gy0 = Math.min(gy0, g[i + 1]);
        gy1 = Math.max(gy1, g[i + 1]);
      }
    const sec2 = (r: number) => 1 + Math.tan(Math.min(r, 1.5)) ** 2;
    const xy = ix.xy;
    // per unit (property path, road piece): least planar distance and the pairs near it
    const unitBest = new Map<number, number>();
    const pairPath: number[] = [];
    const pairVertex: number[] = [];
    const pairEdge: number[] = [];
    const pairD: number[] = [];
    const zero: number[] = [];
    let best = Infinity; // least planar distance over all units
    let spread = 1; // sec²ρ over the reach searched
    let lim = Infinity; // no unit farther than this can be a candidate
    const improve = (d: number) => {
      best = d;
      spread = sec2(reach + d * 1.01);
      lim = d * ELLIPSOID_SPREAD * spread * (1 + 1e-9);
    };
    const paths = poly.paths.length;
    // Phase 1 (cheap, every edge of the cells searched): the edge in the projection, a
    // lower bound lb of its distance to the property (box; circle of radius `reach`), and
    // an upper bound (distance to the centre + reach) that limits the search.
    const cand: number[] = []; // edge
    const candLb: number[] = [];
    const proj: number[] = []; // ax, ay, bx, by per candidate
    let upper = Infinity;
    let lim1 = Infinity;
    const cxyz = ix.cellXyz;
    const examine = (j: number) => {
      // an edge in several cells is seen once per cell: harmless, its pairs repeat
      const o = 6 * j;
      const wa = cxyz[o] * c0 + cxyz[o + 1] * c1 + cxyz[o + 2] * c2;
      if (wa <= 0.2) return; // beyond 78° from the property: never the nearest in Brazil's extent
      const wb = cxyz[o + 3] * c0 + cxyz[o + 4] * c1 + cxyz[o + 5] * c2;
      if (wb <= 0.2) return;
      const ax = (cxyz[o] * e10 + cxyz[o + 1] * e11) / wa;
      const ay = (cxyz[o] * e20 + cxyz[o + 1] * e21 + cxyz[o + 2] * e22) / wa;
      const bx = (cxyz[o + 3] * e10 + cxyz[o + 4] * e11) / wb;
      const by = (cxyz[o + 3] * e20 + cxyz[o + 4] * e21 + cxyz[o + 5] * e22) / wb;
      const ddx = Math.max(0, Math.min(ax, bx) - gx1, gx0 - Math.max(ax, bx));
      const ddy = Math.max(0, Math.min(ay, by) - gy1, gy0 - Math.max(ay, by));
      const centre = Math.sqrt(pointSegment2(0, 0, ax, ay, bx, by));
      const lb = Math.max(Math.sqrt(ddx * ddx + ddy * ddy), centre - reach);
      if (lb > lim1) return;
      if (centre + reach < upper) {
        upper = centre + reach;
        lim1 = upper * ELLIPSOID_SPREAD * sec2(reach + upper * 1.01) * (1 + 1e-9);
      }
      cand.push(ix.cellEdges[j]);
      candLb.push(lb);
      proj.push(ax, ay, bx, by);
    };
    // rings of cells around the property's cells, outward, while they can hold something
    // nearer (a cell r rings out is (r − 1) cells away in longitude or latitude, at least
    // that angle times cos φ; g ≥ θ); rings that do not reach the grid are skipped
    const cx0 = Math.floor((minx - ix.x0) / CELL);
    const cx1 = Math.floor((maxx - ix.x0) / CELL);
    const cy0 = Math.floor((miny - ix.y0) / CELL);
    const cy1 = Math.floor((maxy - ix.y0) / CELL);
    const first = Math.max(0, -cx1, cx0 - (ix.nx - 1), -cy1, cy0 - (ix.ny - 1));
    for (let ring = first; ; ring++) {
      const reachDeg = Math.max(0, ring - 1) * CELL;
      const coslat = Math.cos(Math.min(89, Math.max(Math.abs(miny), Math.abs(maxy)) + reachDeg) * RAD);
      if (reachDeg * RAD * coslat * 0.999 > lim1) break;
      const ax = cx0 - ring;
      const bx = cx1 + ring;
      const ay = cy0 - ring;
      const by = cy1 + ring;
      for (let cy = Math.max(0, ay); cy <= Math.min(ix.ny - 1, by); cy++) {
        const whole = ring === 0 || cy === ay || cy === by;
        for (let cx = Math.max(0, ax); cx <= Math.min(ix.nx - 1, bx); cx = whole || cx >= bx ? cx + 1 : Math.max(cx + 1, bx)) {
          if (!whole && cx !== ax && cx !== bx) continue;
          const c = cy * ix.nx + cx;
          if (ring > 1) {
            const cdx = Math.max(0, ix.x0 + cx * CELL - maxx, minx - (ix.x0 + (cx + 1) * CELL));
            const cdy = Math.max(0, ix.y0 + cy * CELL - maxy, miny - (ix.y0 + (cy + 1) * CELL));
            if (Math.hypot(cdx * coslat, cdy) * RAD * 0.999 > lim1) continue;
          }
          for (let j = ix.cellStart[c]; j < ix.cellStart[c + 1]; j++) examine(j);
        }
      }
      if (ax <= 0 && ay <= 0 && bx >= ix.nx - 1 && by >= ix.ny - 1) break; // the whole grid is seen
    }
    // Phase 2: a tighter lower bound from the property's extent towards the edge (its
    // support function h: a point q is at least |q| − h(q/|q|) from the property, and h
    // moves by at most reach × the angle the edge spans), then exact planar distances in
    // increasing bound order, per unit (property path, road piece) only while the bound
    // is within the unit's least (× spread) and within the global limit.
    const exact = (i: number) => {
      const k = cand[i];
      const ax = proj[4 * i];
      const ay = proj[4 * i + 1];
      const bx = proj[4 * i + 2];
      const by = proj[4 * i + 3];
      let lb = candLb[i];
      const dx = bx - ax;
      const dy = by - ay;
      const l2 = dx * dx + dy * dy;
      let t = l2 > 0 ? -(ax * dx + ay * dy) / l2 : 0;
      t = t < 0 ? 0 : t > 1 ? 1 : t;
      const qx = ax + t * dx;
      const qy = ay + t * dy;
      const qn = Math.sqrt(qx * qx + qy * qy);
      if (qn > reach && best !== Infinity) {
        let h = -Infinity;
        const ux = qx / qn;
        const uy = qy / qn;
        for (let r = 0; r < paths; r++) {
          const g = gpaths[r];
          for (let j = 0; j < g.length; j += 2) {
            const w = g[j] * ux + g[j + 1] * uy;
            if (w > h) h = w;
          }
        }
        const span = 2 * Math.asin(Math.min(1, Math.sqrt(l2) / (2 * qn)));
        lb = Math.max(lb, qn - h - reach * span);
        if (lb > lim) return;
      }
      if (lb === 0 && inside(poly, xy[4 * k], xy[4 * k + 1])) {
        zero.push(k);
        improve(0);
        return;
      }
      const part = ix.part[k];
      for (let r = 0; r < paths; r++) {
        const unit = part * paths + r;
        const ub = unitBest.get(unit) ?? Infinity;
        const ul = Math.min(lim, ub * spread * (1 + 1e-9));
        if (lb > ul) continue;
        const g = gpaths[r];
        const n = g.length / 2;
        let least = Infinity;
        for (let v = 0; v < Math.max(1, n - 1); v++) {
          const j = Math.min(v + 1, n - 1);
          const d = Math.sqrt(segmentSegment2(g[2 * v], g[2 * v + 1], g[2 * j], g[2 * j + 1], ax, ay, bx, by));
          if (d === 0) {
            zero.push(k);
            improve(0);
            break;
          }
          if (d <= ul) pairPath.push(r), pairVertex.push(v), pairEdge.push(k), pairD.push(d);
          if (d < least) least = d;
        }
        if (least < ub) unitBest.set(unit, least);
        if (least < best) improve(least);
      }
    };
    // the candidate with the least bound first, so that only those within the limit it
    // sets are sorted and measured
    let first1 = -1;
    for (let i = 0; i < cand.length; i++) if (first1 < 0 || candLb[i] < candLb[first1]) first1 = i;
    if (first1 >= 0) exact(first1);
    const order1: number[] = [];
    for (let i = 0; i < cand.length; i++) if (i !== first1 && candLb[i] <= lim) order1.push(i);
    order1.sort((x, y) => candLb[x] - candLb[y]);
    for (const i of order1) {
      if (candLb[i] > lim) break;
      exact(i);
    }
    if (zero.length > 0) {
      // inside or crossing: distance 0 to each such feature
      const seen = new Set<number>();
      const out: Candidate[] = [];
      for (const k of zero) {
        const f = ix.feature[k];
        if (seen.has(f)) continue;
        seen.add(f);
        out.push({ fid: ix.fids[f], px: xy[4 * k], py: xy[4 * k + 1], qx: xy[4 * k], qy: xy[4 * k + 1] });
      }
      return out;
    }
    // on the sphere: per unit within the spread, PostGIS' closest points among its pairs
    // that can be its least (PostGIS walks ring edges outer, line edges inner, first least kept)
    const order: number[] = [];
    for (let i = 0; i < pairD.length; i++) {
      const ub = unitBest.get(ix.part[pairEdge[i]] * paths + pairPath[i])!;
      if (ub <= lim && pairD[i] <= ub * spread * (1 + 1e-9)) order.push(i);
    }
    order.sort((a, b) => pairPath[a] - pairPath[b] || pairVertex[a] - pairVertex[b] || pairEdge[a] - pairEdge[b]);
    const byUnit = new Map<number, { d: number; f: number; p: G; q: G }>();
    let least = Infinity;
    for (const i of order) {
      const p = poly.paths[pairPath[i]];
      const v = pairVertex[i];
      const k = pairEdge[i];
      const a1: G = [p[2 * v] * RAD, p[2 * v + 1] * RAD];
      const a2: G = p.length > 2 ? [p[2 * v + 2] * RAD, p[2 * v + 3] * RAD] : a1;
      const b1: G = [xy[4 * k] * RAD, xy[4 * k + 1] * RAD];
      const b2: G = [xy[4 * k + 2] * RAD, xy[4 * k + 3] * RAD];
      const [d, pp, qq] = edgeToEdge(a1, a2, b1, b2);
      const unit = ix.part[k] * paths + pairPath[i];
      const u = byUnit.get(unit);
      if (!u || d < u.d) byUnit.set(unit, { d, f: ix.feature[k], p: pp, q: qq });
      if (d < least) least = d;
    }
    const out: Candidate[] = [];
    for (const u of byUnit.values())
      if (u.d <= least * ELLIPSOID_SPREAD + 1e-15) out.push({ fid: ix.fids[u.f], px: u.p[0] / RAD, py: u.p[1] / RAD, qx: u.q[0] / RAD, qy: u.q[1] / RAD });
    return out;
  }
}

/** Even-odd point in polygon over every ring of the polygon parts (planar lon/lat). */
function inside(poly: Paths, x: number, y: number): boolean {
  let odd = false;
  for (let r = 0; r < poly.paths.length; r++) {
    if (poly.polygon[r] < 0) continue;
    const p = poly.paths[r];
    const n = p.length / 2;
    for (let i = 0, j = n - 1; i < n; j = i++) {
      const yi = p[2 * i + 1];
      const yj = p[2 * j + 1];
      if (yi > y !== yj > y && x < ((p[2 * j] - p[2 * i]) * (y - yi)) / (yj - yi) + p[2 * i]) odd = !odd;
    }
  }
  return odd;
}
