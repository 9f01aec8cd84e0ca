-- Keys read more than once: copies with the same risk cells (exact duplicates) and copies
-- whose cells differ (conflicts: all but the last read are dropped), with sample keys.
WITH g AS (
  SELECT t.chave, count(*) AS n, count(DISTINCT ARRAY[{{dec_names}}]) AS d
  FROM {{classified}} t
  WHERE t.verdict = 'ok'
  GROUP BY t.chave
  HAVING count(*) > 1
)
SELECT coalesce(sum(n - d), 0)::integer AS exact,
       coalesce(sum(d - 1), 0)::integer AS conflicting,
       (SELECT coalesce(array_agg(chave ORDER BY chave), '{}') FROM (SELECT chave FROM g WHERE d > 1 ORDER BY chave LIMIT 10) x) AS conflict_samples
FROM g
