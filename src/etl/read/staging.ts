// The staging table every vector reader writes (the streaming shapefile reader, the GDAL
// reader, the WFS pages): one text column per canonical field (mapped from any known
// spelling), unknown columns in `extra`, the geometry as WKB with the layer's SRID kept
// beside it. All typing, repair and reprojection happen afterwards in SQL.
import crypto from 'node:crypto';
import type pg from 'pg';
import { AgroError } from '../../errors.ts';
import { ident } from '../../db/pool.ts';
import { BUILD_TABLE } from '../../sql.ts';
import { matchHeader } from '../header-match.ts';

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

/** What the mapping needs of a layer: its name and its (lower-cased) field names. */
export interface NamedFields {
  name: string;
  fields: { name: string }[];
}

/** Where a source lacks required columns, as the error (and the gate rule made of it) records it. */
export interface MissingWhere {
  file?: string;
  layer?: string;
  encoding?: string;
  delimiter?: string;
}

/**
 * The error of a source without required columns: the canonical fields, the spellings looked
 * for and where. The run turns it into the gate rule `required_field_missing` (run.ts).
 */
export function requiredFieldMissing(detail: string, missing: FieldSpec[], where: MissingWhere): AgroError {
  return new AgroError('required_field_missing', detail, {
    ...where, fields: missing.map((s) => s.name), looked_for: Object.fromEntries(missing.map((s) => [s.name, s.aliases])),
  });
}

/** Maps a layer's field names to canonical names; throws, naming every one, when required fields are absent. */
export function mapFields(layer: NamedFields, specs: FieldSpec[]): { index: Map<string, string>; missing: string[]; unknown: string[] } {
  const index = new Map<string, string>();
  const missing: string[] = [];
  const absent: FieldSpec[] = [];
  const names = layer.fields.map((f) => f.name);
  const found = matchHeader(names, specs);
  for (const [k, spec] of specs.entries()) {
    const hit = found[k] === null ? undefined : names[found[k]!];
    if (hit !== undefined) index.set(hit, spec.name);
    else if (spec.required) absent.push(spec);
    else missing.push(spec.name);
  }
  if (absent.length) {
    const each = absent.map((s) => `no ${s.name} (looked for ${s.aliases.join(', ')})`).join(', ');
    throw requiredFieldMissing(`${layer.name} has ${each}`, absent, { layer: layer.name });
  }
  const unknown = layer.fields.map((f) => f.name).filter((n) => !index.has(n));
  return { index, missing, unknown };
}

export function schemaFingerprint(layers: NamedFields[]): string {
  const names = [...new Set(layers.flatMap((l) => l.fields.map((f) => f.name)))].sort();
  return crypto.createHash('sha256').update(names.join(',')).digest('hex').slice(0, 16);
}

export async function createStagingTable(client: pg.ClientBase, table: string, specs: FieldSpec[]): Promise<void> {
  const cols = specs.map((s) => `${ident(s.name)} text`).join(', ');
  await client.query(
    `CREATE UNLOGGED TABLE ${table} (src_seq bigint NOT NULL, src_layer text NOT NULL, src_srid int NOT NULL, ${cols}, extra jsonb, geom geometry) ${BUILD_TABLE}`,
  );
}

/** The staging table's columns, in COPY order. */
export const stagingColumns = (specs: FieldSpec[]): string[] => ['src_seq', 'src_layer', 'src_srid', ...specs.map((s) => s.name), 'extra', 'geom'];

/** Canonical fields that no layer carried. */
export const missingEverywhere = (specs: FieldSpec[], mappings: { missing: string[] }[]): string[] =>
  specs.map((s) => s.name).filter((n) => mappings.every((m) => m.missing.includes(n)));
