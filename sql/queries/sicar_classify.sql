-- Why each staged row is kept or not, in priority order; one pass over the staging table.
-- The Brazil envelope is in degrees: a projected layer (UTM, Web Mercator) is checked
-- after transforming; SIRGAS 2000 and WGS 84 coordinates are checked as they are.
-- Themes without cod_imovel take the car of their spatial link (placeholder car =
-- coalesce(s.car, l.car), link_join joins the links as l); an unlinked one gets link_verdict
-- 'not_linked_no_property' or 'not_linked_ambiguous'. Otherwise car = s.car, the others empty/NULL.
CREATE UNLOGGED TABLE {{classified}} AS
SELECT s.src_seq, upper(btrim({{car}})) AS car,
       CASE
         WHEN {{link_verdict}} IS NOT NULL THEN {{link_verdict}}
         WHEN NOT etl.car_number_ok(upper(btrim({{car}}))) THEN 'bad_car_number'
         WHEN left(upper(btrim({{car}})), 2) <> {{uf}} THEN 'other_state'
         WHEN s.geom IS NULL THEN 'no_geometry'
         WHEN f.status = 'rejected' THEN 'geometry_unrepairable'
         WHEN f.status = 'empty' THEN 'geometry_empty_after_repair'
         WHEN NOT etl.in_brazil(CASE WHEN s.src_srid IN (4326, 4674) THEN s.geom ELSE ST_Transform(ST_SetSRID(s.geom, s.src_srid), 4326) END) THEN 'outside_brazil'
         ELSE 'ok' END AS verdict,
       f.status AS repair
FROM {{stage}} s LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
{{link_join}}
