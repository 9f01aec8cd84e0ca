-- The car_imovel snapshot of one state: typed, repaired, in EPSG:4326, one row per CAR.
-- Column order and types match snap.car_imovel__template (checked before publishing).
-- Dates after the release date ({{release_date}}, contract §3) and dates or numbers that do
-- not parse are NULL, their source text kept in `extra` under the column's name.
CREATE TABLE {{target}} AS
SELECT s.car_n::text AS car, {{uf}}::text AS uf, substr(s.car_n, 4, 7)::text AS cod_municipio_ibge,
       nullif(btrim(s.municipio), '')::text AS municipio,
       etl.car_situacao(s.ind_status) AS situacao, etl.car_tipo(s.ind_tipo) AS tipo,
       nullif(btrim(s.des_condic), '')::text AS condicao,
       etl.parse_number(s.mod_fiscal) AS modulos_fiscais,
       etl.parse_number(s.num_area) AS area_total_ha,
       etl.area_ha(x.g) AS area_calculada_ha,
       CASE WHEN {{apps_loaded}} THEN coalesce(t.app_ha, 0) END AS app_ha,
       CASE WHEN {{rl_loaded}} THEN coalesce(t.reserva_legal_ha, 0) END AS reserva_legal_ha,
       CASE WHEN {{ac_loaded}} THEN coalesce(t.area_consolidada_ha, 0) END AS area_consolidada_ha,
       etl.date_not_after(etl.parse_date(s.dat_criaca), {{release_date}}) AS data_inscricao,
       etl.date_not_after(etl.parse_date(s.dat_atuali), {{release_date}}) AS data_atualizacao,
       ST_Centroid(x.g)::geometry(Point, 4326) AS centroid,
       x.g::geometry(MultiPolygon, 4326) AS geom,
       CASE WHEN coalesce(u.di, u.da, u.at, u.mf) IS NULL THEN s.extra
            ELSE coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
              'data_inscricao', u.di, 'data_atualizacao', u.da, 'area_total_ha', u.at, 'modulos_fiscais', u.mf)) END AS extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{winners}} w
JOIN (SELECT *, upper(btrim(car)) AS car_n FROM {{stage}}) s ON s.src_seq = w.src_seq
LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
LEFT JOIN {{theme_area}} t ON t.car = w.car
CROSS JOIN LATERAL (SELECT ST_Multi(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)) AS g) x
CROSS JOIN LATERAL (
  SELECT etl.date_unkept_text(s.dat_criaca, {{release_date}}) AS di,
         etl.date_unkept_text(s.dat_atuali, {{release_date}}) AS da,
         CASE WHEN btrim(s.num_area) <> '' AND etl.parse_number(s.num_area) IS NULL AND NOT etl.is_overflow(s.num_area) THEN s.num_area END AS at,
         CASE WHEN btrim(s.mod_fiscal) <> '' AND etl.parse_number(s.mod_fiscal) IS NULL AND NOT etl.is_overflow(s.mod_fiscal) THEN s.mod_fiscal END AS mf
) u
