// Streams vector layers into an unlogged staging table (read/staging.ts): one text
// column per canonical field (mapped from any known spelling), unknown columns in
// `extra`, the geometry as WKB with the layer's SRID kept beside it. All typing, repair
// and reprojection happen afterwards in SQL, where PostGIS does set work fastest.
//
// Two readers, one table. Shapefiles opened for it (layersFromZip marks them
// `reader: 'shp-stream'`) go through the engine's streaming reader (read/shp-stream.ts:
// .shp and .dbf read side by side, the .shp straight from its zip, WKB built in node, binary
// COPY; flat memory, no native call per feature). Everything else (a layer opened with GDAL alone, GeoPackage,
// GeoJSON, …) is read by GDAL one feature at a time and sent as text COPY. The result
// says which reader ran (`reader`), for the report.
import type pg from 'pg';
import { ident } from '../db/pool.ts';
import { copyLine, copyLines, jsonText, type CopyValue } from './copy.ts';
import { stageShapefiles } from './read/shp-stream.ts';
import { createStagingTable, mapFields, missingEverywhere, schemaFingerprint, stagingColumns, type FieldSpec, type StageResult } from './read/staging.ts';
import { readFeatures, type ReadCounts, type VectorLayer } from './vector-reader.ts';

export { createStagingTable, mapFields, requiredFieldMissing, schemaFingerprint, type FieldSpec, type StageResult } from './read/staging.ts';

/** Which reader staged the rows: the engine's streaming shapefile reader or GDAL's feature loop. */
export type ReadPath = NonNullable<VectorLayer['reader']>;

export interface LayerStageResult extends StageResult {
  reader: ReadPath;
  /** DBF records flagged deleted, skipped and counted (both readers). */
  deleted: number;
  /** Numeric/date DBF values that were not numbers/dates, kept as written (both readers). */
  unparsed: number;
  /** Numeric cells of asterisks per layer and DBF field (streaming reader; null when GDAL read the layers). */
  overflowed: Record<string, Record<string, number>> | null;
  /** Text cells cut at a NUL with text after it, per layer and DBF field (streaming reader; null when GDAL read the layers). */
  cutAtNul: Record<string, Record<string, number>> | null;
  /** Polygon rings not closed in the .shp, closed on reading (both readers). */
  ringsClosed: number;
  /** Shapes after the .dbf's last record, not loaded and counted (both readers). */
  shapesWithoutRecord: number;
}

const asText = (v: unknown): CopyValue => {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString().slice(0, 10);
  // gdal-async hands DBF D (date) fields out as { year, month, day } objects, not Dates.
  if (typeof v === 'object' && 'year' in v && 'month' in v && 'day' in v) {
    const d = v as { year: number; month: number; day: number };
    return `${String(d.year).padStart(4, '0')}-${String(d.month).padStart(2, '0')}-${String(d.day).padStart(2, '0')}`;
  }
  return String(v);
};

/** The reader `layers` are staged with: the streaming one when every layer was opened for it. */
export const readPathOf = (layers: VectorLayer[]): ReadPath =>
  layers.length > 0 && layers.every((l) => l.reader === 'shp-stream') ? 'shp-stream' : 'gdal';

/**
 * Loads every layer into `table` (created here). Required fields are checked on all
 * layers before a single row is written, so a drifted source fails without loading.
 */
export async function stageLayers(client: pg.ClientBase, table: string, layers: VectorLayer[], specs: FieldSpec[]): Promise<LayerStageResult> {
  if (readPathOf(layers) === 'shp-stream') return { reader: 'shp-stream', ...(await stageShapefiles(client, table, layers, specs)) };
  return { reader: 'gdal', overflowed: null, cutAtNul: null, ...(await stageWithGdal(client, table, layers, specs)) };
}

/** GDAL's feature loop (gdal-async, one native call per feature) into a text COPY. */
async function stageWithGdal(client: pg.ClientBase, table: string, layers: VectorLayer[], specs: FieldSpec[]): Promise<StageResult & ReadCounts & { ringsClosed: number }> {
  const mappings = layers.map((l) => mapFields(l, specs));
  await createStagingTable(client, table, specs);
  let seq = 0;
  let replacementChars = 0;
  let ringsClosed = 0;
  const counts: ReadCounts = { deleted: 0, shapesWithoutRecord: 0, unparsed: 0 };
  function* lines(): Generator<string> {
    for (let li = 0; li < layers.length; li++) {
      const layer = layers[li];
      const { index, unknown } = mappings[li];
      for (const f of readFeatures(layer, counts)) {
        ringsClosed += f.ringsClosed;
        const row: CopyValue[] = [++seq, layer.name, layer.srid];
        const byName: Record<string, CopyValue> = {};
        for (const [src, canon] of index) byName[canon] = asText(f.props[src]);
        for (const s of specs) {
          const v = byName[s.name] ?? null;
          if (typeof v === 'string' && v.includes('\uFFFD')) replacementChars++;
          row.push(v);
        }
        let extra: Record<string, unknown> | null = null;
        for (const u of unknown) {
          const v = f.props[u];
          if (v !== null && v !== undefined && v !== '') (extra ??= {})[u] = v instanceof Date ? asText(v) : v;
        }
        row.push(extra ? jsonText(extra) : null, f.wkb ? f.wkb.toString('hex') : null);
        yield copyLine(row);
      }
    }
  }
  const rows = await copyLines(client, `${table} (${stagingColumns(specs).map(ident).join(', ')})`, lines());
  const unknown = [...new Set(mappings.flatMap((m) => m.unknown))];
  return { rows, missingOptional: missingEverywhere(specs, mappings), unknown, replacementChars, fingerprint: schemaFingerprint(layers), ringsClosed, ...counts };
}
