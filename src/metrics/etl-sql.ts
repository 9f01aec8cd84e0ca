// The ETL figures of /metrics, read from the run ledger at scrape time (etl.runs and
// etl.run_stages are small: one row per run and per stage). Aggregates only: pipeline, scope,
// stage and status names, counts and durations — never a source URL, an error text or a row.
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

/**
 * Runs in the ledger by pipeline and status as a reader is shown it (etl.shown_run_status,
 * sql/0125, as serving.source_runs): a running run whose process died is `dead` on a primary.
 */
export async function runsByStatus(db: Db): Promise<{ pipeline: string; status: string; n: number }[]> {
  const r = await db.query(
    `SELECT pipeline, etl.shown_run_status(status, run_id) AS status, count(*)::int AS n
       FROM etl.runs GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  return r.rows;
}

/** Rows loaded and rejected by pipeline, over every finished run. */
export async function rowsByPipeline(db: Db): Promise<{ pipeline: string; loaded: string; rejected: string }[]> {
  const r = await db.query(
    `SELECT pipeline, coalesce(sum(rows_loaded), 0)::text AS loaded, coalesce(sum(rows_rejected), 0)::text AS rejected
       FROM etl.runs WHERE finished_at IS NOT NULL GROUP BY pipeline ORDER BY pipeline`,
  );
  return r.rows;
}

/** Completed stages by pipeline and stage: how many, and their total duration. */
export async function stageDurations(db: Db): Promise<{ pipeline: string; stage: string; n: number; ms: string }[]> {
  const r = await db.query(
    `SELECT r.pipeline, s.stage, count(*)::int AS n, sum(s.duration_ms)::text AS ms
       FROM etl.run_stages s JOIN etl.runs r ON r.run_id = s.run_id
      WHERE s.status = 'done' AND s.duration_ms IS NOT NULL
      GROUP BY r.pipeline, s.stage ORDER BY r.pipeline, s.stage`,
  );
  return r.rows;
}

/** The stages of the latest finished run of each pipeline and scope, with their durations. */
export async function lastRunStages(db: Db): Promise<{ pipeline: string; scope: string; stage: string; status: string; ms: number }[]> {
  const r = await db.query(
    `WITH last AS (
       SELECT DISTINCT ON (pipeline, scope) run_id, pipeline, scope FROM etl.runs
        WHERE finished_at IS NOT NULL ORDER BY pipeline, scope, run_id DESC
     )
     SELECT l.pipeline, l.scope, s.stage, s.status, s.duration_ms AS ms
       FROM last l JOIN etl.run_stages s ON s.run_id = l.run_id
      WHERE s.duration_ms IS NOT NULL ORDER BY l.pipeline, l.scope, s.seq`,
  );
  return r.rows;
}
