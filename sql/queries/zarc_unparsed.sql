-- Per column, among typed rows that were kept: values that did not parse (source text in
-- `extra`) and overflowed values (runs of asterisks, no value).
SELECT 'unparsed' AS kind, k AS col, count(*)::integer AS n
FROM {{typed}} t CROSS JOIN LATERAL jsonb_object_keys(t.unparsed) k
WHERE t.verdict = 'ok' AND t.unparsed IS NOT NULL
GROUP BY 2
UNION ALL
SELECT 'overflowed', c, count(*)::integer
FROM {{typed}} t CROSS JOIN LATERAL unnest(t.overflowed) c
WHERE t.overflowed IS NOT NULL
GROUP BY 2
ORDER BY 1, 2
