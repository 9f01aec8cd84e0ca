-- Why each staged SNV segment is kept or not, in priority order, with its geometry made
-- valid (line parts kept), 2D, multi and in EPSG:4326 from the SRID read from the .prj.
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, k.codigo, i.was_invalid,
       CASE
         WHEN k.codigo IS NULL THEN 'no_codigo'
         WHEN s.geom IS NULL THEN 'no_geometry'
         WHEN v.g IS NULL OR ST_IsEmpty(v.g) THEN 'geometry_empty_after_repair'
         WHEN NOT etl.in_brazil(v.g) THEN 'outside_brazil'
         ELSE 'ok' END AS verdict,
       v.g
FROM {{stage}} s
CROSS JOIN LATERAL (SELECT nullif(upper(btrim(s.codigo)), '') AS codigo) k
CROSS JOIN LATERAL (SELECT ST_Force2D(ST_SetSRID(s.geom, s.src_srid)) AS g0) r
CROSS JOIN LATERAL (SELECT r.g0 IS NOT NULL AND NOT ST_IsValid(r.g0) AS was_invalid) i
CROSS JOIN LATERAL (
  SELECT ST_Transform(ST_Multi(ST_CollectionExtract(CASE WHEN i.was_invalid THEN ST_MakeValid(r.g0) ELSE r.g0 END, 2)), 4326) AS g
) v
