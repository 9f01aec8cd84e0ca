-- The incra_quilombos snapshot's own columns, rendered into queries/layer_build.sql (one
-- row per kept territory): column order and types match snap.incra_quilombos__template
-- (checked before publishing). Dates come as dd/mm/yyyy or yyyy-mm-dd in the same column;
-- any other text loads as NULL and keeps its source text in `extra` under the canonical
-- name (so do numbers, flags and UF siglas that do not parse; a run of asterisks is no value
-- and is not kept). A territory keyed by a fallback (incra_keys.sql) says so in
-- extra.codigo_origem ('processo', 'comunidade' or 'geometria').
-- @columns
       nullif(btrim(s.comunidade), '')::text AS comunidade,
       nullif(btrim(s.municipio), '')::text AS municipio,
       CASE WHEN etl.uf_ibge_code(btrim(s.uf)) IS NOT NULL THEN upper(btrim(s.uf)) END::text AS uf,
       nullif(btrim(s.sr_incra), '')::text AS sr_incra,
       nullif(btrim(s.numero_processo), '')::text AS numero_processo,
       nullif(btrim(s.fase), '')::text AS fase,
       nullif(btrim(s.esfera), '')::text AS esfera,
       nullif(btrim(s.responsavel), '')::text AS responsavel,
       n.familias,
       etl.parse_number(s.area_ha) AS area_ha,
       etl.parse_number(s.perimetro) AS perimetro,
       etl.parse_number(s.area_calc_fonte) AS area_calc_fonte,
       etl.parse_number(s.perimetro_calc_fonte) AS perimetro_calc_fonte,
       ST_Area(c.geom::geography) / 10000 AS area_calculada_ha, -- geodesic: these polygons reach far from the Albers origin
       etl.parse_flag(s.titulado) AS titulado,
       etl.parse_date_dmy_iso(s.data_portaria) AS data_portaria,
       etl.parse_date_dmy_iso(s.data_publicacao_decreto) AS data_publicacao_decreto,
       etl.parse_date_dmy_iso(s.data_decreto) AS data_decreto,
       etl.parse_date_dmy_iso(s.data_titulacao) AS data_titulacao,
       nullif(btrim(s.cod_sipra), '')::text AS cod_sipra,
       nullif(btrim(s.observacao), '')::text AS observacao,
       nullif(btrim(s.tipo_levantamento), '')::text AS tipo_levantamento
-- @unparsed
         'uf', CASE WHEN btrim(s.uf) <> '' AND etl.uf_ibge_code(btrim(s.uf)) IS NULL THEN s.uf END,
         'codigo_origem', k.origem,
         'familias', CASE WHEN btrim(s.familias) <> '' AND n.familias IS NULL AND NOT etl.is_overflow(s.familias) THEN s.familias END,
         'area_ha', CASE WHEN btrim(s.area_ha) <> '' AND etl.parse_number(s.area_ha) IS NULL AND NOT etl.is_overflow(s.area_ha) THEN s.area_ha END,
         'perimetro', CASE WHEN btrim(s.perimetro) <> '' AND etl.parse_number(s.perimetro) IS NULL AND NOT etl.is_overflow(s.perimetro) THEN s.perimetro END,
         'titulado', CASE WHEN btrim(s.titulado) <> '' AND etl.parse_flag(s.titulado) IS NULL THEN s.titulado END,
         'data_portaria', CASE WHEN etl.date_dmy_iso_kind(s.data_portaria) = 'bad' THEN s.data_portaria END,
         'data_publicacao_decreto', CASE WHEN etl.date_dmy_iso_kind(s.data_publicacao_decreto) = 'bad' THEN s.data_publicacao_decreto END,
         'data_decreto', CASE WHEN etl.date_dmy_iso_kind(s.data_decreto) = 'bad' THEN s.data_decreto END,
         'data_titulacao', CASE WHEN etl.date_dmy_iso_kind(s.data_titulacao) = 'bad' THEN s.data_titulacao END
-- @joins
LEFT JOIN {{keys}} k ON k.src_seq = s.src_seq
CROSS JOIN LATERAL (
  SELECT CASE WHEN x = trunc(x) AND abs(x) <= 2147483647 THEN x::integer END AS familias
  FROM etl.parse_number(s.familias) AS x
) n
