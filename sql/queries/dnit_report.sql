-- Facts of a loaded SNV version: the observed surface values (their spelling per version
-- is unverified, SOURCES §8.5), segments whose geodesic length differs from the declared
-- vl_extensa by more than {{limit}} (relative; reported, never overwritten, §1.2), and
-- codes that several segments share.
SELECT 'superficie' AS kind, superficie AS codigo, count(*)::int AS n, NULL::float8 AS extensao_km, NULL::float8 AS calculada_km
FROM {{target}} GROUP BY superficie
UNION ALL
SELECT 'extensao_divergente', codigo, NULL, extensao_km, extensao_calculada_km
FROM {{target}}
WHERE extensao_km > 0 AND abs(extensao_calculada_km - extensao_km) > {{limit}} * extensao_km
UNION ALL
SELECT 'sem_extensao_declarada', NULL, count(*)::int, NULL, NULL
FROM {{target}} WHERE extensao_km IS NULL OR extensao_km <= 0
UNION ALL
SELECT 'codigo_repetido', codigo, count(*)::int, NULL, NULL
FROM {{target}} GROUP BY codigo HAVING count(*) > 1
ORDER BY 1, 2 NULLS FIRST
