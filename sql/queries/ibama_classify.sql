-- What each staged term becomes, in priority order: no key, a superseded duplicate, a term
-- with its polygon (repaired, in 4326, inside Brazil), a term with only its point, or a
-- rejection. poly_problem says why a polygon the source had was not used (the term may
-- still load with its point); pt_outside marks a point outside the Brazil envelope.
-- The CTEs are MATERIALIZED so each geometry is transformed and tested once per row
-- (inlined, the expressions would be repeated for every reference).
CREATE UNLOGGED TABLE {{classified}} AS
WITH t AS MATERIALIZED (
  SELECT s.src_seq, w.id_tad,
         nullif(btrim(s.numero_tad), '') IS NULL AS no_key,
         w.src_seq IS NOT NULL AS winner,
         g.state, f.status AS fix_status,
         CASE WHEN g.geom IS NULL THEN NULL
              WHEN f.src_seq IS NULL THEN ST_Multi(ST_Transform(ST_SetSRID(g.geom, g.src_srid), 4326))
              WHEN f.status = 'repaired' THEN ST_Multi(ST_Transform(f.geom, 4326)) END AS g4326,
         -- The point columns hold degrees: in the layer's CRS when it is geographic, else SIRGAS 2000.
         etl.ibama_point(s.longitude, s.latitude, s.longitude_dms, s.latitude_dms,
                         coalesce((SELECT CASE WHEN r.proj4text LIKE '%+proj=longlat%' THEN r.srid ELSE 4674 END
                                     FROM spatial_ref_sys r WHERE r.srid = g.src_srid), 4326)) AS p0
  FROM {{stage}} s
  LEFT JOIN {{winners}} w ON w.src_seq = s.src_seq
  LEFT JOIN {{geoms}} g ON g.src_seq = s.src_seq
  LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
), b AS MATERIALIZED (
  SELECT t.*, etl.in_brazil(g4326) AS poly_in, etl.in_brazil(p0) AS pt_in FROM t
)
SELECT src_seq, id_tad,
       CASE WHEN poly_in THEN g4326 END AS poly,
       CASE WHEN state IN ('bad_wkt', 'not_polygonal') THEN state
            WHEN fix_status = 'rejected' THEN 'repair_failed'
            WHEN fix_status = 'empty' THEN 'empty_after_repair'
            WHEN NOT poly_in THEN 'polygon_outside_brazil' END AS poly_problem,
       CASE WHEN pt_in THEN p0 END AS pt,
       coalesce(NOT pt_in, false) AS pt_outside,
       CASE WHEN no_key THEN 'no_key'
            WHEN NOT winner THEN 'duplicate_key'
            WHEN poly_in THEN 'poligono'
            WHEN pt_in THEN 'ponto'
            WHEN state IN ('bad_wkt', 'not_polygonal') THEN 'bad_wkt'
            WHEN fix_status IN ('rejected', 'empty') THEN 'geometry_unrepairable'
            WHEN NOT poly_in OR NOT pt_in THEN 'outside_brazil'
            ELSE 'no_geometry' END AS verdict
FROM b
