-- Items of uf_sigla (split as the ufs column is: etl.uf_list) of the kept lands that are not
-- Brazilian states, with counts.
SELECT x AS name, count(*)::int AS n
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
CROSS JOIN LATERAL unnest(etl.uf_list(s.ufs)) AS x
WHERE c.verdict = 'ok' AND etl.uf_ibge_code(x) IS NULL
GROUP BY 1
ORDER BY 2 DESC, 1
