-- Hectares per property and theme without double counting: the union of the detailed
-- polygons (overlaps counted once); the *_TOTAL union polygons only when a property
-- has no detailed ones. In APPS only APP_* codes are preservation areas; a polygon without
-- cod_tema (older per-municipality layout) counts as a detailed one (the union never double counts).
CREATE UNLOGGED TABLE {{theme_area}} AS
SELECT car,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'APPS' AND ((cod_tema LIKE 'APP\_%' AND cod_tema NOT LIKE '%\_TOTAL') OR cod_tema IS NULL)),
    ST_Collect(geom) FILTER (WHERE tema_base = 'APPS' AND cod_tema LIKE '%\_TOTAL')))) AS app_ha,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND coalesce(cod_tema, '') NOT LIKE '%\_TOTAL'),
    ST_Collect(geom) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND cod_tema LIKE '%\_TOTAL')))) AS reserva_legal_ha,
  etl.area_ha(ST_UnaryUnion(coalesce(
    ST_Collect(geom) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND coalesce(cod_tema, '') NOT LIKE '%\_TOTAL'),
    ST_Collect(geom) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND cod_tema LIKE '%\_TOTAL')))) AS area_consolidada_ha
FROM {{car_tema}}
GROUP BY car
