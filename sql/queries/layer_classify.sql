-- Why each staged feature of a national polygon layer (pipelines/_polygon-layer.ts, run by
-- src/etl/sql/polygon-layer.ts) is kept or not, with its final geometry (repaired, polygonal,
-- 2D, EPSG:4326, multi).
-- Declared by each pipeline: {{key}}, the key expression over the staged row `s`, and
-- {{newest}}, the staged row's update date (NULL::date for a layer that carries none);
-- key_join (a placeholder) joins the layer's fallback keys as `k` when it declares them (else empty).
-- Duplicate keys: the copy with the latest {{newest}} is kept, then the one read last
-- (highest src_seq).
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
WITH g AS (
  SELECT s.src_seq, {{key}} AS codigo, {{newest}} AS updated,
         f.status AS repair, s.geom IS NULL AS no_geom,
         CASE WHEN s.geom IS NOT NULL AND coalesce(f.status, 'repaired') = 'repaired' THEN
           ST_Multi(ST_CollectionExtract(ST_Force2D(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)), 3))
         END AS geom
  FROM {{stage}} s LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
  {{key_join}}
), v AS (
  SELECT g.*, CASE
      WHEN codigo IS NULL THEN 'no_key'
      WHEN no_geom THEN 'no_geometry'
      WHEN repair = 'rejected' THEN 'geometry_unrepairable'
      WHEN repair = 'empty' THEN 'geometry_empty_after_repair'
      WHEN ST_IsEmpty(geom) THEN 'geometry_not_polygonal'
      WHEN NOT etl.in_brazil(geom) THEN 'outside_brazil'
      ELSE 'ok' END AS verdict
  FROM g
)
SELECT src_seq, codigo, geom, repair,
       CASE WHEN verdict = 'ok'
             AND row_number() OVER (PARTITION BY codigo, verdict = 'ok' ORDER BY updated DESC NULLS LAST, src_seq DESC) > 1
            THEN 'duplicate_key' ELSE verdict END AS verdict
FROM v
