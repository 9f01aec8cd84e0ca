-- One theme's kept rows, typed and in EPSG:4326 (a UNION ALL branch of the car_tema snapshot).
-- An area that is not a number is NULL, its text kept in `extra` (area_ha).
SELECT c.car::text, {{uf}}::text AS uf, {{tema}}::text AS tema_base,
       nullif(btrim(s.cod_tema), '')::text AS cod_tema, nullif(btrim(s.nom_tema), '')::text AS nome_tema,
       etl.parse_number(s.num_area) AS area_ha, etl.area_ha(x.g) AS area_calculada_ha,
       etl.car_situacao(s.ind_status) AS situacao, nullif(btrim(s.des_condic), '')::text AS condicao,
       x.g::geometry(MultiPolygon, 4326) AS geom,
       CASE WHEN btrim(s.num_area) <> '' AND etl.parse_number(s.num_area) IS NULL AND NOT etl.is_overflow(s.num_area)
            THEN coalesce(s.extra, '{}'::jsonb) || jsonb_build_object('area_ha', s.num_area) ELSE s.extra END AS extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
CROSS JOIN LATERAL (SELECT ST_Multi(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)) AS g) x
WHERE c.verdict = 'ok'
