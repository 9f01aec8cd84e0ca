// ST_Distance(geography, geography) between a polygon and a line, as PostGIS 3.3.2 computes
// it (the version Debian 12 ships, which the SQL this replaces ran on): the pair of points
// nearest on the sphere (edge against edge, liblwgeom/lwgeodetic.c), then the WGS 84
// spheroid distance between those two points (geod_inverse, Karney 2013). The sphere
// functions are ported line by line, in the same order of operations, so the chosen pair
// and its distance match PostGIS to rounding (test/road-distance.test.ts holds them to
// 1e-6 m against PostGIS itself). Not ported: circ_tree_distance_tree's node pruning and
// threshold exit (~7e-21 rad), since the search here finds the exact sphere minimum by
// its own bounds; where two pairs tie exactly on the sphere, the first PostGIS reaches in
// its tree order and the first reached here may differ (a shared vertex, the usual tie,
// gives the same points either way). Points are radians, vectors unit cartesian.
import { createRequire } from 'node:module';

// a UMD bundle: Node's ESM loader finds no named exports in it
const { Geodesic } = createRequire(import.meta.url)('geographiclib-geodesic') as typeof import('geographiclib-geodesic');

export interface GeoPoint {
  lat: number;
  lon: number;
}

export interface Vec3 {
  x: number;
  y: number;
  z: number;
}

/** lwgeodetic.h overrides FP_TOLERANCE for the geodetic code. */
const FP_TOLERANCE = 5e-14;
const fpEquals = (a: number, b: number) => Math.abs(a - b) <= FP_TOLERANCE;
const fpIsZero = (a: number) => Math.abs(a) <= FP_TOLERANCE;

/** geographic_point_init: degrees to radians, as deg2rad writes it (data in range needs no wrap). */
export const deg2rad = (d: number) => (Math.PI * d) / 180.0;

/** geographic_point_init: a point from lon/lat in degrees. */
export const geoPoint = (lonDeg: number, latDeg: number): GeoPoint => ({ lon: deg2rad(lonDeg), lat: deg2rad(latDeg) });

export function geographicPointEquals(a: GeoPoint, b: GeoPoint): boolean {
  return fpEquals(a.lat, b.lat) && fpEquals(a.lon, b.lon);
}

export function geog2cart(g: GeoPoint): Vec3 {
  return { x: Math.cos(g.lat) * Math.cos(g.lon), y: Math.cos(g.lat) * Math.sin(g.lon), z: Math.sin(g.lat) };
}

function cart2geog(p: Vec3): GeoPoint {
  return { lon: Math.atan2(p.y, p.x), lat: Math.asin(p.z) };
}

const dot = (a: Vec3, b: Vec3) => a.x * b.x + a.y * b.y + a.z * b.z;

function cross(a: Vec3, b: Vec3): Vec3 {
  return { x: a.y * b.z - a.z * b.y, y: a.z * b.x - a.x * b.z, z: a.x * b.y - a.y * b.x };
}

function normalize(p: Vec3): Vec3 {
  const d = Math.sqrt(p.x * p.x + p.y * p.y + p.z * p.z);
  if (fpIsZero(d)) return { x: 0, y: 0, z: 0 };
  return { x: p.x / d, y: p.y / d, z: p.z / d };
}

/** The normal of the plane through p and q from their lat/lon: exact for short edges too. */
export function robustCrossProduct(p: GeoPoint, q: GeoPoint): Vec3 {
  const lonQpp = (q.lon + p.lon) / -2.0;
  const lonQmp = (q.lon - p.lon) / 2.0;
  const sinPLatMinusQLat = Math.sin(p.lat - q.lat);
  const sinPLatPlusQLat = Math.sin(p.lat + q.lat);
  const sinLonQpp = Math.sin(lonQpp);
  const sinLonQmp = Math.sin(lonQmp);
  const cosLonQpp = Math.cos(lonQpp);
  const cosLonQmp = Math.cos(lonQmp);
  return {
    x: sinPLatMinusQLat * sinLonQpp * cosLonQmp - sinPLatPlusQLat * cosLonQpp * sinLonQmp,
    y: sinPLatMinusQLat * cosLonQpp * cosLonQmp + sinPLatPlusQLat * sinLonQpp * sinLonQmp,
    z: Math.cos(p.lat) * Math.cos(q.lat) * Math.sin(q.lon - p.lon),
  };
}

