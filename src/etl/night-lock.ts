// The night: one `agro nightly` at a time, and never while the scheduler runs a batch. Two
// would race through the same pipelines: each run the other holds fails (run_in_progress),
// both sides report failures although everything loaded, and the ledger fills with failures
// an on-call engineer must read. A nightly holds the night exclusively on a session of its
// own, each job a scheduler runs holds it shared on the session of its job lock (schedulers
// may run different jobs at once): the lock dies with the process (kill -9 frees it at once).
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { connectOrFail, createPool } from '../db/pool.ts';

/** Lock class of the night (pg_try_advisory_lock(class, 0); a scheduled batch takes it shared). */
export const NIGHT_LOCK = 727003;

export interface NightlyLock {
  release(): Promise<void>;
}

interface Holder {
  name: string;
  since: string;
  shared: boolean;
}

/** The sessions holding the night: a nightly (exclusive) or schedulers (shared). */
async function holders(db: pg.ClientBase): Promise<Holder[]> {
  const r = await db.query(
    `SELECT a.application_name AS name, to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS since, l.mode = 'ShareLock' AS shared
       FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.objid = 0 AND l.objsubid = 2 AND l.granted
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY a.backend_start`,
    [NIGHT_LOCK],
  );
  return r.rows;
}

// the session name is `agro <pid>@<host> <token>`: the token means nothing to a person
const person = (name: string) => String(name).replace(/ [0-9a-f]{8}$/, '');

/** The slots the schedulers are running, for a message: `layers (slot 2026-11-25 05:00 UTC)`. */
async function runningSlots(db: pg.ClientBase): Promise<string[]> {
  const r = await db.query(
    `SELECT schedule, to_char(slot AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS slot FROM etl.schedule_slots WHERE status = 'running' ORDER BY slot, schedule`,
  );
  return r.rows.map((x) => `${x.schedule} (slot ${x.slot} UTC)`);
}

/** Takes the night; throws nightly_in_progress naming the nightly or the scheduler that holds it. */
export async function holdNightly(url: string): Promise<NightlyLock> {
  const pool = createPool(url, 1);
  // checked out for the whole night: an idle pooled connection would be closed, and its lock with it
  const client = await connectOrFail(pool).catch(async (e) => {
    await pool.end();
    throw e;
  });
  try {
    const got = (await client.query('SELECT pg_try_advisory_lock($1, 0) AS ok', [NIGHT_LOCK])).rows[0].ok;
    if (!got) {
      const held = await holders(client);
      const schedulers = held.filter((h) => h.shared);
      if (schedulers.length) {
        const slots = await runningSlots(client);
        throw new AgroError('nightly_in_progress', `the scheduler (${[...new Set(schedulers.map((h) => person(h.name)))].join(', ')}) is running a batch${slots.length ? `: ${slots.join(', ')}` : ''}; this one starts nothing (see \`agro schedule --check\`, \`agro runs\`)`);
      }
      const who = `another \`agro nightly\` is running, held by ${held[0] ? `${person(held[0].name)} since ${held[0].since} UTC` : 'another process'}`;
      throw new AgroError('nightly_in_progress', `${who}; this one starts nothing (see \`agro runs\`)`);
    }
  } catch (e) {
    client.release();
    await pool.end();
    throw e;
  }
  return {
    async release() {
      client.release();
      await pool.end();
    },
  };
}

/**
 * A scheduled job's share of the night, on the session that holds its job lock (released
 * with it: no connection more per job). Null when it got it; otherwise who holds the night.
 */
export async function shareNight(client: pg.ClientBase): Promise<string | null> {
  if ((await client.query('SELECT pg_try_advisory_lock_shared($1, 0) AS ok', [NIGHT_LOCK])).rows[0].ok) return null;
  const nightly = (await holders(client)).find((h) => !h.shared);
  return nightly ? `${person(nightly.name)} since ${nightly.since} UTC` : 'another process';
}

export async function unshareNight(client: pg.ClientBase): Promise<void> {
  await client.query('SELECT pg_advisory_unlock_shared($1, 0)', [NIGHT_LOCK]);
}
