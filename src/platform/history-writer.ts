// Query history rows written in batches, off the request path: an answer puts its row in this
// process's buffer, and one multi-row INSERT writes the buffer every FLUSH_MS or as soon as it
// holds BATCH_ROWS rows, and on close (SIGTERM). The counters that must be exact (rate limit,
// quota) are never here: they are database rows updated at admission (./limits.ts).
//
// What this trades: a history row reaches the table up to FLUSH_MS after its answer (readers of
// the history in this process flush first, so a caller sees its own calls at once), and a
// crash of the process (kill -9, power loss) loses the rows still in the buffer — at most
// FLUSH_MS of history, never a count. A database outage keeps the rows and retries, up to
// MAX_BUFFERED rows; beyond that the oldest are dropped, logged and counted (`dropped`).
import type pg from 'pg';
import type { Logger } from '../log.ts';

export interface HistoryEntry {
  id: string;
  keyId: string;
  method: string;
  path: string;
  status: number;
  billable: boolean;
  lgpdBase: string | null;
  createdAt: Date;
}

const FLUSH_MS = 200;
const BATCH_ROWS = 500;
const MAX_BUFFERED = 100_000;

type Db = pg.Pool | pg.ClientBase;

/** One multi-row INSERT of history rows, in order (their `seq` follows the array order). */
export async function insertHistoryRows(db: Db, rows: readonly HistoryEntry[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query({
    name: 'platform_history_batch',
    text: `INSERT INTO platform.requests (id, key_id, method, path, status, billable, lgpd_base, created_at)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::smallint[], $6::boolean[], $7::text[], $8::timestamptz[])`,
    values: [
      rows.map((r) => r.id), rows.map((r) => r.keyId), rows.map((r) => r.method), rows.map((r) => r.path),
      rows.map((r) => r.status), rows.map((r) => r.billable), rows.map((r) => r.lgpdBase), rows.map((r) => r.createdAt),
    ],
  });
}

/** A data exception or constraint violation (SQLSTATE class 22, 23): that row, not an outage. */
const isRowError = (e: unknown) => /^2[23]/.test(String((e as { code?: unknown }).code ?? ''));

/** The writer of each API pool in this process, so that any reader of the history can flush it first. */
const writers = new WeakMap<object, HistoryWriter>();

export class HistoryWriter {
  #buffer: HistoryEntry[] = [];
  #timer: NodeJS.Timeout | null = null;
  /** The flush under way: flushes run one at a time, so rows reach the table in answer order. */
  #flushing: Promise<void> = Promise.resolve();
  #dropped = 0;
  #refused = 0;
  #failing = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
  ) {
    writers.set(pool, this);
  }

  /** Rows waiting in the buffer. */
  get buffered(): number {
    return this.#buffer.length;
  }

  /** Rows dropped because the buffer was full while the database could not be written. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Rows the database refused (a data or constraint error on that row alone): dropped, logged. */
  get refused(): number {
    return this.#refused;
  }

  push(row: HistoryEntry): void {
    this.#buffer.push(row);
    if (this.#buffer.length > MAX_BUFFERED) {
      const n = this.#buffer.length - MAX_BUFFERED;
      this.#buffer.splice(0, n);
      this.#dropped += n;
      this.log.error({ dropped: n, total_dropped: this.#dropped }, 'history buffer full: oldest rows dropped');
    }
    if (this.#buffer.length >= BATCH_ROWS) void this.flush();
    else this.#timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Writes every row buffered so far; resolves when they are in the table (or the write failed and they wait for the next flush). */
  flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  async #write(): Promise<void> {
    // Taken under the chain, so a flush never writes rows a later flush also writes.
    while (this.#buffer.length > 0) {
      const batch = this.#buffer.slice(0, BATCH_ROWS);
      const droppedBefore = this.#dropped;
      let done = batch.length;
      let failure: unknown = null;
      try {
        await insertHistoryRows(this.pool, batch);
      } catch (err) {
        if (isRowError(err)) ({ done, failure } = await this.#writeEach(batch));
        else [done, failure] = [0, err];
      }
      // Pushes append; an overflow meanwhile dropped from the front, i.e. from this batch first.
      this.#buffer.splice(0, Math.max(0, done - (this.#dropped - droppedBefore)));
      if (failure) {
        if (!this.#failing) this.log.error({ err: failure, buffered: this.#buffer.length }, 'cannot write the query history; keeping the rows and retrying');
        this.#failing = true;
        this.#timer ??= setTimeout(() => void this.flush(), 5 * FLUSH_MS);
        return;
      }
      this.#failing = false;
    }
  }

  /**
   * A batch refused for one of its rows (a value the table cannot hold): row by row, so that
   * one bad row costs only itself, never the rows of every other request after it. Stops at
   * an outage; `done` counts the rows written or refused before it.
   */
  async #writeEach(batch: readonly HistoryEntry[]): Promise<{ done: number; failure: unknown }> {
    for (let i = 0; i < batch.length; i++) {
      try {
        await insertHistoryRows(this.pool, [batch[i]]);
      } catch (err) {
        if (!isRowError(err)) return { done: i, failure: err };
        this.#refused++;
        this.log.error({ err, request_id: batch[i].id }, 'query history row refused by the database: dropped');
      }
    }
    return { done: batch.length, failure: null };
  }

  /** Final flush (server close). */
  async stop(): Promise<void> {
    await this.flush();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#buffer.length > 0) this.log.error({ lost: this.#buffer.length }, 'query history rows not written at close (database unreachable)');
    if (writers.get(this.pool) === this) writers.delete(this.pool);
  }
}

/** Flushes this process's pending history rows of the pool, if it has a writer (readers call it first). */
export async function flushHistory(db: Db): Promise<void> {
  await writers.get(db)?.flush();
}
