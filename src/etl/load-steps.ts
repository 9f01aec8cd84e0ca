// SQL steps every load repeats around its own normalisation: counting verdicts and empty
// values, checking a freshly built snapshot table against its template, indexing it.
import type pg from 'pg';
import { ident } from '../db/pool.ts';
import { assertSameShape } from './repair.ts';
import { VERDICT_EXAMPLES } from './quality.ts';
import { verdictExamples } from './verdict-examples.ts';

/**
 * Rows per verdict of a classified staging table (columns `verdict`); `shown`: the only columns
 * its examples show (else all but the engine's own), or false for none (personal data).
 */
export async function countVerdicts(client: pg.ClientBase, classified: string, stage?: string, shown?: readonly string[] | false): Promise<Record<string, number>> {
  const r = await client.query(`SELECT verdict, count(*)::int AS n FROM ${classified} GROUP BY verdict`);
  const counts: Record<string, number> = Object.fromEntries(r.rows.map((x) => [x.verdict, x.n]));
  // Personal data (a holder extract): rejected rows are referred to by record number only, never shown.
  if (shown === false) return counts;
  // Examples ride along (not enumerable: counts stay plain numbers) to addVerdicts and the report.
  Object.defineProperty(counts, VERDICT_EXAMPLES, { value: await verdictExamples(client, classified, { stage, shown, counts }), enumerable: false });
  return counts;
}

/** NULLs per column of a table (facts.fields.empty), in the order of `columns`. */
export async function countNulls(client: pg.ClientBase, table: string, columns: readonly string[]): Promise<Record<string, number>> {
  const r = await client.query(`SELECT ${columns.map((c) => `count(*) FILTER (WHERE ${ident(c)} IS NULL)::int AS ${ident(c)}`).join(', ')} FROM ${table}`);
  return r.rows[0];
}

/** Fails unless a snapshot table just built has exactly the columns of snap.<relation>__template; returns its row count. */
export async function checkSnapshotTable(client: pg.ClientBase, relation: string, table: string): Promise<number> {
  await assertSameShape(client, `snap.${relation}__template`, table);
  return Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
}

/** The indexes of a snapshot table, each named `<table>_<suffix>`. */
export interface SnapshotIndexes {
  /** Primary key `<table>_pk` (its columns are set NOT NULL first). */
  primaryKey?: string[];
  /** GiST indexes on geometry columns, named after the column. */
  gist?: string[];
  /** GIN indexes on array columns, named after the column. */
  gin?: string[];
  /** btree indexes: on one column, named after it, or `{ name, columns }`. */
  btree?: (string | { name: string; columns: string[] })[];
  /** Trigram GIN indexes (pg_trgm) over an expression, e.g. `{ name: 'razao_trgm', on: 'etl.cnpj_busca(razao_social)' }`. */
  trigram?: { name: string; on: string }[];
}

/** The CREATE INDEX statements of the declared indexes (primary key, GiST, GIN, btree, trigram, in that order), each named `<table>_<suffix>`. */
export function indexStatements(table: string, ix: SnapshotIndexes): { name: string; sql: string }[] {
  const base = table.replace(/^snap\."?|"$/g, '');
  const name = (suffix: string) => ident(`${base}_${suffix}`);
  const cols = (c: string[]) => c.map(ident).join(', ');
  const out: { name: string; sql: string }[] = [];
  if (ix.primaryKey?.length) {
    const notNull = ix.primaryKey.map((c) => `ALTER COLUMN ${ident(c)} SET NOT NULL, `).join('');
    out.push({ name: 'pk', sql: `ALTER TABLE ${table} ${notNull}ADD CONSTRAINT ${name('pk')} PRIMARY KEY (${cols(ix.primaryKey)})` });
  }
  for (const c of ix.gist ?? []) out.push({ name: c, sql: `CREATE INDEX ${name(c)} ON ${table} USING gist (${ident(c)})` });
  for (const c of ix.gin ?? []) out.push({ name: c, sql: `CREATE INDEX ${name(c)} ON ${table} USING gin (${ident(c)})` });
  for (const b of ix.btree ?? []) {
    const { name: suffix, columns } = typeof b === 'string' ? { name: b, columns: [b] } : b;
    out.push({ name: suffix, sql: `CREATE INDEX ${name(suffix)} ON ${table} (${cols(columns)})` });
  }
  for (const t of ix.trigram ?? []) out.push({ name: t.name, sql: `CREATE INDEX ${name(t.name)} ON ${table} USING gin (${t.on} gin_trgm_ops)` });
  return out;
}
