// A load on both cores: independent statements run on the load's own connection and one
// more from the pool, each taking the next task when it is free (the machine has two cores;
// the statements are serial or split in two by the caller). The shape's skeleton
// (src/etl/shape-run.ts) types each input on a second connection while the next one is read
// (`overlapOn`), and spreads the builds and the declared indexes over two connections.
import type pg from 'pg';
import { indexStatements, type SnapshotIndexes } from './load-steps.ts';

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
 * The declared indexes of a snapshot table as tasks for two connections: each index of a
 * table without a primary key is its own task (two indexes of one table build at once:
 * CREATE INDEX takes a share lock); a table with a primary key keeps its statements in one
 * task, in order (ALTER TABLE … ADD CONSTRAINT locks the table).
 */
export function indexTasks(table: string, indexes: SnapshotIndexes): { name: string; task: Task<unknown> }[] {
  const statements = indexStatements(table, indexes);
  if (indexes.primaryKey?.length) return statements.length ? [{ name: statements.map((s) => s.name).join('+'), task: async (c) => { for (const s of statements) await c.query(s.sql); } }] : [];
  return statements.map((s) => ({ name: s.name, task: (c) => c.query(s.sql) }));
}

/** The declared indexes of several snapshot tables on two connections (`indexTasks`), then ANALYZE of each. */
export async function indexSnapshotTables(pool: pg.Pool, client: pg.ClientBase, tables: { table: string; indexes: SnapshotIndexes }[]): Promise<void> {
  await onTwoConnections(pool, client, tables.flatMap(({ table, indexes }) => indexTasks(table, indexes).map((t) => t.task)));
  await onTwoConnections(pool, client, tables.map(({ table }) => (c: pg.ClientBase) => c.query(`ANALYZE ${table}`)));
}

/** Work handed over while its inputs are still being produced (see `overlapOn`). */
export interface Overlap<I, R> {
  /** Hands an item over: a free connection takes it (the heaviest waiting first). */
  push(item: I, weight: number): void;
  /** Throws the first failure of a task so far: the producer calls it between its own steps. */
  check(): void;
  /** After the last push: `client` takes what is left too; the results in the order pushed. Throws the first failure. */
  finish(): Promise<R[]>;
  /** On the producer's failure (or to be safe): no new task starts, the one under way ends, the connection goes back. Never throws. */
  abandon(): Promise<void>;
  /** Milliseconds (from `overlapOn`) at which each pushed item's task started and ended, in the order pushed. */
  spans: { start: number; end: number }[];
}

/**
 * Starts working through items on one more connection from `pool` while the caller
 * produces them on `client`: each pushed item is worked on as soon as that connection is
 * free, so the producer and the work share the two cores. `finish` lets `client` help with
 * what is left. `work` gets `live`, which throws once a task has failed, for tasks of
 * several statements to stop between them. A failed task stops the others after their
 * current statement; the first failure is what `check`/`finish` throw. With `second: false`
 * no connection is taken: the items wait for `finish`, which works through them on `client`.
 */
export async function overlapOn<I, R>(
  pool: pg.Pool,
  client: pg.ClientBase,
  work: (c: pg.ClientBase, item: I, live: () => void) => Promise<R>,
  o: { second?: boolean } = {},
): Promise<Overlap<I, R>> {
  const t0 = performance.now();
  const items: { item: I; weight: number; taken: boolean }[] = [];
  const out: R[] = [];
  const spans: { start: number; end: number }[] = [];
  let failure: { error: unknown } | null = null;
  let closed = false;
  let wake: () => void = () => {};
  const live = () => {
    if (failure) throw failure.error;
  };
  const next = () => {
    let best = -1;
    for (let i = 0; i < items.length; i++) if (!items[i].taken && (best < 0 || items[i].weight > items[best].weight)) best = i;
    return best;
  };
  const worker = async (c: pg.ClientBase) => {
    for (;;) {
      if (failure) return;
      const i = next();
      if (i < 0) {
        if (closed) return;
        await new Promise<void>((r) => (wake = r));
        continue;
      }
      items[i].taken = true;
      spans[i] = { start: Math.round(performance.now() - t0), end: -1 };
      try {
        out[i] = await work(c, items[i].item, live);
      } catch (e) {
        failure ??= { error: e };
        return;
      } finally {
        spans[i].end = Math.round(performance.now() - t0);
      }
    }
  };
  const other = o.second === false ? null : await pool.connect();
  const running = other ? worker(other) : Promise.resolve();
  let released = false;
  const settle = async () => {
    closed = true;
    wake();
    await running;
    if (!released) other?.release();
    released = true;
  };
  return {
    spans,
    push(item, weight) {
      items.push({ item, weight, taken: false });
      wake();
    },
    check: live,
    async finish() {
      closed = true;
      wake();
      await Promise.all([worker(client), running]);
      await settle();
      live();
      return out;
    },
    async abandon() {
      failure ??= { error: new Error('abandoned') };
      await settle();
    },
  };
}

/** A promise settled from outside (a rejection is thrown to whoever waits on it, or ignored). */
export function settledLater(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => {});
  return { promise, resolve, reject };
}
