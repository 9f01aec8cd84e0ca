// SICAR's normalisation on both cores: independent statements run on the load's own
// connection and one more from the pool, each taking the next task when it is free (the
// machine has two cores; the statements are serial or split in two by the caller).
import type pg from 'pg';
import { indexStatements, type SnapshotIndexes } from '../../src/etl/load-steps.ts';

/** A task: statements on the connection it is given. */
export type Task<T> = (client: pg.ClientBase) => Promise<T>;

/**
 * Runs `tasks` in order of the list on two connections (`client` and one from `pool`); the
 * results in the list's order. On a failure the other connection stops after its current
 * task and the first error is thrown. One task runs on `client` alone.
 */
export async function onTwoConnections<T>(pool: pg.Pool, client: pg.ClientBase, tasks: Task<T>[]): Promise<T[]> {
  const out = new Array<T>(tasks.length);
  if (tasks.length <= 1) {
    if (tasks.length) out[0] = await tasks[0](client);
    return out;
  }
  let next = 0;
  let stop = false;
  const worker = async (c: pg.ClientBase) => {
    while (!stop && next < tasks.length) {
      const i = next++;
      try {
        out[i] = await tasks[i](c);
      } catch (e) {
        stop = true;
        throw e;
      }
    }
  };
  const other = await pool.connect();
  try {
    const settled = await Promise.allSettled([worker(client), worker(other)]);
    const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return out;
  } finally {
    other.release();
  }
}

/**
 * The declared indexes of several snapshot tables on two connections, then ANALYZE of each.
 * Each index of a table without a primary key is its own task (two indexes of one table build
 * at once: CREATE INDEX takes a share lock); a table with a primary key keeps its statements
 * in one task, in order (ALTER TABLE … ADD CONSTRAINT locks the table).
 */
export async function indexSnapshotTables(pool: pg.Pool, client: pg.ClientBase, tables: { table: string; indexes: SnapshotIndexes }[]): Promise<void> {
  const tasks: Task<unknown>[] = [];
  for (const { table, indexes } of tables) {
    const statements = indexStatements(table, indexes).map((s) => s.sql);
    if (indexes.primaryKey?.length) tasks.push(async (c) => { for (const sql of statements) await c.query(sql); });
    else for (const sql of statements) tasks.push((c) => c.query(sql));
  }
  await onTwoConnections(pool, client, tasks);
  await onTwoConnections(pool, client, tables.map(({ table }) => (c: pg.ClientBase) => c.query(`ANALYZE ${table}`)));
}
