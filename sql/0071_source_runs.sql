-- What the API tells about each source's runs (issue 11: freshness in /v1/sources). The API
-- reads only `serving`, so the run ledger is exposed here, one row per (dataset, scope).
--
-- confirmed_at: the last run that found the source identical to its current snapshot
-- ('unchanged'). A nightly run of a source that did not change publishes nothing, yet it
-- proves the published copy is still the agency's latest: freshness counts from the later of
-- this and the snapshot's publication.
CREATE VIEW serving.source_runs AS
SELECT r.pipeline AS dataset,
       nullif(r.scope, '') AS uf,
       max(r.finished_at) FILTER (WHERE r.status = 'unchanged') AS confirmed_at,
       (array_agg(r.status ORDER BY r.run_id DESC))[1] AS last_status,
       (array_agg(r.started_at ORDER BY r.run_id DESC))[1] AS last_started_at,
       (array_agg(r.finished_at ORDER BY r.run_id DESC))[1] AS last_finished_at,
       (array_agg(r.error_code ORDER BY r.run_id DESC))[1] AS last_error_code
FROM etl.runs r
GROUP BY r.pipeline, r.scope;

COMMENT ON VIEW serving.source_runs IS
  'Per dataset and scope: the last run (status, times, error code) and the last run that confirmed the current snapshot unchanged.';
