// Numbered, append-only migrations from sql/NNNN_name.sql. Each runs in its own
// transaction; a session advisory lock makes concurrent `agro migrate` calls safe
// (the second waits, then finds nothing left to do).
//
// An upgrade runs while the API serves and runs load: a migration that replaces a view or
// alters a table waits for the statements using it, and a waiting AccessExclusive request
// queues every new reader behind it (the API hung until the longest statement ended). So a
// migration waits for locks with a short lock_timeout; on timeout its transaction is rolled
// back, it says so, and it is tried again with backoff, for a bounded total wait.
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { SQL_DIR } from '../sql.ts';

const LOCK_KEY = 'agro.migrate';

export interface Migration {
  id: number;
  name: string;
  file: string;
}

export function listMigrations(dir = SQL_DIR): Migration[] {
  return fs
    .readdirSync(dir)
    .map((f) => /^(\d{4})_(.+)\.sql$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ id: Number(m[1]), name: m[2], file: path.join(dir, m[0]) }))
    .sort((a, b) => a.id - b.id);
}

export interface MigrateOptions {
  /** How long one attempt waits for a lock. */
  lockTimeoutMs?: number;
  /** How long a migration may keep waiting in total before migrate gives up. */
  maxWaitMs?: number;
  /** Told each time a migration waits (the CLI logs it). */
  onWait?: (message: string) => void;
}

const isLockTimeout = (e: unknown) => (e as { code?: string }).code === '55P03';

/** For a message: the runs in progress (whose statements a migration may be waiting for). */
async function runsInProgress(client: pg.ClientBase): Promise<string> {
  const r = await client
    .query(`SELECT run_id, pipeline, scope FROM etl.runs WHERE status = 'running' ORDER BY run_id`)
    .catch(() => ({ rows: [] as { run_id: number; pipeline: string; scope: string }[] }));
  return r.rows.length ? `; runs in progress: ${r.rows.map((x) => `${x.pipeline}${x.scope ? ' ' + x.scope : ''} (run ${x.run_id})`).join(', ')}` : '';
}

/** One migration in its own transaction, each statement waiting at most lockTimeoutMs for a lock. */
async function applyOne(client: pg.ClientBase, m: Migration, lockTimeoutMs: number): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`);
    await client.query(fs.readFileSync(m.file, 'utf8'));
    await client.query('INSERT INTO agro_meta.migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK');
    throw e;
  }
}

export async function migrate(pool: pg.Pool, o: MigrateOptions = {}): Promise<{ applied: string[] }> {
  const lockTimeoutMs = o.lockTimeoutMs ?? 250;
  const maxWaitMs = o.maxWaitMs ?? 10 * 60_000;
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    if (!(await client.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [LOCK_KEY])).rows[0].ok) {
      o.onWait?.('another agro migrate is applying migrations; waiting for it');
      await client.query('SELECT pg_advisory_lock(hashtext($1))', [LOCK_KEY]);
    }
    await client.query(`CREATE SCHEMA IF NOT EXISTS agro_meta;
      CREATE TABLE IF NOT EXISTS agro_meta.migrations (id int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await client.query('SELECT id FROM agro_meta.migrations')).rows.map((r) => r.id as number));
    for (const m of listMigrations()) {
      if (done.has(m.id)) continue;
      const name = `${String(m.id).padStart(4, '0')}_${m.name}`;
      let waited = 0;
      let backoff = Math.max(50, lockTimeoutMs);
      for (;;) {
        const t0 = Date.now();
        try {
          await applyOne(client, m, lockTimeoutMs);
          break;
        } catch (e) {
          if (!isLockTimeout(e)) throw new Error(`migration ${m.id}_${m.name} failed: ${(e as Error).message}`);
          waited += Date.now() - t0;
          const busy = `migration ${name}: what it changes is in use by other sessions${await runsInProgress(client)}`;
          if (waited + backoff > maxWaitMs) {
            throw new AgroError('migration_waiting', `${busy}; gave up after ${Math.round(waited / 1000)} s of waiting (nothing of it was applied): run agro migrate again when they end`);
          }
          o.onWait?.(`${busy}; trying again (readers are not held meanwhile)`);
          await sleep(backoff);
          waited += backoff;
          backoff = Math.min(backoff * 2, 5_000);
        }
      }
      applied.push(name);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [LOCK_KEY]).catch(() => {});
    client.release();
  }
  return { applied };
}
