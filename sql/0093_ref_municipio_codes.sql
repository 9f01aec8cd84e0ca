-- serving.ref_municipio fills the two crosswalk codes 0004 left NULL "until those crosswalks
-- are loaded"; they are loaded:
-- - cod_municipio_bacen: the Bacen code ZARC pairs with each geocodigo (Cod_Munic, SOURCES
--   §7.7 "use the Cod_Munic pairs to fill ref_municipio.cod_municipio_bacen");
-- - cod_municipio_rf: the Receita TOM code the receita-cnpj crosswalk matched to the
--   geocodigo (cnpj_municipios.codigo_ibge, SOURCES §1.3, §10.4).
-- A geocodigo paired with two different codes gets NULL, never one of them at random (the
-- ZARC load reports such geocodigos). ZARC is read per municipality through its (geocodigo,
-- cultura) index, so a lookup by code reads a few hundred rows, not the 3.3 M of a season.
-- (A migration that drops current.zarc_risco or current.cnpj_municipios drops this view too.)
CREATE OR REPLACE VIEW serving.ref_municipio AS
SELECT m.geocodigo, m.nome, m.uf, etl.normalize_nome(m.nome) AS nome_normalizado,
       rf.codigo AS cod_municipio_rf, bc.codigo AS cod_municipio_bacen,
       m.ano, m.snapshot_id
FROM "current".ibge_municipios m
LEFT JOIN (
  SELECT r.codigo_ibge, CASE WHEN min(r.codigo) = max(r.codigo) THEN min(r.codigo) END AS codigo
  FROM "current".cnpj_municipios r WHERE r.codigo_ibge IS NOT NULL GROUP BY r.codigo_ibge
) rf ON rf.codigo_ibge = m.geocodigo
LEFT JOIN LATERAL (
  SELECT CASE WHEN min(z.cod_municipio_bacen) = max(z.cod_municipio_bacen) THEN min(z.cod_municipio_bacen) END AS codigo
  FROM "current".zarc_risco z WHERE z.geocodigo = m.geocodigo
) bc ON true
WHERE m.is_municipio;