/** Great-circle distance in radians. */
export function sphereDistance(s: GeoPoint, e: GeoPoint): number {
  if (fpEquals(s.lat, e.lat) && fpEquals(s.lon, e.lon)) return 0.0;
  const dLon = e.lon - s.lon;
  const cosDLon = Math.cos(dLon);
  const cosLatE = Math.cos(e.lat);
  const sinLatE = Math.sin(e.lat);
  const cosLatS = Math.cos(s.lat);
  const sinLatS = Math.sin(s.lat);
  const a1 = (cosLatE * Math.sin(dLon)) ** 2;
  const a2 = (cosLatS * sinLatE - sinLatS * cosLatE * cosDLon) ** 2;
  const a = Math.sqrt(a1 + a2);
  const b = sinLatS * sinLatE + cosLatS * cosLatE * cosDLon;
  return Math.atan2(a, b);
}

/** An edge with what PostGIS recomputes on every call, computed once. */
export interface Edge {
  start: GeoPoint;
  end: GeoPoint;
  /** Zero-length edge (start equals end). */
  point: boolean;
  /** normalize(robust_cross_product(start, end)) */
  normal: Vec3;
  vs: Vec3;
  ve: Vec3;
  /** The cone test's centre and its threshold (edge_point_in_cone). */
  vcp: Vec3;
  vsDotVcp: number;
  antipodal: boolean;
}

export function makeEdge(start: GeoPoint, end: GeoPoint): Edge {
  const vs = geog2cart(start);
  const ve = geog2cart(end);
  const vcp = normalize({ x: vs.x + ve.x, y: vs.y + ve.y, z: vs.z + ve.z });
  return {
    start,
    end,
    point: geographicPointEquals(start, end),
    normal: normalize(robustCrossProduct(start, end)),
    vs,
    ve,
    vcp,
    vsDotVcp: dot(vs, vcp),
    antipodal: vs.x === -1.0 * ve.x && vs.y === -1.0 * ve.y && vs.z === -1.0 * ve.z,
  };
}

/** edge_point_in_cone */
function edgePointInCone(e: Edge, p: GeoPoint): boolean {
  if (e.antipodal) return true;
  const vp = geog2cart(p);
  const vpDotVcp = dot(vp, e.vcp);
  return vpDotVcp > e.vsDotVcp || Math.abs(vpDotVcp - e.vsDotVcp) < 2e-16;
}

/** edge_distance_to_point: radians, and the nearest point of the edge. */
export function edgeDistanceToPoint(e: Edge, gp: GeoPoint, gpCart: Vec3): { d: number; closest: GeoPoint } {
  if (e.point) return { d: sphereDistance(e.start, gp), closest: e.start };
  const n = e.normal;
  const p = gpCart;
  const s = dot(p, n);
  const k = normalize({ x: p.x - n.x * s, y: p.y - n.y * s, z: p.z - n.z * s });
  const gk = cart2geog(k);
  let d = 1000000000.0;
  if (edgePointInCone(e, gk)) d = sphereDistance(gp, gk);
  let closest = gk;
  const d2 = sphereDistance(gp, e.start);
  const d3 = sphereDistance(gp, e.end);
  if (d2 < d) {
    d = d2;
    closest = e.start;
  }
  if (d3 < d) {
    d = d3;
    closest = e.end;
  }
  return { d, closest };
}

/**
 * edge_distance_to_edge (edges that do not intersect): radians and the two nearest points.
 * The line-by-line port, kept as the reference: the search calls edgeDistanceToEdgeBounded
 * (nearest.ts), which gives the same answer measuring fewer of the four candidates.
 */
export function edgeDistanceToEdge(e1: Edge, e2: Edge): { d: number; c1: GeoPoint; c2: GeoPoint } {
  const a = edgeDistanceToPoint(e1, e2.start, e2.vs);
  const b = edgeDistanceToPoint(e1, e2.end, e2.ve);
  const c = edgeDistanceToPoint(e2, e1.start, e1.vs);
  const f = edgeDistanceToPoint(e2, e1.end, e1.ve);
  let d = a.d;
  let c1 = a.closest;
  let c2 = e2.start;
  if (b.d < d) {
    d = b.d;
    c1 = b.closest;
    c2 = e2.end;
  }
  if (c.d < d) {
    d = c.d;
    c1 = e1.start;
    c2 = c.closest;
  }
  if (f.d < d) {
    d = f.d;
    c1 = e1.end;
    c2 = f.closest;
  }
  return { d, c1, c2 };
}

/** unit_normal: the normal of two vectors, kept well conditioned for narrow and wide angles. */
function unitNormal(p1: Vec3, p2: Vec3): Vec3 {
  const pDot = dot(p1, p2);
  let p3: Vec3;
  if (pDot < 0) p3 = normalize({ x: p1.x + p2.x, y: p1.y + p2.y, z: p1.z + p2.z });
  else if (pDot > 0.95) p3 = normalize({ x: p2.x - p1.x, y: p2.y - p1.y, z: p2.z - p1.z });
  else p3 = p2;
  return normalize(cross(p1, p3));
}

