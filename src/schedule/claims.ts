// Every statement of the scheduler on etl.schedules / etl.schedule_slots, and its locks.
import type pg from 'pg';
import { maskCpfsInText } from '../privacy.ts';
import { shareNight, unshareNight } from '../etl/night-lock.ts';
import { advisoryHeld } from '../etl/run-locks.ts';

type Db = pg.Pool | pg.ClientBase;

export type SlotStatus = 'running' | 'done' | 'failed' | 'interrupted' | 'skipped';

export interface ScheduleRow {
  schedule: string;
  last_slot: Date | null;
  /** First time this schedule was seen (no catch-up for a schedule that never ran). */
  inserted: boolean;
}

/** Registers a schedule (or updates its cron); the returned last_slot drives the catch-up. */
export async function registerSchedule(db: Db, schedule: string, cron: string, timezone: string, initialSlot: Date | null): Promise<ScheduleRow> {
  const r = await db.query(
    `INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ($1, $2, $3, $4)
     ON CONFLICT (schedule) DO UPDATE SET cron = EXCLUDED.cron, timezone = EXCLUDED.timezone
     RETURNING schedule, last_slot, (xmax = 0) AS inserted`,
    [schedule, cron, timezone, initialSlot],
  );
  return r.rows[0];
}

export async function slotStatus(db: Db, schedule: string, slot: Date): Promise<SlotStatus | null> {
  const r = await db.query(`SELECT status FROM etl.schedule_slots WHERE schedule = $1 AND slot = $2`, [schedule, slot]);
  return r.rows[0]?.status ?? null;
}

/**
 * Claims a slot for `owner`: true for exactly one claimer. An interrupted slot (its
 * scheduler stopped mid-run) may be claimed again. The schedule's last_slot moves forward.
 */
export async function claimSlot(db: Db, schedule: string, slot: Date, owner: string, catchUp: boolean): Promise<boolean> {
  const r = await db.query(
    `WITH claimed AS (
       INSERT INTO etl.schedule_slots (schedule, slot, owner, catch_up) VALUES ($1, $2, $3, $4)
       ON CONFLICT (schedule, slot) DO UPDATE
         SET owner = EXCLUDED.owner, catch_up = EXCLUDED.catch_up, status = 'running', error = NULL, claimed_at = now(), finished_at = NULL
         WHERE etl.schedule_slots.status = 'interrupted'
       RETURNING slot
     ), moved AS (
       UPDATE etl.schedules SET last_slot = greatest(coalesce(last_slot, $2), $2)
        WHERE schedule = $1 AND EXISTS (SELECT 1 FROM claimed)
     )
     SELECT count(*)::int AS n FROM claimed`,
    [schedule, slot, owner, catchUp],
  );
  return r.rows[0].n === 1;
}

export async function addSlotRun(db: Db, schedule: string, slot: Date, runId: number): Promise<void> {
  await db.query(`UPDATE etl.schedule_slots SET run_ids = run_ids || $3::bigint, attempts = attempts + 1 WHERE schedule = $1 AND slot = $2`, [schedule, slot, runId]);
}

export async function finishSlot(db: Db, schedule: string, slot: Date, status: SlotStatus, error: string | null): Promise<void> {
  await db.query(`UPDATE etl.schedule_slots SET status = $3, error = $4, finished_at = now() WHERE schedule = $1 AND slot = $2`, [
    schedule, slot, status, error === null ? null : maskCpfsInText(error),
  ]);
}

export interface SlotRow {
  schedule: string;
  slot: Date;
  owner: string;
  catch_up: boolean;
  status: SlotStatus;
  run_ids: number[];
  attempts: number;
  error: string | null;
}

export async function listSlots(db: Db, schedule: string | null): Promise<SlotRow[]> {
  const r = await db.query(
    `SELECT schedule, slot, owner, catch_up, status, run_ids::int[] AS run_ids, attempts, error FROM etl.schedule_slots
      WHERE $1::text IS NULL OR schedule = $1 ORDER BY slot, schedule`,
    [schedule],
  );
  return r.rows;
}

/** The latest slot of each schedule (what `agro schedule --check` shows). */
export async function lastSlots(db: Db): Promise<Map<string, SlotRow>> {
  const r = await db.query(
    `SELECT DISTINCT ON (schedule) schedule, slot, owner, catch_up, status, run_ids::int[] AS run_ids, attempts, error
       FROM etl.schedule_slots ORDER BY schedule, slot DESC`,
  );
  return new Map(r.rows.map((x) => [x.schedule, x]));
}

/**
 * Lock class of "this job is being run by some scheduler" (pg_try_advisory_lock(class, hashtext(job))).
 * Its own class: it shared 727002 with the overlaps' line-pieces lock (class, -layer snapshot id),
 * so a job whose name hashed to minus a road snapshot's id would have waited on a derive.
 */
export const JOB_LOCK = 727004;

/**
 * Claims a slot (claimSlot) and takes the job's advisory lock in one transaction on a
 * dedicated session: no other scheduler ever sees the slot `running` while its lock is
 * free, so a running slot whose lock is free belongs to a scheduler that died.
 * `lock` is null when the slot was claimed but another scheduler still runs the job.
 * The same session first takes its share of the night (night-lock.ts): when a manual
 * `agro nightly` holds it, nothing is claimed and `nightBy` names that nightly.
 */
export async function claimWithLock(pool: pg.Pool, job: string, slot: Date, owner: string, catchUp: boolean): Promise<{ claimed: boolean; lock: JobLock | null; nightBy?: string }> {
  const client = await pool.connect();
  let locked = false;
  try {
    const nightBy = await shareNight(client);
    if (nightBy) {
      client.release();
      return { claimed: false, lock: null, nightBy };
    }
    await client.query('BEGIN');
    const claimed = await claimSlot(client, job, slot, owner, catchUp);
    if (claimed) locked = (await client.query('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [JOB_LOCK, job])).rows[0].ok;
    await client.query('COMMIT');
    if (!locked) {
      await unshareNight(client);
      client.release();
    }
    return { claimed, lock: locked ? heldLock(client, job, true) : null };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    client.release(true); // it may hold a lock: it must not go back to the pool
    throw e;
  }
}

/**
 * At start: the slots of a job left `running` by a scheduler that died (SIGKILL, power
 * loss: its lock died with its session) become `interrupted`, so that the latest is run
 * again. Nothing changes while some scheduler holds the job's lock. The lock is looked at
 * (pg_locks), not taken: taken, even for a moment, another scheduler starting at the same
 * time found the job "still running in another scheduler" and recorded the slot skipped,
 * which this one then found claimed: the slot ran nowhere.
 */
export async function interruptDeadSlots(pool: pg.Pool, job: string): Promise<number> {
  const r = await pool.query(
    `UPDATE etl.schedule_slots SET status = 'interrupted', finished_at = now(),
            error = 'the scheduler that claimed it (' || owner || ') died while running it'
      WHERE schedule = $1 AND status = 'running' AND NOT ${advisoryHeld('$2', 'hashtext($1)::bigint & 4294967295')}`,
    [job, JOB_LOCK],
  );
  return r.rowCount ?? 0;
}

export interface JobLock {
  release(): Promise<void>;
}

/** The job's lock held on `client` (and its share of the night, when `night`). */
function heldLock(client: pg.PoolClient, job: string, night = false): JobLock {
  return {
    async release() {
      const ok = await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [JOB_LOCK, job])
        .then(() => (night ? unshareNight(client) : undefined)).then(() => true, () => false);
      client.release(!ok);
    },
  };
}
