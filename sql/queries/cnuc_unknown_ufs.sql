-- State names in the `uf` lists of the kept units that are not one of the 27 units
-- (SOURCES §5.7: fail on unknown names), with how many units name each.
SELECT btrim(x) AS name, count(*)::int AS n
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
CROSS JOIN LATERAL unnest(etl.text_list(s.ufs)) AS x
WHERE c.verdict = 'ok' AND etl.uf_sigla_from_name(x) IS NULL
GROUP BY 1
ORDER BY 2 DESC, 1
