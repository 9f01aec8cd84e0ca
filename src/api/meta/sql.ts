// Statements of the meta routes (serving.snapshots, serving.snapshots_legiveis and serving.source_runs only).
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

export async function dbPing(db: Db): Promise<void> {
  await db.query('SELECT 1');
}

/** Where a streaming replica stands: in recovery, and the WAL it has replayed. */
export async function replayState(db: Db): Promise<{ in_recovery: boolean; replay_lsn: string | null }> {
  const r = await db.query(`SELECT pg_is_in_recovery() AS in_recovery, pg_last_wal_replay_lsn()::text AS replay_lsn`);
  return r.rows[0];
}

/**
 * Bytes of WAL the primary has produced past `lsn` (a replica's replay position). The insert
 * position, not the write one: a commit made with synchronous_commit off is visible on the
 * primary before its WAL is written out, and not yet on any replica.
 */
export async function walBytesPast(db: Db, lsn: string): Promise<number> {
  const r = await db.query('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8 AS bytes', [lsn]);
  return r.rows[0].bytes;
}

export interface PublishedSnapshot {
  dataset: string;
  uf: string | null;
  snapshot_id: number;
  as_of: string;
  published_at: Date | null;
  rows: number | null;
}

/** The published snapshot of each dataset (and state). */
export async function publishedSnapshots(db: Db): Promise<PublishedSnapshot[]> {
  const r = await db.query(
    `SELECT dataset, uf, snapshot_id, to_char(as_of, 'YYYY-MM-DD') AS as_of, published_at, rows
       FROM serving.snapshots WHERE status = 'current' ORDER BY dataset, uf NULLS FIRST`,
  );
  return r.rows;
}

/** Distinct as-of dates as_of reads answer from, per dataset and state (readable snapshots, none rolled back), oldest first. */
export async function readableHistory(db: Db): Promise<{ dataset: string; uf: string | null; as_of: string }[]> {
  const r = await db.query(
    `SELECT DISTINCT dataset, uf, to_char(as_of, 'YYYY-MM-DD') AS as_of FROM serving.snapshots_as_of WHERE legivel ORDER BY dataset, uf, as_of`,
  );
  return r.rows;
}

export interface SourceRuns {
  dataset: string;
  uf: string | null;
  confirmed_at: Date | null;
  last_run_id: number;
  last_status: string;
  last_started_at: Date;
  last_finished_at: Date | null;
  last_error_code: string | null;
}

/** Per dataset and state: the last run and the last run that found the source unchanged. */
export async function sourceRuns(db: Db): Promise<SourceRuns[]> {
  const r = await db.query(`SELECT dataset, uf, confirmed_at, last_run_id::int, last_status, last_started_at, last_finished_at, last_error_code FROM serving.source_runs`);
  return r.rows;
}
