// The statements the shape's skeleton runs (src/etl/shape.ts), one typed function each:
// tables come in as `Sql` (tableName), declarations as a Relation, never as free text.
import type pg from 'pg';
import { ident } from '../../db/pool.ts';
import { BUILD_TABLE, sqlLiteral, type Sql } from '../../sql.ts';
import { declaredShape, selectList, type Relation } from '../relation.ts';

/** The staging tables of one load. */
export interface ShapeTables {
  /** Staged source rows (stageLayers): src_seq, src_layer, src_srid, one text column per field, extra, geom. */
  stage: Sql;
  /** Repaired polygons (repairInvalidPolygons): src_seq, geom, status. */
  fix: Sql;
  /** The pipeline's classify output: src_seq, verdict, the key and the final geometry. */
  classified: Sql;
  /** Another staging table of the pipeline's own (e.g. INCRA's fallback keys). */
  aux(name: string): Sql;
}

/** Per-run values the build reads as `v.<name>` (e.g. the mesh year, the SNV version). */
export type RunValues = Record<string, string | number | boolean | null>;

const valuesRow = (v: RunValues): string => {
  const cols = Object.entries(v).map(([k, x]) => `${sqlLiteral(x)} AS ${ident(k)}`);
  return cols.length ? `CROSS JOIN (SELECT ${cols.join(', ')}) v` : '';
};

/** The date literal the build compares dates with. */
export const dateLiteral = (asOf: string): string => {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(asOf)) throw new Error(`as_of is not a date: ${asOf}`);
  return `${sqlLiteral(asOf)}::date`;
};

/**
 * Builds the snapshot table: one typed row per kept row (`kept` AS c) joined to its staged
 * text (s), every column converted as the relation declares, unconverted text kept in extra.
 */
export async function buildSnapshot(
  client: pg.ClientBase,
  a: { rel: Relation; target: Sql; kept: Sql; stage: Sql; joins: Sql; values: RunValues; asOf: string; snapshotId: number },
): Promise<void> {
  await client.query(
    `CREATE TABLE ${a.target} ${BUILD_TABLE} AS
SELECT
${selectList(a.rel, dateLiteral(a.asOf), a.snapshotId)}
FROM ${a.kept} c
JOIN ${a.stage} s ON s.src_seq = c.src_seq
${valuesRow(a.values)}
${a.joins}
${a.rel.orderBy ? `ORDER BY ${a.rel.orderBy}` : ''}`,
  );
}

export interface CheckCounts {
  /** Per checked field: values that did not convert (kept raw). */
  bad: Record<string, number>;
  /** Per date column: known placeholders (NULL, not kept). */
  placeholder: Record<string, number>;
  /** Per date column: dates after the release date (NULL, kept raw). */
  late: Record<string, number>;
}

/** Counts, over the kept rows, the declared conversions that failed, date placeholders and dates after `asOf`. */
export async function countChecks(client: pg.ClientBase, a: { rel: Relation; kept: Sql; stage: Sql; asOf: string }): Promise<CheckCounts> {
  const out: CheckCounts = { bad: {}, placeholder: {}, late: {} };
  const parts: string[] = [];
  const x = (n: string) => `s.${ident(n)}`;
  for (const c of a.rel.checked) parts.push(`count(*) FILTER (WHERE ${c.rule.bad!(x(c.name))})::int AS ${ident(`bad:${c.name}`)}`);
  for (const d of a.rel.dates) {
    if (d.rule.placeholder) parts.push(`count(*) FILTER (WHERE ${d.rule.placeholder(x(d.name))})::int AS ${ident(`placeholder:${d.name}`)}`);
    parts.push(`count(*) FILTER (WHERE (${d.rule.value(x(d.name))})::date > ${dateLiteral(a.asOf)})::int AS ${ident(`late:${d.name}`)}`);
  }
  if (!parts.length) return out;
  const r = await client.query(`SELECT ${parts.join(', ')} FROM ${a.kept} c JOIN ${a.stage} s ON s.src_seq = c.src_seq`);
  for (const [k, n] of Object.entries(r.rows[0] as Record<string, number>)) {
    if (!n) continue;
    const [kind, col] = k.split(':') as [keyof CheckCounts, string];
    out[kind][col] = n;
  }
  return out;
}

