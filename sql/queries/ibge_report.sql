-- Facts of a loaded mesh snapshot: the features that are not municipalities (kept in the
-- snapshot, left out of serving.ibge_municipios), the codes that several features shared,
-- the official codes the mesh lacks (loaded without geometry) and the mesh's features whose
-- code is shaped like a municipality's but that the official list lacks (SOURCES §9.7).
SELECT 'nao_municipio' AS kind, geocodigo, nome, uf, NULL::int AS features
FROM {{target}} WHERE NOT is_municipio
UNION ALL
SELECT 'codigo_repetido', c.geocodigo, NULL, NULL, count(*)::int
FROM {{classified}} c WHERE c.verdict = 'ok' GROUP BY c.geocodigo HAVING count(*) > 1
UNION ALL
SELECT 'sem_malha', geocodigo, nome, uf, NULL
FROM {{target}} WHERE geom IS NULL AND is_municipio
UNION ALL
SELECT 'fora_da_lista', geocodigo, nome, uf, NULL
FROM {{target}} WHERE NOT is_municipio AND etl.ibge_is_municipio(geocodigo)
ORDER BY 1, 2
