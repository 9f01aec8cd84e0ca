// One `agro nightly` at a time. Two would race through the same pipelines: each run the other
// holds fails (run_in_progress), both nights exit 1 although everything loaded, and the ledger
// fills with failures an on-call engineer must read. The night holds a session advisory lock
// on a connection of its own; it dies with the process (kill -9 frees it at once).
import { AgroError } from '../errors.ts';
import { connectOrFail, createPool } from '../db/pool.ts';

/** Lock class of "an `agro nightly` is running" (pg_try_advisory_lock(class, 0)). */
const NIGHTLY_LOCK = 727003;

export interface NightlyLock {
  release(): Promise<void>;
}

/** Takes the night; throws nightly_in_progress naming the process that holds it. */
export async function holdNightly(url: string): Promise<NightlyLock> {
  const pool = createPool(url, 1);
  // checked out for the whole night: an idle pooled connection would be closed, and its lock with it
  const client = await connectOrFail(pool).catch(async (e) => {
    await pool.end();
    throw e;
  });
  try {
    const got = (await client.query('SELECT pg_try_advisory_lock($1, 0) AS ok', [NIGHTLY_LOCK])).rows[0].ok;
    if (!got) {
      const holder = (await client.query(
        `SELECT a.application_name AS name, to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI') AS since
           FROM pg_locks l JOIN pg_stat_activity a USING (pid)
          WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.objid = 0 AND l.objsubid = 2 AND l.granted
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [NIGHTLY_LOCK],
      )).rows[0];
      // the session name is `agro <pid>@<host> <token>`: the token means nothing to a person
      const who = holder ? `held by ${String(holder.name).replace(/ [0-9a-f]{8}$/, '')} since ${holder.since} UTC` : 'held by another process';
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
