// The run ledger and the snapshot catalogue: every statement on etl.* lives here.
// Free text written here (errors, stage details, quality reports) passes through the
// CPF mask: this is the choke point between what a source says and what we keep.
import os from 'node:os';
import type pg from 'pg';
import { sessionName } from '../db/pool.ts';
import { maskCpfsDeep, maskCpfsInText } from '../privacy.ts';

type Db = pg.Pool | pg.ClientBase;

export type RunStatus = 'running' | 'published' | 'loaded' | 'unchanged' | 'blocked' | 'failed' | 'killed';
/** `loaded`: complete and kept, not made current (an older backfill, or a publish that gave up on locks). */
export type SnapshotStatus = 'loading' | 'blocked' | 'published' | 'superseded' | 'rolled_back' | 'loaded' | 'failed' | 'dropped';
/** Statuses of snapshots whose tables are complete and readable. */
export const GOOD_STATUSES: readonly SnapshotStatus[] = ['published', 'superseded', 'rolled_back', 'loaded'];
/**
 * Those of them an as_of read may answer from: not one an operator rolled back (data taken
 * back is not what the source said on its date) until it is published again. The SQL side is
 * serving.snapshots_as_of (sql/0118), which also leaves out one dropped after its rollback.
 */
export const ANSWERING_STATUSES: readonly SnapshotStatus[] = ['published', 'superseded', 'loaded'];

export interface SnapshotRow {
  snapshot_id: number;
  dataset: string;
  uf: string | null;
  scope: string;
  as_of: string;
  status: SnapshotStatus;
  rows: number | null;
  source_sha256: string | null;
  source: Record<string, unknown>;
  tables: string[];
  quality: Record<string, unknown> | null;
  forced: boolean;
  kept: boolean;
  run_id: number | null;
  created_at: Date;
  published_at: Date | null;
  /** When an operator rolled it back; null once published again. */
  rolled_back_at: Date | null;
  is_current?: boolean;
}

export interface RunRow {
  run_id: number;
  pipeline: string;
  scope: string;
  status: RunStatus;
  snapshot_id: number | null;
  rows_read: number | null;
  rows_loaded: number | null;
  rows_rejected: number | null;
  error: string | null;
  /** What a run that loaded nothing said (an unchanged source), from migration 0109 on. */
  message?: string | null;
  started_at: Date;
  finished_at: Date | null;
  /** The process that ran it. */
  pid: number | null;
  host: string | null;
  /** Its process's session name (application_name), from migration 0086 on. */
  session: string | null;
}

// ---- runs and stages -------------------------------------------------------

export async function insertRun(db: Db, pipeline: string, scope: string, options: object): Promise<number> {
  const r = await db.query(
    `INSERT INTO etl.runs (pipeline, scope, options, pid, host, session) VALUES ($1, $2, $3, $4, $5, $6) RETURNING run_id`,
    [pipeline, scope, JSON.stringify(maskCpfsDeep(options)), process.pid, os.hostname(), sessionName()],
  );
  return r.rows[0].run_id;
}

export async function finishRun(
  db: Db,
  runId: number,
  f: { status: RunStatus; snapshotId?: number | null; read?: number; loaded?: number; rejected?: number; error?: string; errorCode?: string; message?: string },
): Promise<void> {
  await db.query(
    `UPDATE etl.runs SET status = $2, snapshot_id = coalesce($3, snapshot_id), rows_read = $4, rows_loaded = $5,
            rows_rejected = $6, error = $7, error_code = $8, message = $9, finished_at = now()
      WHERE run_id = $1`,
    [runId, f.status, f.snapshotId ?? null, f.read ?? null, f.loaded ?? null, f.rejected ?? null, f.error === undefined ? null : maskCpfsInText(f.error), f.errorCode ?? null,
      f.message === undefined ? null : maskCpfsInText(f.message)],
  );
}

export async function startStage(db: Db, runId: number, stage: string, seq: number): Promise<void> {
  await db.query(
    `INSERT INTO etl.run_stages (run_id, stage, seq) VALUES ($1, $2, $3)
     ON CONFLICT (run_id, stage) DO UPDATE SET status = 'running', started_at = clock_timestamp(), finished_at = NULL`,
    [runId, stage, seq],
  );
}