/** Staged text cells that are a run of asterisks (a DBF overflow that reached us as text), per field. */
export async function countOverflowedText(client: pg.ClientBase, stage: Sql, fields: readonly string[]): Promise<Record<string, number>> {
  if (!fields.length) return {};
  const r = await client.query(`SELECT ${fields.map((c) => `count(*) FILTER (WHERE etl.is_overflow(${ident(c)}))::int AS ${ident(c)}`).join(', ')} FROM ${stage}`);
  return Object.fromEntries(Object.entries(r.rows[0] as Record<string, number>).filter(([, n]) => n > 0));
}

/** U+FFFD occurrences per staged field (and in the unmapped source columns, `extra`). */
export async function countReplacementChars(client: pg.ClientBase, stage: Sql, fields: readonly string[]): Promise<Record<string, number>> {
  const cols = [...fields, 'extra'];
  const expr = (c: string) => (c === 'extra' ? `etl.replacement_chars(extra::text)` : `etl.replacement_chars(${ident(c)})`);
  const r = await client.query(`SELECT ${cols.map((c) => `coalesce(sum(${expr(c)}), 0)::int AS ${ident(c)}`).join(', ')} FROM ${stage}`);
  return Object.fromEntries(Object.entries(r.rows[0] as Record<string, number>).filter(([, n]) => n > 0));
}

/** A staged input's size on disk (the passes waiting for a connection go heaviest first). */
export async function tableBytes(client: pg.ClientBase, table: Sql): Promise<number> {
  return Number((await client.query(`SELECT pg_total_relation_size($1::regclass) AS bytes`, [table])).rows[0].bytes);
}

/** Drops the `repair` column a repair in place added (the typed table holds the repair status from then on). */
export async function dropRepairColumn(client: pg.ClientBase, stage: Sql): Promise<void> {
  await client.query(`ALTER TABLE ${stage} DROP COLUMN repair`);
}

/** Drops a staged table read no more (during the load, rather than with the run's cleanup). */
export async function dropStagedTable(client: pg.ClientBase, stage: Sql): Promise<void> {
  await client.query(`DROP TABLE ${stage}`);
}

/** A relation's snapshot table with no rows: its template's columns and whatever the template declares. */
export async function createFromTemplate(client: pg.ClientBase, table: Sql, relation: string): Promise<void> {
  await client.query(`CREATE TABLE ${table} (LIKE snap.${ident(`${relation}__template`)} INCLUDING ALL) ${BUILD_TABLE}`);
}

/** The default kept rows: the classified rows whose verdict is 'ok'. */
export const okRows = (classified: Sql): Sql => `(SELECT * FROM ${classified} WHERE verdict = 'ok')` as Sql;

/** The columns of snap.<relation>__template as `name type` pairs (format_type spelling), in order. */
export async function templateShape(client: pg.ClientBase | pg.Pool, relation: string): Promise<string> {
  const r = await client.query(
    `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) AS s
       FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`,
    [`snap.${ident(`${relation}__template`)}`],
  );
  return r.rows[0].s;
}

/**
 * Fails before anything is loaded when a declaration and its template disagree (a migration
 * missing, a column declared out of place or with another type): for loads that fill a table
 * straight from the declaration (COPY) rather than building it and checking it after.
 */
export async function checkDeclaredShape(client: pg.ClientBase | pg.Pool, rel: Relation): Promise<void> {
  const template = await templateShape(client, rel.name);
  const declared = declaredShape(rel);
  if (template !== declared) throw new Error(`snap.${rel.name}__template does not match its declaration:\n  template ${template}\n  declared ${declared}`);
}
