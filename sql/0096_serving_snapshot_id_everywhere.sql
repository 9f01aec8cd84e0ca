-- Contract §2b: "Every view has a snapshot_id column". The two operational views of schema
-- serving lacked one; added at the end (CREATE OR REPLACE VIEW may only append columns).
--   source_runs:   the snapshot current for that dataset and scope (NULL when none is).
--   overlap_pairs: the CAR snapshot of the pair, as in car_sobreposicoes (whose snapshot_id is
--                  the CAR snapshot and layer_snapshot_id the layer's).
CREATE OR REPLACE VIEW serving.source_runs AS
SELECT r.pipeline AS dataset,
       nullif(r.scope, '') AS uf,
       max(r.finished_at) FILTER (WHERE r.status = 'unchanged') AS confirmed_at,
       (array_agg(r.status ORDER BY r.run_id DESC))[1] AS last_status,
       (array_agg(r.started_at ORDER BY r.run_id DESC))[1] AS last_started_at,
       (array_agg(r.finished_at ORDER BY r.run_id DESC))[1] AS last_finished_at,
       (array_agg(r.error_code ORDER BY r.run_id DESC))[1] AS last_error_code,
       (SELECT c.snapshot_id FROM etl.current c WHERE c.dataset = r.pipeline AND c.scope = r.scope) AS snapshot_id
FROM etl.runs r
GROUP BY r.pipeline, r.scope;

CREATE OR REPLACE VIEW serving.overlap_pairs AS
SELECT car_snapshot_id, layer_snapshot_id, camada, rows, computed_at, car_snapshot_id AS snapshot_id FROM derived.overlap_pairs;

COMMENT ON COLUMN serving.source_runs.snapshot_id IS 'the snapshot current for this dataset and scope (NULL when none is published)';
COMMENT ON COLUMN serving.overlap_pairs.snapshot_id IS 'the CAR snapshot of the pair (= car_snapshot_id), as in serving.car_sobreposicoes';
