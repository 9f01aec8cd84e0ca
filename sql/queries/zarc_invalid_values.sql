-- Risk cells that are neither 20/30/40 nor "not indicated" (0 or empty): each value with its
-- count, and the first occurrences (file, src_seq, decêndio), over every staged row.
WITH cells AS (
  SELECT s.src_file::integer AS file_no, s.src_seq, d.n::integer AS decendio, btrim(d.v) AS valor
  FROM {{stage}} s
  CROSS JOIN LATERAL unnest(ARRAY[{{dec_names}}]) WITH ORDINALITY AS d(v, n)
  WHERE etl.zarc_risco_invalido(d.v)
)
SELECT 'count' AS kind, NULL::integer AS file_no, NULL::bigint AS src_seq, NULL::integer AS decendio, valor, count(*)::integer AS n
FROM cells GROUP BY valor
UNION ALL
(SELECT 'sample', file_no, src_seq, decendio, valor, NULL FROM cells ORDER BY file_no, src_seq, decendio LIMIT 20)
