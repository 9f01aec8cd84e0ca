-- Per column, among typed rows that were kept: values that did not parse (source text in `extra`).
SELECT k AS col, count(*)::integer AS n
FROM {{classified}} t CROSS JOIN LATERAL jsonb_object_keys(t.unparsed) k
WHERE t.verdict = 'ok' AND t.unparsed IS NOT NULL
GROUP BY 1
ORDER BY 1
