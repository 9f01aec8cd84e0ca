// The streamed route's statements (src/etl/shape-stream.ts), one typed function each: tables
// come in as `Sql` (tableName), relation names are quoted with ident.
import type pg from 'pg';
import { ident } from '../../db/pool.ts';
import { BUILD_TABLE, sqlText, type Sql } from '../../sql.ts';

/** Creates a relation's snapshot table like its template (in the COPY's transaction: COPY FREEZE needs it). */
export async function createLikeTemplate(client: pg.ClientBase, table: Sql, relation: string): Promise<void> {
  await client.query(`CREATE TABLE ${table} (LIKE snap.${ident(`${relation}__template`)}) ${BUILD_TABLE}`);
}

/** The COPY statement of a table created in the same transaction (FREEZE: no later rewrite of hint bits). */
export const copyFrozen = (table: Sql, columns: readonly string[]): string =>
  `COPY ${table} (${columns.map(ident).join(', ')}) FROM STDIN WITH (FREEZE)`;

/**
 * An index build sorts in memory up to maintenance_work_mem; PostgreSQL's default (64 MB)
 * makes a national trigram GIN build flush and merge many times. Each build gets at least
 * 256 MB for its own transaction (never less than the server gives it).
 */
export async function indexMemoryForTransaction(client: pg.ClientBase): Promise<void> {
  await client.query(`SELECT set_config('maintenance_work_mem', '256MB', true) WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < 256 * 1024 * 1024`);
}

/** ANALYZE of a freshly indexed table. */
export async function analyze(client: pg.ClientBase, table: Sql): Promise<void> {
  await client.query(sqlText(`ANALYZE ${table}`));
}
