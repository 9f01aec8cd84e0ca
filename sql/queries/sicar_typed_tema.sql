-- The typed pass of one theme: each staged polygon typed once into car_tema's columns with
-- its verdict; car_tema (CAR_TEMA's declaration) is built from the kept rows of every
-- theme's typed table, nothing joined back. Polygons of layers without cod_imovel take the
-- car of their spatial link (placeholder car = coalesce(s.car, l.car), link_join joins the
-- links as l); an unlinked one gets link_verdict 'not_linked_no_property' or
-- 'not_linked_ambiguous'. An area that is not a number (or is negative) and a status code that is none of
-- SOURCES §2.5's are NULL, their text kept in `extra` and flagged for the report.
-- Each lateral ends in `clock_timestamp() AS once`: a volatile column keeps the planner from
-- pulling the lateral up into the select list, which copies its expressions to every place
-- they are used (the verdict, the CAR number's checks and the area were computed two to
-- twelve times a row: measured 12.1 s → 6.0 s for 1,000,368 APPS polygons on one core). It
-- also makes the statement serial: the caller runs the inputs on two connections instead.
-- area_calculada_ha is computed here, on the two connections, not in car_tema's build.
CREATE UNLOGGED TABLE {{typed}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, w.verdict, s.repair, k.car, {{uf}}::text AS uf, {{tema}}::text AS tema_base,
       nullif(btrim(s.cod_tema), '')::text AS cod_tema, nullif(btrim(s.nom_tema), '')::text AS nome_tema,
       CASE WHEN k.area >= 0 THEN k.area END AS area_ha,
       k.situacao, nullif(btrim(s.des_condic), '')::text AS condicao,
       g.geom, etl.area_ha(g.geom) AS area_calculada_ha,
       CASE WHEN coalesce(u.bad_area, u.bad_status) IS NULL THEN s.extra
            ELSE coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object('area_ha', u.bad_area, 'situacao', u.bad_status)) END AS extra,
       -- Counted by the theme's facts (pipelines/sicar/queries.ts themeFacts).
       u.bad_area IS NOT NULL AS area_unparsed, u.bad_status AS unknown_status
FROM {{stage}} s
{{link_join}}
CROSS JOIN LATERAL (
  SELECT upper(etl.trim_spaces({{car}})) AS car, etl.parse_number(s.num_area) AS area, etl.car_situacao(s.ind_status) AS situacao,
         clock_timestamp() AS once
) k
CROSS JOIN LATERAL (
  SELECT CASE WHEN btrim(s.num_area) <> '' AND coalesce(k.area < 0, NOT etl.is_overflow(s.num_area)) THEN s.num_area END AS bad_area,
         CASE WHEN k.situacao IS NULL AND btrim(s.ind_status) <> '' THEN s.ind_status END AS bad_status,
         clock_timestamp() AS once
) u
CROSS JOIN LATERAL (
  SELECT coalesce({{link_verdict}}, etl.sicar_verdict(k.car, {{uf}}, s.geom, s.src_srid, s.repair)) AS verdict, clock_timestamp() AS once
) w
CROSS JOIN LATERAL (SELECT CASE WHEN w.verdict = 'ok' THEN etl.sicar_geom(s.geom, s.src_srid) END AS geom, clock_timestamp() AS once) g