export async function endStage(db: Db, runId: number, stage: string, status: 'done' | 'failed' | 'skipped', rows: number | null, detail: object): Promise<number> {
  const r = await db.query(
    `UPDATE etl.run_stages SET status = $3, rows = $4, detail = $5, finished_at = clock_timestamp(),
            duration_ms = (extract(epoch FROM clock_timestamp() - started_at) * 1000)::int
      WHERE run_id = $1 AND stage = $2 RETURNING duration_ms`,
    [runId, stage, status, rows, JSON.stringify(maskCpfsDeep(detail))],
  );
  return r.rows[0]?.duration_ms ?? 0;
}

export async function getRun(db: Db, runId: number): Promise<RunRow | null> {
  const r = await db.query('SELECT * FROM etl.runs WHERE run_id = $1', [runId]);
  return r.rows[0] ?? null;
}

export async function runStages(db: Db, runId: number) {
  const r = await db.query('SELECT stage, status, rows, detail, duration_ms FROM etl.run_stages WHERE run_id = $1 ORDER BY seq', [runId]);
  return r.rows as { stage: string; status: string; rows: number | null; detail: Record<string, unknown>; duration_ms: number | null }[];
}

/** Runs still marked running for a pipeline (optionally one scope), other than `exceptRunId`. */
export async function runningRuns(db: Db, pipeline: string | null, scope: string | null, exceptRunId: number | null): Promise<RunRow[]> {
  const r = await db.query(
    `SELECT * FROM etl.runs WHERE status = 'running' AND ($1::text IS NULL OR pipeline = $1)
        AND ($2::text IS NULL OR scope = $2) AND run_id <> coalesce($3, -1) ORDER BY run_id`,
    [pipeline, scope, exceptRunId],
  );
  return r.rows;
}

/** The run that loads a snapshot: its status as shown (`dead` when its alive lock is free, sql/0125) and its last stage. */
export async function loadingRunOf(db: Db, snapshotId: number): Promise<{ run_id: number; status: string; stage: string | null } | undefined> {
  const r = await db.query(
    `SELECT r.run_id, etl.shown_run_status(r.status, r.run_id) AS status,
            (SELECT st.stage FROM etl.run_stages st WHERE st.run_id = r.run_id ORDER BY st.seq DESC LIMIT 1) AS stage
       FROM etl.snapshots s JOIN etl.runs r ON r.run_id = s.run_id WHERE s.snapshot_id = $1`,
    [snapshotId],
  );
  return r.rows[0];
}

// ---- snapshots ---------------------------------------------------------------

export async function insertSnapshot(
  db: Db,
  s: { dataset: string; uf: string | null; asOf: string; sourceSha256: string; source: object; runId: number; fingerprint: string | null },
): Promise<number> {
  const r = await db.query(
    `INSERT INTO etl.snapshots (dataset, uf, as_of, source_sha256, source, run_id, schema_fingerprint)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING snapshot_id`,
    [s.dataset, s.uf, s.asOf, s.sourceSha256, JSON.stringify(maskCpfsDeep(s.source)), s.runId, s.fingerprint],
  );
  return r.rows[0].snapshot_id;
}

/** Records a table as belonging to a snapshot before it is created, so a dead run's tables can be found. */
export async function addSnapshotTable(db: Db, snapshotId: number, table: string): Promise<void> {
  await db.query(`UPDATE etl.snapshots SET tables = array_append(tables, $2) WHERE snapshot_id = $1 AND NOT ($2 = ANY(tables))`, [snapshotId, table]);
}

export async function setSnapshotFields(db: Db, snapshotId: number, f: { status?: SnapshotStatus; rows?: number; quality?: object; forced?: boolean; fingerprint?: string }): Promise<void> {
  await db.query(
    `UPDATE etl.snapshots SET status = coalesce($2, status), rows = coalesce($3, rows), quality = coalesce($4, quality),
            forced = coalesce($5, forced), schema_fingerprint = coalesce($6, schema_fingerprint)
      WHERE snapshot_id = $1`,
    [snapshotId, f.status ?? null, f.rows ?? null, f.quality ? JSON.stringify(maskCpfsDeep(f.quality)) : null, f.forced ?? null, f.fingerprint ?? null],
  );
}

