-- Why each staged mesh feature is kept or not, in priority order, with its geometry
-- already repaired (fix table), 2D and in EPSG:4326. Codes are validated by shape
-- (7 digits, a real UF prefix), never by check digit (SOURCES §1.3). `oficial`: the code is
-- a municipality's ({{oficial}}: in the official list when the run has one, else by code
-- shape); `sem_malha`: a row of the official list the mesh lacks (staged by the classify,
-- no geometry: kept, SOURCES §9.7).
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, x.code AS geocodigo, {{oficial}} AS oficial, s.src_layer = 'localidades' AS sem_malha,
       CASE
         WHEN NOT etl.ibge_code_ok(x.code) THEN 'bad_geocodigo'
         WHEN nullif(btrim(s.uf), '') IS NOT NULL AND upper(btrim(s.uf)) <> etl.uf_from_ibge_code(left(x.code, 2)) THEN 'uf_mismatch'
         WHEN nullif(btrim(s.nome), '') IS NULL THEN 'no_name'
         WHEN s.geom IS NULL AND s.src_layer = 'localidades' THEN 'ok'
         WHEN s.geom IS NULL THEN 'no_geometry'
         WHEN f.status = 'rejected' THEN 'geometry_unrepairable'
         WHEN f.status = 'empty' THEN 'geometry_empty_after_repair'
         WHEN NOT etl.in_brazil(g.g) THEN 'outside_brazil'
         ELSE 'ok' END AS verdict,
       f.status AS repair,
       g.g
FROM {{stage}} s
LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
-- CD_MUN is text in current meshes; a numeric DBF field would read as '5208707' or '5208707.0'.
CROSS JOIN LATERAL (SELECT regexp_replace(btrim(s.geocodigo), '\.0*$', '') AS code) x
CROSS JOIN LATERAL (
  SELECT CASE WHEN s.geom IS NOT NULL AND coalesce(f.status, 'valid') NOT IN ('rejected', 'empty')
              THEN ST_Multi(ST_Force2D(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326))) END AS g
) g
