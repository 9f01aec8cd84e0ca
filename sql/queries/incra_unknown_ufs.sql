-- cd_uf values of the kept territories that are not UF siglas (SOURCES §6.7: cd_uf is a
-- sigla, never a numeric code), with counts.
SELECT btrim(s.uf) AS name, count(*)::int AS n
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
WHERE c.verdict = 'ok' AND btrim(s.uf) <> '' AND etl.uf_ibge_code(btrim(s.uf)) IS NULL
GROUP BY 1
ORDER BY 2 DESC, 1
