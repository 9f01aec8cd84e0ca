// The locks a run holds for its whole life, on one session of its own: "this run is
// alive" (class RUN_ALIVE_LOCK, the run id) and "this dataset and scope is being loaded"
// (hashtext of run:<pipeline>:<scope>). A running run whose alive lock is free is dead
// (cleanupDeadRuns). Session locks vanish when the database restarts, while the process
// may still be downloading: without them a later run would declare it dead, clean up
// after it and load the same scope into the same raw store at the same time. So a lost
// session is replaced at once (every 250 ms until the database answers) and the locks are
// taken again; if another run got there first, or declared this one dead meanwhile, the
// run stops at its next stage with a clear error.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { connectOrFail, sessionName } from '../db/pool.ts';

/** Lock class for "this run is alive" (pg_advisory_lock(class, run_id)). */
export const RUN_ALIVE_LOCK = 727001;

/**
 * SQL: some session of this database holds the two-key advisory lock (`classSql`, `keySql`),
 * `keySql` a bigint expression (pg_locks shows the second key as an oid: hashtext's negative
 * values as their unsigned 32 bits). How `agro runs` and `agro doctor` tell a dead run or a
 * dead scheduler's slot.
 */
export const advisoryHeld = (classSql: string, keySql: string): string =>
  `EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = ${classSql} AND l.objsubid = 2 AND l.granted
             AND l.objid::bigint = (${keySql}) AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`;

/** How long a stage boundary waits for the database to come back before the run fails. */
const REACQUIRE_WAIT_MS = 60_000;
const RETRY_MS = 250;

const scopeKey = (pipeline: string, scope: string) => `run:${pipeline}:${scope}`;

export class RunLocks {
  private client: pg.PoolClient | null;
  private reacquiring: Promise<void> | null = null;
  private failure: AgroError | null = null;
  private closed = false;

  private constructor(
    private readonly pool: pg.Pool,
    readonly runId: number,
    private readonly key: string,
    private readonly log: Logger,
    client: pg.PoolClient,
  ) {
    this.client = client;
    this.watch(client);
  }

  /**
   * Inserts the run (`insert`, on the lock session) and takes its alive lock in the same
   * transaction: no other session ever sees the run `running` without its lock (a
   * concurrent cleanup would otherwise take a starting run for a dead one).
   */
  static async begin(pool: pg.Pool, log: Logger, pipeline: string, scope: string, insert: (c: pg.ClientBase) => Promise<number>): Promise<RunLocks> {
    const client = await connectOrFail(pool);
    try {
      await client.query('BEGIN');
      const runId = await insert(client);
      await client.query('SELECT pg_advisory_lock($1, $2)', [RUN_ALIVE_LOCK, runId]);
      await client.query('COMMIT');
      return new RunLocks(pool, runId, scopeKey(pipeline, scope), log, client);
    } catch (e) {
      await client.query('ROLLBACK').catch(() => {});
      client.release(true);
      throw e;
    }
  }

