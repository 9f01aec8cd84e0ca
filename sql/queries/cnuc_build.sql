-- The cnuc_ucs snapshot's own columns, rendered into queries/layer_build.sql (one row per
-- kept unit): column order and types match snap.cnuc_ucs__template (checked before
-- publishing). Areas arrive as text ('204513.5'); a value that is not a number loads as NULL
-- and keeps its text in `extra` under the canonical name, as does the `uf` list when it
-- names an unknown state (the known names still become siglas).
-- @columns
       etl.code_text(s.uc_id) AS uc_id,
       nullif(btrim(s.nome), '')::text AS nome,
       nullif(btrim(s.categoria), '')::text AS categoria,
       nullif(btrim(s.grupo), '')::text AS grupo,
       nullif(btrim(s.esfera), '')::text AS esfera,
       etl.parse_date(s.data_criacao) AS data_criacao,
       nullif(btrim(s.ato_criacao), '')::text AS ato_criacao,
       nullif(btrim(s.outros_atos), '')::text AS outros_atos,
       nullif(btrim(s.plano_manejo), '')::text AS plano_manejo,
       nullif(btrim(s.cogestor), '')::text AS cogestor,
       etl.parse_number(s.area_total_ha) AS area_total_ha,
       etl.parse_number(s.area_ato_ha) AS area_ato_ha,
       etl.parse_number(s.area_fonte_ha) AS area_fonte_ha,
       u.ufs,
       etl.text_list(s.municipios) AS municipios,
       nullif(btrim(s.orgao_gestor), '')::text AS orgao_gestor,
       nullif(btrim(s.categoria_iucn), '')::text AS categoria_iucn,
       nullif(btrim(s.situacao), '')::text AS situacao,
       nullif(btrim(s.limite), '')::text AS limite,
       nullif(btrim(s.quali_pol), '')::text AS quali_pol,
       nullif(btrim(s.ppgr), '')::text AS ppgr,
       etl.code_text(s.docleg_id) AS docleg_id,
       etl.code_text(s.wdpa_pid) AS wdpa_pid,
       nullif(btrim(s.nome_abreviado), '')::text AS nome_abreviado,
       nullif(jsonb_strip_nulls(jsonb_build_object(
         'amazonia', etl.parse_number(s.amazonia), 'caatinga', etl.parse_number(s.caatinga),
         'cerrado', etl.parse_number(s.cerrado), 'matlantica', etl.parse_number(s.matlantica),
         'pampa', etl.parse_number(s.pampa), 'pantanal', etl.parse_number(s.pantanal),
         'marinho', etl.parse_number(s.marinho))), '{}'::jsonb) AS area_bioma_ha,
       -- geodesic: these polygons reach far from the Albers origin
       ST_Area(c.geom::geography) / 10000 AS area_calculada_ha
-- @unparsed
         'area_total_ha', CASE WHEN btrim(s.area_total_ha) <> '' AND etl.parse_number(s.area_total_ha) IS NULL THEN s.area_total_ha END,
         'area_ato_ha', CASE WHEN btrim(s.area_ato_ha) <> '' AND etl.parse_number(s.area_ato_ha) IS NULL THEN s.area_ato_ha END,
         'area_fonte_ha', CASE WHEN btrim(s.area_fonte_ha) <> '' AND etl.parse_number(s.area_fonte_ha) IS NULL THEN s.area_fonte_ha END,
         'area_bioma_ha', nullif(jsonb_strip_nulls(jsonb_build_object(
           'amazonia', CASE WHEN btrim(s.amazonia) <> '' AND etl.parse_number(s.amazonia) IS NULL THEN s.amazonia END,
           'caatinga', CASE WHEN btrim(s.caatinga) <> '' AND etl.parse_number(s.caatinga) IS NULL THEN s.caatinga END,
           'cerrado', CASE WHEN btrim(s.cerrado) <> '' AND etl.parse_number(s.cerrado) IS NULL THEN s.cerrado END,
           'matlantica', CASE WHEN btrim(s.matlantica) <> '' AND etl.parse_number(s.matlantica) IS NULL THEN s.matlantica END,
           'pampa', CASE WHEN btrim(s.pampa) <> '' AND etl.parse_number(s.pampa) IS NULL THEN s.pampa END,
           'pantanal', CASE WHEN btrim(s.pantanal) <> '' AND etl.parse_number(s.pantanal) IS NULL THEN s.pantanal END,
           'marinho', CASE WHEN btrim(s.marinho) <> '' AND etl.parse_number(s.marinho) IS NULL THEN s.marinho END)), '{}'::jsonb),
         'data_criacao', CASE WHEN etl.date_kind(s.data_criacao) = 'bad' THEN s.data_criacao END,
         'ufs', CASE WHEN u.unknown THEN s.ufs END
-- @joins
CROSS JOIN LATERAL (
  SELECT nullif(array_agg(etl.uf_sigla_from_name(x) ORDER BY n) FILTER (WHERE etl.uf_sigla_from_name(x) IS NOT NULL), '{}'::text[]) AS ufs,
         coalesce(bool_or(etl.uf_sigla_from_name(x) IS NULL), false) AS unknown
  FROM unnest(etl.text_list(s.ufs)) WITH ORDINALITY AS l(x, n)
) u