const SNAPSHOT_COLUMNS = `s.*, (c.snapshot_id IS NOT NULL) AS is_current`;

export async function getSnapshot(db: Db, snapshotId: number): Promise<SnapshotRow | null> {
  const r = await db.query(
    `SELECT ${SNAPSHOT_COLUMNS} FROM etl.snapshots s LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id WHERE s.snapshot_id = $1`,
    [snapshotId],
  );
  return r.rows[0] ?? null;
}

export async function currentSnapshot(db: Db, dataset: string, scope: string): Promise<SnapshotRow | null> {
  const r = await db.query(
    `SELECT ${SNAPSHOT_COLUMNS} FROM etl.current c JOIN etl.snapshots s ON s.snapshot_id = c.snapshot_id WHERE c.dataset = $1 AND c.scope = $2`,
    [dataset, scope],
  );
  return r.rows[0] ?? null;
}

/** Current snapshot ids of every scope of a dataset (one per state for sicar). */
export async function currentSnapshotIds(db: Db, dataset: string): Promise<number[]> {
  const r = await db.query('SELECT snapshot_id FROM etl.current WHERE dataset = $1 ORDER BY scope', [dataset]);
  return r.rows.map((x) => x.snapshot_id);
}

export async function listSnapshots(db: Db, dataset: string | null, uf: string | null): Promise<SnapshotRow[]> {
  const r = await db.query(
    `SELECT ${SNAPSHOT_COLUMNS} FROM etl.snapshots s LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
      WHERE ($1::text IS NULL OR s.dataset = $1) AND ($2::text IS NULL OR s.uf = $2)
      ORDER BY s.dataset, s.scope, s.snapshot_id DESC`,
    [dataset, uf],
  );
  return r.rows;
}

/** Snapshots of one (dataset, scope) whose tables still exist, newest first. */
export async function snapshotsWithTables(db: Db, dataset: string, scope: string): Promise<SnapshotRow[]> {
  const r = await db.query(
    `SELECT ${SNAPSHOT_COLUMNS} FROM etl.snapshots s LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
      WHERE s.dataset = $1 AND s.scope = $2 AND s.status IN ('published', 'superseded', 'rolled_back', 'loaded', 'blocked')
      ORDER BY s.as_of DESC, s.published_at DESC NULLS LAST, s.snapshot_id DESC`,
    [dataset, scope],
  );
  return r.rows;
}

export async function setCurrent(db: Db, dataset: string, scope: string, snapshotId: number): Promise<void> {
  await db.query(
    `INSERT INTO etl.current (dataset, scope, snapshot_id) VALUES ($1, $2, $3)
     ON CONFLICT (dataset, scope) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id`,
    [dataset, scope, snapshotId],
  );
}

export async function setSnapshotStatus(db: Db, snapshotId: number, status: SnapshotStatus): Promise<void> {
  await db.query('UPDATE etl.snapshots SET status = $2 WHERE snapshot_id = $1', [snapshotId, status]);
}

/** Marks the snapshot a rollback takes back (as_of reads stop answering from it). */
export async function markRolledBack(db: Db, snapshotId: number): Promise<void> {
  await db.query(`UPDATE etl.snapshots SET status = 'rolled_back', rolled_back_at = now() WHERE snapshot_id = $1`, [snapshotId]);
}

/** Marks a snapshot published; forced past a failed gate (agro publish --force of a blocked one), its report says so too. */
export async function markPublished(db: Db, snapshotId: number, forced: boolean): Promise<void> {
  await db.query(
    `UPDATE etl.snapshots SET status = 'published', published_at = now(), rolled_back_at = NULL, forced = forced OR $2,
            quality = CASE WHEN $2 AND quality #>> '{gate,passed}' = 'false' THEN jsonb_set(quality, '{gate,forced}', 'true') ELSE quality END
      WHERE snapshot_id = $1`,
    [snapshotId, forced],
  );
}

/**
 * The snapshot an as_of read of `date` answers from among one series (the API's rule in SQL:
 * src/api/as-of-order.ts): the greatest as-of ≤ date; within that date the current one (what
 * is served), then the latest loaded. The series holds ANSWERING_STATUSES only.
 */
