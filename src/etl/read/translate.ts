// A layer into PostgreSQL through GDAL's own translator (the library behind ogr2ogr),
// in GDAL's worker thread: `gdal.vectorTranslateAsync` from the source (a .shp path or a
// /vsizip/ path inside the zip: nothing extracted) into an UNLOGGED table, rows sent
// with COPY, no reprojection (the SQL normalisation transforms), every geometry
// promoted to multi, no index (the staging table is read once, whole).
// The table has GDAL's typed columns (lower-cased DBF names; integer/float8/date/text)
// and `src_fid`, the shapefile's feature id (0-based): mapping the aliases to the
// canonical names is one SQL statement over it.
//
// GDAL's configuration (SHAPE_ENCODING, PG_USE_COPY) is process-global: translations
// in one process run one at a time (a module-level queue sees to it).
import gdal from 'gdal-async';
import { AgroError } from '../../errors.ts';

export interface TranslateOptions {
  /** Target table, schema-qualified or not; created (or overwritten). */
  table: string;
  /** DBF encoding in GDAL's names ('ISO-8859-1', 'UTF-8', 'CP1252'), as the engine's rule decides it. */
  encoding: string;
  /** SRID assigned to the geometries (no reprojection). */
  srid: number;
  /** Layer inside the source (default: the first). */
  layer?: string;
}

/** libpq keyword form of a postgres:// URL (what GDAL's PG: prefix expects). */
export function pgConnInfo(url: string): string {
  const u = new URL(url);
  const kv: [string, string][] = [
    ['host', u.hostname],
    ['port', u.port || '5432'],
    ['dbname', decodeURIComponent(u.pathname.slice(1))],
    ['user', decodeURIComponent(u.username)],
  ];
  if (u.password) kv.push(['password', decodeURIComponent(u.password)]);
  return kv.map(([k, v]) => `${k}='${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`).join(' ');
}

let queue: Promise<unknown> = Promise.resolve();

function withConfig<T>(config: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const run = async () => {
    const before = Object.fromEntries(Object.keys(config).map((k) => [k, gdal.config.get(k)]));
    for (const [k, v] of Object.entries(config)) gdal.config.set(k, v);
    try {
      return await fn();
    } finally {
      for (const [k, v] of Object.entries(before)) gdal.config.set(k, v ?? null);
    }
  };
  const p = queue.then(run, run);
  queue = p.catch(() => undefined);
  return p;
}

/** The translator's arguments (also what the ogr2ogr anchor of bench/read-paths is given). */
export function translateArgs(o: TranslateOptions): string[] {
  return [
    '-f', 'PostgreSQL', '-nln', o.table, '-nlt', 'PROMOTE_TO_MULTI', '-a_srs', `EPSG:${o.srid}`,
    '-lco', 'UNLOGGED=ON', '-lco', 'GEOMETRY_NAME=geom', '-lco', 'SPATIAL_INDEX=NONE', '-lco', 'FID=src_fid',
    '-lco', 'PRECISION=NO', '-preserve_fid', '-overwrite',
    ...(o.layer ? [o.layer] : []),
  ];
}

/** Translates one layer of `source` into `table` of the database at `databaseUrl`; returns the source's feature count. */
export async function translateLayer(source: string, databaseUrl: string, o: TranslateOptions): Promise<number> {
  return withConfig({ SHAPE_ENCODING: o.encoding, PG_USE_COPY: 'YES' }, async () => {
    let src: gdal.Dataset;
    try {
      src = await gdal.openAsync(source);
    } catch (e) {
      throw new AgroError('malformed_source', `${source}: ${(e as Error).message}`);
    }
    try {
      const features = (o.layer ? src.layers.get(o.layer) : src.layers.get(0)).features.count();
      const out = await gdal.vectorTranslateAsync(`PG:${pgConnInfo(databaseUrl)}`, src, translateArgs(o));
      out.close();
      return features;
    } finally {
      src.close();
    }
  });
}
