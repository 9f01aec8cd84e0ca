// Request geometries are checked before they reach a query (contract §4): a GeoJSON
// Polygon or MultiPolygon, coordinates in range, closed rings of ≥ 4 positions, at most
// 10,000 vertices, no self-intersection, at most 1,000,000 ha. Shape, ranges, rings, vertex
// count and area bound are checked here, in linear time; validity (self-intersection, holes
// outside their shell, overlapping parts) by PostGIS (ST_IsValidReason), in the database: turf's
// kinks compared every pair of segments on the event loop (310 ms for 10,000 vertices, every
// other request of the process waiting meanwhile).
import { area as turfArea } from '@turf/turf';
import type { MultiPolygon, Polygon, Position } from 'geojson';
import type pg from 'pg';
import { AgroError } from '../errors.ts';

export const MAX_VERTICES = 10_000;
export const MAX_AREA_HA = 1_000_000;

export type RequestGeometry = Polygon | MultiPolygon;

const fail = (why: string): never => {
  throw new AgroError('geometry_invalid', why);
};

function checkPosition(p: unknown, where: string): Position {
  if (!Array.isArray(p) || p.length < 2 || p.length > 3 || !p.every((n) => typeof n === 'number' && Number.isFinite(n))) {
    fail(`${where} is not a position [lon, lat]`);
  }
  const [lon, lat] = p as number[];
  if (lon < -180 || lon > 180) fail(`${where}: longitude ${lon} is outside -180..180`);
  if (lat < -90 || lat > 90) fail(`${where}: latitude ${lat} is outside -90..90`);
  return p as Position;
}

function checkRing(ring: unknown, where: string): number {
  if (!Array.isArray(ring)) return fail(`${where} is not an array of positions`);
  if (ring.length < 4) fail(`${where} has ${ring.length} positions; a linear ring needs at least 4`);
  ring.forEach((p, i) => checkPosition(p, `${where}[${i}]`));
  const a = ring[0] as number[];
  const b = ring[ring.length - 1] as number[];
  if (a[0] !== b[0] || a[1] !== b[1]) fail(`${where} is not closed (its first and last positions differ)`);
  return ring.length;
}

function checkPolygon(rings: unknown, where: string): number {
  if (!Array.isArray(rings) || rings.length === 0) return fail(`${where} must be a non-empty array of linear rings`);
  return rings.reduce((n: number, r, i) => n + checkRing(r, `${where}[${i}]`), 0);
}

/** The request geometry if it passes every check, else a geometry_invalid error saying which. */
export function checkGeometry(g: unknown): RequestGeometry {
  if (g === undefined || g === null) fail('geometry is required');
  if (typeof g !== 'object' || Array.isArray(g)) fail('geometry must be a GeoJSON object');
  const { type, coordinates } = g as { type?: unknown; coordinates?: unknown };
  if (type !== 'Polygon' && type !== 'MultiPolygon') fail(`geometry.type must be Polygon or MultiPolygon, got ${JSON.stringify(type)?.slice(0, 40)}`);
  let vertices = 0;
  if (type === 'Polygon') vertices = checkPolygon(coordinates, 'geometry.coordinates');
  else {
    if (!Array.isArray(coordinates) || coordinates.length === 0) fail('geometry.coordinates must be a non-empty array of polygons');
    (coordinates as unknown[]).forEach((p, i) => {
      vertices += checkPolygon(p, `geometry.coordinates[${i}]`);
      if (vertices > MAX_VERTICES) fail(`geometry has more than ${MAX_VERTICES} vertices`);
    });
  }
  if (vertices > MAX_VERTICES) fail(`geometry has ${vertices} vertices; at most ${MAX_VERTICES} are accepted`);
  const geometry = { type, coordinates } as RequestGeometry;
  const ha = turfArea(geometry) / 10_000;
  if (ha > MAX_AREA_HA) fail(`geometry covers ${Math.round(ha).toLocaleString('en')} ha; at most ${MAX_AREA_HA.toLocaleString('en')} ha are accepted`);
  return geometry;
}

export const GEOMETRY_CHECK_SQL = `
SELECT ST_IsValid(g) AS valid, ST_IsValidReason(g) AS reason, serving.area_ha(g) AS area_ha
FROM (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS g) q`;

const SELF_INTERSECTION = /^(?:Ring )?Self-intersection\[(\S+) (\S+)\]/;

/** PostGIS' verdict on a checked request geometry (GeoJSON text); its area in hectares when valid. */
export async function checkGeometryInDb(db: pg.Pool | pg.ClientBase, geojson: string): Promise<number> {
  let row: { valid: boolean; reason: string; area_ha: number };
  try {
    row = (await db.query({ name: 'api_geometry_check', text: GEOMETRY_CHECK_SQL, values: [geojson] })).rows[0];
  } catch (e) {
    // PostGIS refusing to parse it (XX000) is the client's geometry, not our failure.
    if ((e as { code?: string }).code === 'XX000') fail(`PostGIS cannot read it: ${(e as Error).message}`);
    throw e;
  }
  if (!row.valid) {
    const m = SELF_INTERSECTION.exec(row.reason);
    fail(m ? `geometry is self-intersecting (at [${m[1]}, ${m[2]}])` : `PostGIS: ${row.reason}`);
  }
  if (!(row.area_ha > 0)) fail('geometry has no area');
  return row.area_ha;
}
