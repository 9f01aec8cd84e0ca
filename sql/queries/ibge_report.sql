-- Facts of a loaded mesh snapshot: the features that are not municipalities (kept in the
-- snapshot, left out of serving.ibge_municipios) and the codes that several features shared.
SELECT 'nao_municipio' AS kind, geocodigo, nome, uf, NULL::int AS features
FROM {{target}} WHERE NOT is_municipio
UNION ALL
SELECT 'codigo_repetido', c.geocodigo, NULL, NULL, count(*)::int
FROM {{classified}} c WHERE c.verdict = 'ok' GROUP BY c.geocodigo HAVING count(*) > 1
ORDER BY 1, 2
