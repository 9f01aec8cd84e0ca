// Which SRID a shapefile's .prj describes. GDAL's autoIdentifyEPSG knows only a few
// spellings: the WKT FUNAI's GeoServer writes (SIRGAS 2000 with TOWGS84[0,…] and
// longitude-first AXIS, which drops its AUTHORITY) or an ESRI-flavoured UTM zone is not
// identified, although it is exactly EPSG:4674 or 31983. So a .prj that names no code is
// compared with the CRSs Brazilian sources use, by GDAL's isSame (the whole CRS) and, for a
// geographic CRS, isSameGeogCS (datum, ellipsoid, prime meridian). Only a CRS that matches
// none of them fails, naming its datum so that an operator can tell what it is.
//
// The .prj is read from its text (readPrj), never through `layer.srs`: gdal-async 3.6 keys the
// wrapper of a layer's SRS by the layer's own pointer while wrapping a clone, so once that
// dataset is closed and the address reused by another SRS (the next file's, or any new one)
// the old wrapper comes back until the garbage collector drops it: a FUNAI .prj read as the
// Web Mercator of the file opened before it. Wrappers of SRSs we create own their pointer and
// cannot go stale, so only `layer.srs` (and `geometry.srs`, which we do not use) is avoided.
import fs from 'node:fs';
import path from 'node:path';
import gdal from 'gdal-async';
import { AgroError } from '../errors.ts';

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Geographic CRSs: SIRGAS 2000, WGS 84, SAD69, SAD69(96), Córrego Alegre 1970-72. */
const GEOGRAPHIC = [4674, 4326, 4618, 5527, 4225];
/**
 * Projected CRSs over Brazil, preferred first where two are the same CRS: UTM zones 17S–25S
 * and 18N–22N on SIRGAS 2000, SAD69, SAD69(96), WGS 84 and Córrego Alegre; the polyconic,
 * Albers and Mercator projections of Brazil; Web Mercator; ESRI South America Albers
 * (ESRI:102033, also in PostGIS).
 */
const PROJECTED: { auth: 'EPSG' | 'ESRI'; code: number }[] = [
  ...[
    ...range(31977, 31985), ...range(31972, 31976), // SIRGAS 2000 / UTM 17S–25S, 18N–22N
    ...range(29187, 29195), ...range(29168, 29172), // SAD69 / UTM
    ...range(5875, 5877), 5531, 5858, ...range(5533, 5535), // SAD69(96) / UTM 18S–25S
    ...range(32718, 32725), ...range(32618, 32622), // WGS 84 / UTM
    ...range(22521, 22525), ...range(5536, 5539), // Córrego Alegre 1970-72 and 1961 / UTM
    5880, 29101, 5530, 10857, 5641, 3857, // polyconic, Albers, Mercator of Brazil; Web Mercator
  ].map((code) => ({ auth: 'EPSG' as const, code })),
  { auth: 'ESRI', code: 102033 },
];

/**
 * The CRS a .prj file holds, read as GDAL's shapefile driver reads it (importFromESRI, which
 * also takes an OGC WKT). A UTF-8 byte-order mark is dropped; names may be UTF-8 or Latin-1.
 */
export function readPrj(file: string): gdal.SpatialReference | null {
  const bytes = fs.readFileSync(file);
  let text = bytes.toString('utf8');
  if (text.includes('\uFFFD')) text = bytes.toString('latin1');
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/).filter((l) => l.trim() !== '');
  try {
    return gdal.SpatialReference.fromESRI(lines);
  } catch {
    return null;
  }
}

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
    // Cached for the process: one that is not the CRS asked for (a stale wrapper) is never kept.
    if (srs && srs.getAuthorityCode(null as unknown as string) !== String(code)) return null;
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
