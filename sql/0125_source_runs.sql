-- /v1/sources' last_run (serving.source_runs): the run's id, so an operator goes from it to
-- `agro report <run id>` (at the end: CREATE OR REPLACE VIEW adds columns only there), and the
-- status a reader is shown.

-- A run SIGKILLed (no handler runs) stays `running` in etl.runs until the next run of any
-- pipeline cleans up after it. Shown `dead` when its alive lock (class 727001 = RUN_ALIVE_LOCK,
-- keyed by run id: src/etl/run-locks.ts) is held by no session, as `agro runs` and `agro doctor`
-- say. Only a primary can tell: advisory locks live in its memory and are not replicated, so a
-- standby (DATABASE_READ_URL, where a live key's /v1/sources reads) shows what the ledger says.
-- One rule for the view and /metrics' agro_etl_runs.
CREATE FUNCTION etl.shown_run_status(status text, run_id bigint) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN status = 'running' AND NOT pg_is_in_recovery() AND NOT EXISTS (
             SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.classid = 727001 AND k.objsubid = 2 AND k.granted
                AND k.objid::bigint = run_id AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
         THEN 'dead' ELSE status END
$$;

CREATE OR REPLACE VIEW serving.source_runs AS
SELECT r.pipeline AS dataset,
       nullif(r.scope, '') AS uf,
       max(r.finished_at) FILTER (WHERE r.status = 'unchanged') AS confirmed_at,
       etl.shown_run_status((array_agg(r.status ORDER BY r.run_id DESC))[1], max(r.run_id)) AS last_status,
       (array_agg(r.started_at ORDER BY r.run_id DESC))[1] AS last_started_at,
       (array_agg(r.finished_at ORDER BY r.run_id DESC))[1] AS last_finished_at,
       (array_agg(r.error_code ORDER BY r.run_id DESC))[1] AS last_error_code,
       (SELECT c.snapshot_id FROM etl.current c WHERE c.dataset = r.pipeline AND c.scope = r.scope) AS snapshot_id,
       max(r.run_id) AS last_run_id
FROM etl.runs r
GROUP BY r.pipeline, r.scope;