export function answeringOn<T extends { as_of: string; snapshot_id: number; is_current?: boolean }>(series: T[], date: string): T | undefined {
  const rank = (a: T, b: T) =>
    a.as_of !== b.as_of ? (a.as_of < b.as_of ? 1 : -1) : Number(!!b.is_current) - Number(!!a.is_current) || b.snapshot_id - a.snapshot_id;
  return series.filter((s) => s.as_of <= date).sort(rank)[0];
}

/** The snapshot of a dataset (and state) with tables an as_of read of `date` answers from, or undefined. */
export async function answeringSnapshot(db: Db, dataset: string, scope: string, date: string): Promise<SnapshotRow | undefined> {
  return answeringOn((await snapshotsWithTables(db, dataset, scope)).filter((s) => ANSWERING_STATUSES.includes(s.status)), date);
}

/** `agro keep`: exempts a snapshot from retention (or gives it back to retention). */
export async function setKept(db: Db, snapshotId: number, kept: boolean): Promise<boolean> {
  const r = await db.query('UPDATE etl.snapshots SET kept = $2 WHERE snapshot_id = $1', [snapshotId, kept]);
  return (r.rowCount ?? 0) > 0;
}

// ---- publication history -------------------------------------------------------

export type PublicationAction = 'publish' | 'rollback';

export interface PublicationRow {
  publication_id: number;
  snapshot_id: number;
  action: PublicationAction;
  at: Date;
}

export async function recordPublication(
  db: Db,
  p: { dataset: string; scope: string; snapshotId: number; action: PublicationAction; forced?: boolean; runId?: number | null },
): Promise<number> {
  const r = await db.query(
    `INSERT INTO etl.publications (dataset, scope, snapshot_id, action, forced, run_id) VALUES ($1, $2, $3, $4, $5, $6) RETURNING publication_id`,
    [p.dataset, p.scope, p.snapshotId, p.action, p.forced ?? false, p.runId ?? null],
  );
  return Number(r.rows[0].publication_id);
}

/** The publication history of one (dataset, scope), oldest first. */
export async function publications(db: Db, dataset: string, scope: string): Promise<PublicationRow[]> {
  const r = await db.query(
    'SELECT publication_id, snapshot_id, action, at FROM etl.publications WHERE dataset = $1 AND scope = $2 ORDER BY publication_id',
    [dataset, scope],
  );
  return r.rows;
}

/**
 * Snapshots an operator rolled back whose bytes no snapshot made current since carries (by
 * publication history, so a rolled-back snapshot retention dropped still counts): a run does
 * not publish those bytes again (src/etl/run.ts). Newest rollback first; `rolled_back_at` is
 * the snapshot's own (sql/0118), set by that rollback or a later one.
 */
export async function rolledBackSnapshots(db: Db, dataset: string, scope: string): Promise<(SnapshotRow & { rolled_back_at: Date })[]> {
  const r = await db.query(
    `WITH p AS (
       SELECT publication_id, snapshot_id, action, at, lag(snapshot_id) OVER (ORDER BY publication_id) AS before
         FROM etl.publications WHERE dataset = $1 AND scope = $2)
     SELECT ${SNAPSHOT_COLUMNS}
       FROM p JOIN etl.snapshots s ON s.snapshot_id = p.before LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
      WHERE p.action = 'rollback'
        AND NOT EXISTS (SELECT 1 FROM p later JOIN etl.snapshots ls ON ls.snapshot_id = later.snapshot_id
                         WHERE later.publication_id > p.publication_id AND ls.source_sha256 = s.source_sha256)
      ORDER BY p.publication_id DESC`,
    [dataset, scope],
  );
  return r.rows;
}

/** Stage rows a dead run left `running`: they failed with it. */
export async function failRunningStages(db: Db, runId: number, reason: string): Promise<void> {
  await db.query(
    `UPDATE etl.run_stages SET status = 'failed', finished_at = clock_timestamp(), detail = detail || jsonb_build_object('error', $2::text)
      WHERE run_id = $1 AND status = 'running'`,
    [runId, reason],
  );
}
