-- 0125 read a running run's alive lock in pg_locks to say `dead`; advisory locks live in the
-- primary's memory and are not replicated, so on a standby (DATABASE_READ_URL: /v1/sources of
-- a live key reads there) every run under way read `dead`. A standby cannot tell: it says
-- what the ledger says, `running`. (CREATE OR REPLACE VIEW: same columns, same order.)
CREATE OR REPLACE VIEW serving.source_runs AS
SELECT r.pipeline AS dataset,
       nullif(r.scope, '') AS uf,
       max(r.finished_at) FILTER (WHERE r.status = 'unchanged') AS confirmed_at,
       (SELECT CASE WHEN l.status = 'running' AND NOT pg_is_in_recovery() AND NOT EXISTS (
                 SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.classid = 727001 AND k.objsubid = 2 AND k.granted
                    AND k.objid::bigint = l.run_id AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
               THEN 'dead' ELSE l.status END
          FROM etl.runs l WHERE l.run_id = max(r.run_id)) AS last_status,
       (array_agg(r.started_at ORDER BY r.run_id DESC))[1] AS last_started_at,
       (array_agg(r.finished_at ORDER BY r.run_id DESC))[1] AS last_finished_at,
       (array_agg(r.error_code ORDER BY r.run_id DESC))[1] AS last_error_code,
       (SELECT c.snapshot_id FROM etl.current c WHERE c.dataset = r.pipeline AND c.scope = r.scope) AS snapshot_id,
       max(r.run_id) AS last_run_id
FROM etl.runs r
GROUP BY r.pipeline, r.scope;
