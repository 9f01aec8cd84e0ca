-- The mesh snapshot: typed, repaired, in EPSG:4326, one row per code. Features sharing a
-- code are merged (union of their polygons, attributes of the first one read), so no
-- territory is lost. Column order and types match snap.ibge_municipios__template.
CREATE TABLE {{target}} AS
WITH merged AS (
  SELECT c.geocodigo, min(c.src_seq) AS first_seq,
         CASE WHEN count(*) = 1 THEN (array_agg(c.g))[1]
              ELSE ST_Multi(ST_CollectionExtract(ST_UnaryUnion(ST_Collect(c.g)), 3)) END AS g
  FROM {{classified}} c
  WHERE c.verdict = 'ok'
  GROUP BY c.geocodigo
)
SELECT m.geocodigo::text AS geocodigo,
       btrim(s.nome)::text AS nome,
       etl.uf_from_ibge_code(left(m.geocodigo, 2))::text AS uf,
       left(m.geocodigo, 2)::text AS cod_uf,
       etl.parse_number(s.area_km2) AS area_oficial_km2,
       ST_Area(m.g::geography) / 1e6 AS area_calculada_km2,
       ST_PointOnSurface(m.g)::geometry(Point, 4326) AS ponto_interior,
       {{ano}}::integer AS ano,
       etl.ibge_is_municipio(m.geocodigo) AS is_municipio,
       nullif(jsonb_strip_nulls(jsonb_build_object(
         'nm_uf', nullif(btrim(s.nm_uf), ''),
         'cd_rgi', nullif(btrim(s.cd_rgi), ''), 'nm_rgi', nullif(btrim(s.nm_rgi), ''),
         'cd_rgint', nullif(btrim(s.cd_rgint), ''), 'nm_rgint', nullif(btrim(s.nm_rgint), ''),
         'cd_regiao', nullif(btrim(s.cd_regiao), ''), 'nm_regiao', nullif(btrim(s.nm_regiao), ''),
         'sigla_rg', nullif(btrim(s.sigla_rg), ''),
         'cd_concurb', nullif(btrim(s.cd_concurb), ''), 'nm_concurb', nullif(btrim(s.nm_concurb), ''),
         'area_oficial_km2', CASE WHEN btrim(s.area_km2) <> '' AND etl.parse_number(s.area_km2) IS NULL AND NOT etl.is_overflow(s.area_km2) THEN s.area_km2 END
       )) || coalesce(s.extra, '{}'::jsonb), '{}'::jsonb) AS extra,
       m.g::geometry(MultiPolygon, 4326) AS geom,
       {{snapshot_id}}::bigint AS snapshot_id
FROM merged m
JOIN {{stage}} s ON s.src_seq = m.first_seq
ORDER BY m.geocodigo
