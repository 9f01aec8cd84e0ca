// Which SRID a shapefile's .prj describes. GDAL's autoIdentifyEPSG knows only a few
// spellings: the WKT FUNAI's GeoServer writes (SIRGAS 2000 with TOWGS84[0,…] and
// longitude-first AXIS, which drops its AUTHORITY) or an ESRI-flavoured UTM zone is not
// identified, although it is exactly EPSG:4674 or 31983. So a .prj that names no code is
// compared with the CRSs Brazilian sources use, by GDAL's isSame (the whole CRS) and, for a
// geographic CRS, isSameGeogCS (datum, ellipsoid, prime meridian). Only a CRS that matches
// none of them fails, naming its datum so that an operator can tell what it is.
import path from 'node:path';
import gdal from 'gdal-async';
import { AgroError } from '../errors.ts';

/** Geographic CRSs: SIRGAS 2000, WGS 84, SAD69. */
const GEOGRAPHIC = [4674, 4326, 4618];
/**
 * Projected CRSs: SIRGAS 2000 / UTM 18S–25S, Brazil Polyconic, Brazil Albers, Web Mercator,
 * SAD69 / UTM 18S–25S, ESRI South America Albers (ESRI:102033, also in PostGIS).
 */
const PROJECTED: { auth: 'EPSG' | 'ESRI'; code: number }[] = [
  ...[31978, 31979, 31980, 31981, 31982, 31983, 31984, 31985, 5880, 10857, 3857, 29168, 29188, 29189, 29190, 29191, 29192, 29193, 29194, 29195].map(
    (code) => ({ auth: 'EPSG' as const, code }),
  ),
  { auth: 'ESRI', code: 102033 },
];

const candidates = new Map<string, gdal.SpatialReference | null>();
function candidate(auth: string, code: number): gdal.SpatialReference | null {
  const key = `${auth}:${code}`;
  if (!candidates.has(key)) {
    let srs: gdal.SpatialReference | null = null;
    try {
      srs = gdal.SpatialReference.fromUserInput(key);
    } catch {
      srs = null; // not in this PROJ database (EPSG:10857 needs PROJ ≥ 9.2)
    }
    candidates.set(key, srs);
  }
  return candidates.get(key)!;
}

/** The code GDAL reads from the WKT's own AUTHORITY, or finds by autoIdentifyEPSG. */
function declaredCode(srs: gdal.SpatialReference): number | null {
  try {
    srs.autoIdentifyEPSG();
  } catch {
    /* falls through to the authority nodes */
  }
  const code = srs.getAuthorityCode(null as unknown as string);
  const name = srs.getAuthorityName(null as unknown as string);
  if (code && (!name || name === 'EPSG' || name === 'ESRI')) return Number(code);
  return null;
}

/** The first candidate the SRS is the same as (whole CRS, then geographic CS for a geographic one). */
function matchCandidate(srs: gdal.SpatialReference): number | null {
  if (srs.isGeographic()) {
    for (const code of GEOGRAPHIC) {
      const c = candidate('EPSG', code);
      if (c && srs.isSame(c)) return code;
    }
    for (const code of GEOGRAPHIC) {
      const c = candidate('EPSG', code);
      if (c && srs.isSameGeogCS(c)) return code;
    }
    return null;
  }
  if (!srs.isProjected()) return null;
  for (const { auth, code } of PROJECTED) {
    const c = candidate(auth, code);
    if (c && srs.isSame(c)) return code;
  }
  return null;
}

/** The SRID of a layer's SRS (read from its .prj); fails with the WKT's name and datum when it is unknown. */
export function identifySrid(srs: gdal.SpatialReference | null, file: string): number {
  if (!srs) throw new AgroError('malformed_source', `the .prj of ${path.basename(file)} holds no CRS GDAL can read`);
  const code = declaredCode(srs) ?? matchCandidate(srs);
  if (code !== null) return code;
  const name = srs.getAttrValue(srs.isProjected() ? 'PROJCS' : 'GEOGCS') ?? '?';
  const datum = srs.getAttrValue('DATUM') ?? '?';
  throw new AgroError(
    'malformed_source',
    `cannot identify the CRS in the .prj of ${path.basename(file)}: "${name}" on datum "${datum}" is none of EPSG:${GEOGRAPHIC.join(', ')}, ` +
      `${PROJECTED.map((p) => (p.auth === 'EPSG' ? p.code : `${p.auth}:${p.code}`)).join(', ')}`,
    { file: path.basename(file), crs: name, datum },
  );
}
