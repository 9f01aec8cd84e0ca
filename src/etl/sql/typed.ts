// One typed pass (the shape of zarc_typed.sql): a pipeline's classify types each staged row
// once, computing the declared columns together with its verdict and the flags its facts
// count, into t.classified; the build then reads t.classified alone (no join back to the
// staged text) and the checks are counted from the flags (no re-scan of the staged text).
// For ShapeSpec.typed; the columns' SQL reads the staged row `s` and the pipeline's own
// per-row values `c`, as in the two-table build.
import type pg from 'pg';
import { ident } from '../../db/pool.ts';
import { BUILD_TABLE, sqlLiteral, sqlText, type Sql } from '../../sql.ts';
import { selectList, type Relation } from '../relation.ts';
import { dateLiteral, type CheckCounts } from './shape.ts';

const flag = (kind: keyof CheckCounts, name: string) => ident(`${kind}:${name}`);
const OVERFLOWS = ident('overflow:fields');

/**
 * The select list of a typed pass: every declared column, typed (as the build would), then one
 * boolean per declared check (`"bad:<name>"`, `"placeholder:<name>"`, `"late:<name>"`) and the
 * staged fields whose text is a run of asterisks (`"overflow:fields"`, NULL for none).
 */
export function typedColumns(rel: Relation, asOf: string, snapshotId: number): Sql {
  // An empty cell is no value, not a placeholder: a CSV has '' wherever a shapefile has NULL.
  const x = (n: string) => `nullif(btrim(s.${ident(n)}), '')`;
  const flags: string[] = [];
  for (const c of rel.checked) flags.push(`coalesce(${c.rule.bad!(x(c.name))}, false) AS ${flag('bad', c.name)}`);
  for (const d of rel.dates) {
    if (d.rule.placeholder) flags.push(`coalesce(${d.rule.placeholder(x(d.name))}, false) AS ${flag('placeholder', d.name)}`);
    flags.push(`coalesce((${d.rule.value(x(d.name))})::date > ${dateLiteral(asOf)}, false) AS ${flag('late', d.name)}`);
  }
  const overflowed = rel.staging.map((f) => `CASE WHEN etl.is_overflow(s.${ident(f.name)}) THEN ${sqlLiteral(f.name)} END`);
  flags.push(`nullif(array_remove(ARRAY[${overflowed.join(', ')}]::text[], NULL), '{}') AS ${OVERFLOWS}`);
  return sqlText(`${selectList(rel, dateLiteral(asOf), snapshotId)},\n       ${flags.join(',\n       ')}`);
}

/**
 * What a typed row's example shows in the report: its declared values, personal data and the
 * snapshot id left out; and `extra` too when the relation holds personal data (an unknown
 * column of a new export, a responsible person's name, would be shown as written).
 */
export const typedExampleColumns = (rel: Relation): string[] =>
  rel.columns.filter((c) => c.role !== 'snapshot_id' && !rel.personal.includes(c.name) && !(c.role === 'extra' && rel.personal.length > 0)).map((c) => c.name);

/**
 * Builds a relation's snapshot from typed rows (`s`, with whatever the pipeline joins to them):
 * the declaration's select list (each column's SQL over the typed row), nothing joined back to
 * the staged text. For a typed pass that computes its own columns (SICAR's), not the declared ones.
 */
export async function buildSelected(client: pg.ClientBase, a: { rel: Relation; target: Sql; from: Sql; asOf: string; snapshotId: number }): Promise<void> {
  await client.query(`CREATE TABLE ${a.target} ${BUILD_TABLE} AS\nSELECT\n${selectList(a.rel, dateLiteral(a.asOf), a.snapshotId)}\nFROM ${a.from}`);
}

/** Builds the snapshot from the kept typed rows alone. */
export async function buildFromTyped(client: pg.ClientBase, a: { rel: Relation; target: Sql; kept: Sql }): Promise<void> {
  const cols = a.rel.columns.map((c) => `c.${ident(c.name)}`).join(', ');
  await client.query(`CREATE TABLE ${a.target} ${BUILD_TABLE} AS SELECT ${cols} FROM ${a.kept} c${a.rel.orderBy ? ` ORDER BY ${a.rel.orderBy}` : ''}`);
}

/**
 * Overflowed text cells per staged field, over every typed row (as a scan of the staged text would
 * count them); null when the typed pass is a pipeline's own SQL that does not list them.
 */
export async function countTypedOverflows(client: pg.ClientBase, classified: Sql): Promise<Record<string, number> | null> {
  const has = await client.query(`SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'overflow:fields' AND NOT attisdropped`, [String(classified)]);
  if (!has.rowCount) return null;
  const r = await client.query(`SELECT f, count(*)::int AS n FROM ${classified} c CROSS JOIN LATERAL unnest(c.${OVERFLOWS}) f GROUP BY f ORDER BY f`);
  return Object.fromEntries(r.rows.map((x) => [x.f, x.n]));
}

/** The declared checks over the kept typed rows, from their flags. */
export async function countTypedChecks(client: pg.ClientBase, a: { rel: Relation; kept: Sql }): Promise<CheckCounts> {
  const out: CheckCounts = { bad: {}, placeholder: {}, late: {} };
  const names: [keyof CheckCounts, string][] = [
    ...a.rel.checked.map((c): [keyof CheckCounts, string] => ['bad', c.name]),
    ...a.rel.dates.flatMap((d): [keyof CheckCounts, string][] => [...(d.rule.placeholder ? [['placeholder', d.name] as [keyof CheckCounts, string]] : []), ['late', d.name]]),
  ];
  if (!names.length) return out;
  const r = await client.query(`SELECT ${names.map(([k, n]) => `count(*) FILTER (WHERE c.${flag(k, n)})::int AS ${flag(k, n)}`).join(', ')} FROM ${a.kept} c`);
  for (const [k, n] of names) {
    const v = (r.rows[0] as Record<string, number>)[`${k}:${n}`];
    if (v) out[k][n] = v;
  }
  return out;
}
