-- The funai_tis snapshot's own columns, rendered into queries/layer_build.sql (one row per
-- kept land): column order and types match snap.funai_tis__template (checked before
-- publishing). Values that do not parse load as NULL and keep their source text in `extra`
-- under the canonical name.
-- @columns
       nullif(btrim(s.nome), '')::text AS nome,
       etl.text_list(s.etnias) AS etnias,
       etl.text_list(s.municipios) AS municipios,
       etl.text_list(upper(s.ufs)) AS ufs,
       etl.parse_number(s.area_declarada_ha) AS area_declarada_ha,
       ST_Area(c.geom::geography) / 10000 AS area_calculada_ha, -- geodesic: these polygons reach far from the Albers origin
       nullif(btrim(s.fase), '')::text AS fase,
       nullif(btrim(s.modalidade), '')::text AS modalidade,
       nullif(btrim(s.reestudo), '')::text AS reestudo,
       nullif(btrim(s.coordenacao_regional), '')::text AS coordenacao_regional,
       etl.parse_flag(s.faixa_fronteira) AS faixa_fronteira,
       etl.code_text(s.unidade_adm_codigo) AS unidade_adm_codigo,
       nullif(btrim(s.unidade_adm_nome), '')::text AS unidade_adm_nome,
       nullif(btrim(s.unidade_adm_sigla), '')::text AS unidade_adm_sigla,
       etl.parse_flag(s.dominio_uniao) AS dominio_uniao,
       etl.parse_date(s.data_atualizacao) AS data_atualizacao
-- @unparsed
         'area_declarada_ha', CASE WHEN btrim(s.area_declarada_ha) <> '' AND etl.parse_number(s.area_declarada_ha) IS NULL THEN s.area_declarada_ha END,
         'faixa_fronteira', CASE WHEN btrim(s.faixa_fronteira) <> '' AND etl.parse_flag(s.faixa_fronteira) IS NULL THEN s.faixa_fronteira END,
         'dominio_uniao', CASE WHEN btrim(s.dominio_uniao) <> '' AND etl.parse_flag(s.dominio_uniao) IS NULL THEN s.dominio_uniao END,
         'data_atualizacao', CASE WHEN etl.date_kind(s.data_atualizacao) = 'bad' THEN s.data_atualizacao END
