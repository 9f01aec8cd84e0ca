-- The SNV snapshot of one version: typed, in EPSG:4326, one row per kept segment (codes
-- are not deduplicated: every drawn stretch of road counts for distance-to-road).
-- Column order and types match snap.dnit_snv__template.
CREATE TABLE {{target}} AS
SELECT c.codigo::text AS codigo,
       coalesce(b.br, b.br_of_code)::text AS br,
       nullif(upper(btrim(s.uf)), '')::text AS uf,
       etl.parse_number(s.km_inicial) AS km_inicial,
       etl.parse_number(s.km_final) AS km_final,
       etl.parse_number(s.extensao_km) AS extensao_km,
       ST_Length(c.g::geography) / 1000 AS extensao_calculada_km,
       nullif(upper(btrim(s.tipo_trecho)), '')::text AS tipo_trecho,
       nullif(btrim(s.nome_tipo_trecho), '')::text AS nome_tipo_trecho,
       nullif(btrim(s.superficie), '')::text AS superficie,
       nullif(btrim(s.legenda), '')::text AS legenda,
       nullif(btrim(s.jurisdicao), '')::text AS jurisdicao,
       nullif(btrim(s.unidade_local), '')::text AS unidade_local,
       {{versao}}::text AS versao,
       nullif(jsonb_strip_nulls(jsonb_build_object(
         'ds_codigo', nullif(btrim(s.ds_codigo), ''),
         'ds_coinc', nullif(btrim(s.ds_coinc), ''),
         'ds_tipo_pln', nullif(btrim(s.ds_tipo_pln), ''),
         -- numbers that do not parse are NULL, their text kept (never silently nulled)
         'km_inicial', CASE WHEN btrim(s.km_inicial) <> '' AND etl.parse_number(s.km_inicial) IS NULL AND NOT etl.is_overflow(s.km_inicial) THEN s.km_inicial END,
         'km_final', CASE WHEN btrim(s.km_final) <> '' AND etl.parse_number(s.km_final) IS NULL AND NOT etl.is_overflow(s.km_final) THEN s.km_final END,
         'extensao_km', CASE WHEN btrim(s.extensao_km) <> '' AND etl.parse_number(s.extensao_km) IS NULL AND NOT etl.is_overflow(s.extensao_km) THEN s.extensao_km END
       )) || coalesce(s.extra, '{}'::jsonb), '{}'::jsonb) AS extra,
       c.g::geometry(MultiLineString, 4326) AS geom,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
-- BR numbers come unpadded (40, '40', 40.0): zero-pad to 3 (SOURCES §8.7); else the code's first 3 digits.
CROSS JOIN LATERAL (
  SELECT CASE WHEN x ~ '^\d{1,3}$' THEN lpad(x, 3, '0') END AS br,
         CASE WHEN c.codigo ~ '^\d{3}' THEN left(c.codigo, 3) END AS br_of_code
  FROM (SELECT regexp_replace(btrim(s.br), '\.0*$', '') AS x) p
) b
WHERE c.verdict = 'ok'
ORDER BY c.src_seq
