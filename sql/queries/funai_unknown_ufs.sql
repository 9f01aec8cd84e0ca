-- UF siglas in uf_sigla of the kept lands that are not Brazilian states, with counts.
SELECT btrim(x) AS name, count(*)::int AS n
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
CROSS JOIN LATERAL unnest(etl.text_list(upper(s.ufs))) AS x
WHERE c.verdict = 'ok' AND etl.uf_ibge_code(x) IS NULL
GROUP BY 1
ORDER BY 2 DESC, 1