const point3dEquals = (a: Vec3, b: Vec3) => fpEquals(a.x, b.x) && fpEquals(a.y, b.y) && fpEquals(a.z, b.z);

function pointInCone(a1: Vec3, a2: Vec3, p: Vec3): boolean {
  if (point3dEquals(a1, p) || point3dEquals(a2, p)) return true;
  const ac = normalize({ x: a1.x + a2.x, y: a1.y + a2.y, z: a1.z + a2.z });
  const minSimilarity = dot(a1, ac);
  if (Math.abs(1.0 - minSimilarity) > 1e-10) return dot(p, ac) > minSimilarity;
  const pa1 = normalize({ x: p.x - a1.x, y: p.y - a1.y, z: p.z - a1.z });
  const pa2 = normalize({ x: p.x - a2.x, y: p.y - a2.y, z: p.z - a2.z });
  return dot(pa1, pa2) < 0.0;
}

function dotProductSide(p: Vec3, q: Vec3): number {
  const dp = dot(p, q);
  if (fpIsZero(dp)) return 0;
  return dp < 0.0 ? -1 : 1;
}

/** edge_intersects' answer: PIR_* flags of lwgeodetic.h (0: no interaction). */
export const PIR_INTERSECTS = 0x01;
export const PIR_COLINEAR = 0x02;
const PIR_A_TOUCH_RIGHT = 0x04;
const PIR_A_TOUCH_LEFT = 0x08;
export const PIR_B_TOUCH_RIGHT = 0x10;
const PIR_B_TOUCH_LEFT = 0x20;

/**
 * edge_intersects as PostGIS 3.3.2 has it (the version the SQL this replaces ran on): edges
 * whose planes are the same within FP_TOLERANCE (normals within ~3.2e-7 rad, ~2 m) and whose
 * ranges overlap count as co-linear and touching. (PostGIS 3.3.7 / 3.4.3 narrowed that to
 * 1e-15, ticket #5765.)
 */
export function edgesIntersect(a1: Vec3, a2: Vec3, b1: Vec3, b2: Vec3): number {
  const an = unitNormal(a1, a2);
  const bn = unitNormal(b1, b2);
  const abDot = dot(an, bn);
  if (fpEquals(Math.abs(abDot), 1.0)) {
    return pointInCone(a1, a2, b1) || pointInCone(a1, a2, b2) || pointInCone(b1, b2, a1) || pointInCone(b1, b2, a2) ? PIR_INTERSECTS | PIR_COLINEAR : 0;
  }
  const a1Side = dotProductSide(bn, a1);
  const a2Side = dotProductSide(bn, a2);
  const b1Side = dotProductSide(an, b1);
  const b2Side = dotProductSide(an, b2);
  if (a1Side === a2Side && a1Side !== 0) return 0;
  if (b1Side === b2Side && b1Side !== 0) return 0;
  if (a1Side !== a2Side && a1Side + a2Side === 0 && b1Side !== b2Side && b1Side + b2Side === 0) {
    const vn = unitNormal(an, bn);
    if (pointInCone(a1, a2, vn) && pointInCone(b1, b2, vn)) return PIR_INTERSECTS;
    const neg = { x: -vn.x, y: -vn.y, z: -vn.z };
    return pointInCone(a1, a2, neg) && pointInCone(b1, b2, neg) ? PIR_INTERSECTS : 0;
  }
  let rv = PIR_INTERSECTS;
  if (a1Side === 0) rv |= a2Side < 0 ? PIR_A_TOUCH_RIGHT : PIR_A_TOUCH_LEFT;
  else if (a2Side === 0) rv |= a1Side < 0 ? PIR_A_TOUCH_RIGHT : PIR_A_TOUCH_LEFT;
  if (b1Side === 0) rv |= b2Side < 0 ? PIR_B_TOUCH_RIGHT : PIR_B_TOUCH_LEFT;
  else if (b2Side === 0) rv |= b1Side < 0 ? PIR_B_TOUCH_RIGHT : PIR_B_TOUCH_LEFT;
  return rv;
}

const WGS84 = Geodesic.WGS84;

/** spheroid_distance: metres on WGS 84 between two points (geod_inverse). */
export function spheroidDistance(a: GeoPoint, b: GeoPoint): number {
  if (geographicPointEquals(a, b)) return 0.0;
  const r = WGS84.Inverse((a.lat * 180.0) / Math.PI, (a.lon * 180.0) / Math.PI, (b.lat * 180.0) / Math.PI, (b.lon * 180.0) / Math.PI, Geodesic.DISTANCE);
  return r.s12 as number;
}

/** geography_distance's last step: "knock off any funny business at the nanometer level". */
export const roundDistance = (m: number) => Math.round(m * 1.0e8) / 1.0e8;
