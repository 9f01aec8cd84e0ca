-- A run SIGKILLed (no handler runs) stays `running` in etl.runs until the next run of any
-- pipeline cleans up after it; `agro runs` and `agro doctor` already said `dead` (its alive
-- lock, class 727001 keyed by run id, is held by no session: src/etl/run-locks.ts), while
-- /v1/sources' last_run and this view said `running` for as long as no other run came. The
-- last run's status is `dead` here too. (CREATE OR REPLACE VIEW: same columns, same order.)
CREATE OR REPLACE VIEW serving.source_runs AS
SELECT r.pipeline AS dataset,
       nullif(r.scope, '') AS uf,
       max(r.finished_at) FILTER (WHERE r.status = 'unchanged') AS confirmed_at,
       (SELECT CASE WHEN l.status = 'running' AND NOT EXISTS (
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
