// Streams vector layers into an unlogged staging table through COPY: one text column
// per canonical field (mapped from any known spelling), unknown columns in `extra`,
// the geometry as WKB with the layer's SRID kept beside it. All typing, repair and
// reprojection happen afterwards in SQL, where PostGIS does set work fastest.
import crypto from 'node:crypto';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { ident } from '../db/pool.ts';
import { copyLine, copyLines, type CopyValue } from './copy.ts';
import { readFeatures, type VectorLayer } from './vector-reader.ts';

export interface FieldSpec {
  /** Canonical (staging) column name. */
  name: string;
  /** Every known source spelling: current, legacy, truncated DBF, WFS. Lower case. */
  aliases: string[];
  required?: boolean;
}

export interface StageResult {
  rows: number;
  /** Canonical fields no layer carried (loaded as NULL). */
  missingOptional: string[];
  /** Source fields without a mapping, kept in `extra`. */
  unknown: string[];
  /** Strings holding U+FFFD (bytes that were not valid in the declared encoding). */
  replacementChars: number;
  fingerprint: string;
}

/** Maps a layer's field names to canonical names; throws when a required field is absent. */
export function mapFields(layer: VectorLayer, specs: FieldSpec[]): { index: Map<string, string>; missing: string[]; unknown: string[] } {
  const index = new Map<string, string>();
  const missing: string[] = [];
  const present = new Set(layer.fields.map((f) => f.name));
  for (const spec of specs) {
    const hit = spec.aliases.find((a) => present.has(a));
    if (hit) index.set(hit, spec.name);
    else if (spec.required) {
      throw new AgroError('required_field_missing', `${layer.name} has no ${spec.name} (looked for ${spec.aliases.join(', ')})`, { layer: layer.name, field: spec.name });
    } else missing.push(spec.name);
  }
  const unknown = layer.fields.map((f) => f.name).filter((n) => !index.has(n));
  return { index, missing, unknown };
}

export function schemaFingerprint(layers: VectorLayer[]): string {
  const names = [...new Set(layers.flatMap((l) => l.fields.map((f) => f.name)))].sort();
  return crypto.createHash('sha256').update(names.join(',')).digest('hex').slice(0, 16);
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

export async function createStagingTable(client: pg.ClientBase, table: string, specs: FieldSpec[]): Promise<void> {
  const cols = specs.map((s) => `${ident(s.name)} text`).join(', ');
  await client.query(
    `CREATE UNLOGGED TABLE ${table} (src_seq bigint NOT NULL, src_layer text NOT NULL, src_srid int NOT NULL, ${cols}, extra jsonb, geom geometry)`,
  );
}

/**
 * Loads every layer into `table` (created here). Required fields are checked on all
 * layers before a single row is written, so a drifted source fails without loading.
 */
export async function stageLayers(client: pg.ClientBase, table: string, layers: VectorLayer[], specs: FieldSpec[]): Promise<StageResult> {
  const mappings = layers.map((l) => mapFields(l, specs));
  await createStagingTable(client, table, specs);
  let seq = 0;
  let replacementChars = 0;
  const columns = ['src_seq', 'src_layer', 'src_srid', ...specs.map((s) => s.name), 'extra', 'geom'];
  function* lines(): Generator<string> {
    for (let li = 0; li < layers.length; li++) {
      const layer = layers[li];
      const { index, unknown } = mappings[li];
      for (const f of readFeatures(layer)) {
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
        row.push(extra ? JSON.stringify(extra) : null, f.wkb ? f.wkb.toString('hex') : null);
        yield copyLine(row);
      }
    }
  }
  const rows = await copyLines(client, `${table} (${columns.map(ident).join(', ')})`, lines());
  const missingOptional = specs.map((s) => s.name).filter((n) => mappings.every((m) => m.missing.includes(n)));
  const unknown = [...new Set(mappings.flatMap((m) => m.unknown))];
  return { rows, missingOptional, unknown, replacementChars, fingerprint: schemaFingerprint(layers) };
}