  /** Takes the scope lock; false when another run of the same dataset and scope holds it. */
  async takeScope(): Promise<boolean> {
    if (!this.client) await this.check();
    return (await this.client!.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [this.key])).rows[0].ok;
  }

  private unwatch: (() => void) | null = null;

  /** Listens for the session's end (pool clients are reused: the listeners go when the run lets it go). */
  private watch(client: pg.PoolClient) {
    const lost = () => {
      if (this.client === client) this.lost(client);
    };
    client.on('error', lost);
    client.on('end', lost);
    this.unwatch = () => {
      client.off('error', lost);
      client.off('end', lost);
    };
  }

  private lost(client: pg.PoolClient) {
    this.client = null;
    this.unwatch?.();
    client.release(true);
    if (this.closed || this.reacquiring || this.failure) return;
    this.log.warn({ run_id: this.runId }, "the database connection holding this run's locks was lost; taking them again");
    this.reacquiring = this.reacquire().finally(() => (this.reacquiring = null));
  }

  private async reacquire(): Promise<void> {
    while (!this.closed) {
      let c: pg.PoolClient;
      try {
        c = await this.pool.connect();
      } catch {
        await sleep(RETRY_MS);
        continue;
      }
      try {
        const alive = (await c.query('SELECT pg_try_advisory_lock($1, $2) AS ok', [RUN_ALIVE_LOCK, this.runId])).rows[0].ok;
        const scope = alive && (await c.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [this.key])).rows[0].ok;
        const status = scope ? (await c.query('SELECT status FROM etl.runs WHERE run_id = $1', [this.runId])).rows[0]?.status : null;
        if (status !== 'running') {
          this.failure = new AgroError(
            'database_unavailable',
            !alive || status
              ? 'the database restarted during the run and a later run declared this one dead and cleaned up after it; nothing was published'
              : 'the database restarted during the run and another run of this dataset started meanwhile; this run stops, nothing was published',
          );
          await c.query('SELECT pg_advisory_unlock_all()').catch(() => {});
          c.release();
          return;
        }
        if (this.closed) {
          await c.query('SELECT pg_advisory_unlock_all()').catch(() => {});
          c.release();
          return;
        }
        this.client = c;
        this.watch(c);
        this.log.warn({ run_id: this.runId }, "the database came back; this run's locks are held again");
        return;
      } catch {
        c.release(true);
        await sleep(RETRY_MS);
      }
    }
  }

  /**
   * Before each stage and before publishing: throws when the run lost its locks to another
   * run, or when the database stays away; a lost session noticed here is replaced first.
   */
  async check(): Promise<void> {
    if (this.client && !this.failure) {
      const c = this.client;
      await c.query('SELECT 1').catch(() => {
        if (this.client === c) this.lost(c);
      });
    }
    if (this.reacquiring) {
      let timer: NodeJS.Timeout | undefined;
      const waited = await Promise.race([
        this.reacquiring.then(() => true),
        new Promise<false>((r) => (timer = setTimeout(() => r(false), REACQUIRE_WAIT_MS))),
      ]);
      clearTimeout(timer);
      if (!waited) throw new AgroError('database_unavailable', `the database has been unreachable for ${REACQUIRE_WAIT_MS / 1000} s during the run`);
    }
    if (this.failure) throw this.failure;
    if (!this.client) throw new AgroError('database_unavailable', "this run's locks could not be taken again");
  }

  /** Releases both locks (and the session, destroyed when it is broken). */
  async release(): Promise<void> {
    this.closed = true;
    const c = this.client;
    this.client = null;
    if (!c) return;
    this.unwatch?.();
    const ok = await c.query('SELECT pg_advisory_unlock_all()').then(() => true, () => false);
    c.release(!ok);
  }
}

/**
 * Ends what a dead run's process left running on the server (a killed client's statement
 * runs on until it would answer, then commits: a part table created after the cleanup
 * would stay behind) and waits, bounded, until those sessions are gone.
 */
export async function endSessionsOf(db: pg.ClientBase, run: { session: string | null; pid: number | null; host: string | null }): Promise<void> {
  // The session name the run recorded (pid, host and its process's token); a run from before
  // migration 0086 has none, and its process's sessions were named by pid and host alone.
  const name = run.session ?? (run.pid !== null && run.host !== null ? Buffer.from(`agro ${run.pid}@${run.host}`).subarray(0, 63).toString() : null);
  if (name === null) return;
  if (name === sessionName()) return; // this process: its runs are not dead, whatever their locks say
  const q = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`;
  for (let i = 0; i < 40; i++) {
    // A role that may not end them (another role's sessions): the cleanup goes on without.
    const left = await db.query(q, [name]).then((r) => r.rowCount ?? 0, () => 0);
    if (left === 0) return;
    await sleep(i === 0 ? 50 : RETRY_MS);
  }
}
