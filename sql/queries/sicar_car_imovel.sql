-- The car_imovel snapshot of one state: typed, repaired, in EPSG:4326, one row per CAR.
-- Column order and types match snap.car_imovel__template (checked before publishing).
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
       etl.parse_date(s.dat_criaca) AS data_inscricao,
       etl.parse_date(s.dat_atuali) AS data_atualizacao,
       ST_Centroid(x.g)::geometry(Point, 4326) AS centroid,
       x.g::geometry(MultiPolygon, 4326) AS geom,
       s.extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{winners}} w
JOIN (SELECT *, upper(btrim(car)) AS car_n FROM {{stage}}) s ON s.src_seq = w.src_seq
LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
LEFT JOIN {{theme_area}} t ON t.car = w.car
CROSS JOIN LATERAL (SELECT ST_Multi(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)) AS g) x
