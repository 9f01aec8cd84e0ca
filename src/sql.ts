// Named SQL files: statements too long for a typed helper live in sql/queries/*.sql
// and are loaded by name, so SQL stays in named places.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SQL_DIR = path.join(ROOT_DIR, 'sql');

const cache = new Map<string, string>();

/** Loads sql/<name>.sql (cached). */
export function namedSql(name: string): string {
  let text = cache.get(name);
  if (text === undefined) {
    text = fs.readFileSync(path.join(SQL_DIR, `${name}.sql`), 'utf8');
    cache.set(name, text);
  }
  return text;
}

/** Replaces {{placeholders}} with already-quoted identifiers or literals. */
export function render(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_m, k: string) => {
    if (!(k in vars)) throw new Error(`SQL template: missing {{${k}}}`);
    return vars[k];
  });
}

// ---------- typed SQL (the shape's queries) ----------
// A value that may be spliced into SQL text: a qualified table name, a quoted literal or an
// expression written by the code itself. Branded so that a query function only accepts what
// was made safe on purpose; free-form strings do not type-check.
declare const sqlBrand: unique symbol;
export type Sql = string & { readonly [sqlBrand]: true };

/** SQL the code itself wrote (a declaration's expression, a generated select list). */
export const sqlText = (text: string): Sql => text as Sql;

/**
 * The storage options of every table a load builds (staging, typed, snapshot): autovacuum keeps
 * away until the build is done. A table fresh from COPY or CREATE TABLE AS invites an
 * insert-triggered vacuum, which then holds the lock the load's next DDL needs (DROP COLUMN,
 * CREATE INDEX, DROP TABLE): that statement waits deadlock_timeout (1 s) before the server
 * cancels the vacuum, measured once or twice in a SICAR load, and the vacuum's scan takes one
 * of the two cores meanwhile. Staging tables are dropped never vacuumed; a snapshot's tables get
 * autovacuum back when the load is done (publish.ts resumeAutovacuum). Auto-analyze goes with it,
 * which only ever reached these tables by the launcher's chance visit mid-load: the load analyses
 * the tables whose statistics its plans need (typed passes, fixes, theme hectares, snapshots),
 * and a staging table is planned from its size alone, as before. The same options are
 * written out in sql/queries/*.sql; test/build-tables.test.ts checks every table a load creates.
 */
export const BUILD_TABLE = sqlText('WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false)');

/** A schema-qualified table name as ctx.stagingTable / SnapshotTarget.table return it. */
export function tableName(qualified: string): Sql {
  if (!/^("[^"]+"|[a-z_][a-z0-9_]*)\.("[^"]+"|[a-z_][a-z0-9_]*)$/.test(qualified)) throw new Error(`not a qualified table name: ${qualified}`);
  return qualified as Sql;
}

/** A literal: text quoted, numbers checked finite, null as NULL. */
export function sqlLiteral(v: string | number | boolean | null): Sql {
  if (v === null) return 'NULL' as Sql;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new Error(`not a finite number: ${v}`);
    return String(v) as Sql;
  }
  if (typeof v === 'boolean') return (v ? 'true' : 'false') as Sql;
  return `'${v.replace(/'/g, "''")}'` as Sql;
}

/** A named SQL file (sql/<name>.sql) with its {{placeholders}} filled by typed values only. */
export function fillSql<K extends string>(name: string, vars: Record<K, Sql>): Sql {
  return render(namedSql(name), vars) as Sql;
}
