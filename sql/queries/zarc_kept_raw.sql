-- Values kept raw in `extra` among the rows loaded: the last read copy of each chave
-- (lastReadPerKey), looked at only for the keys of which some kept copy has an unparsed
-- value (a copy dropped or a row rejected is no value of the snapshot). Per column, the
-- invalid risk cells per value and their first occurrences (file, src_seq, decêndio), the
-- rows with an invalid cell and the rows with an optional code that is not digits.
WITH w AS (
  SELECT DISTINCT ON (c.chave) c.file_no, c.src_seq, c.unparsed, c.invalid_cells
  FROM {{classified}} c
  WHERE c.verdict = 'ok' AND c.chave IN (SELECT chave FROM {{classified}} WHERE verdict = 'ok' AND unparsed IS NOT NULL)
  ORDER BY c.chave, {{last_read_first}}
), kept AS (
  SELECT * FROM w WHERE unparsed IS NOT NULL
), cells AS (
  SELECT k.file_no, k.src_seq, substr(e.key, 4)::integer AS decendio, btrim(e.value #>> '{}') AS valor
  FROM kept k CROSS JOIN LATERAL jsonb_each(k.unparsed) e
  WHERE e.key IN ({{dec_keys}})
)
SELECT (SELECT coalesce(jsonb_object_agg(col, n), '{}') FROM (SELECT e AS col, count(*)::integer AS n FROM kept CROSS JOIN LATERAL jsonb_object_keys(kept.unparsed) e GROUP BY 1) x) AS unparsed,
       (SELECT count(*)::integer FROM cells) AS invalid_cells,
       (SELECT count(*)::integer FROM kept WHERE invalid_cells > 0) AS invalid_rows,
       (SELECT count(*)::integer FROM kept WHERE unparsed - ARRAY[{{dec_keys}}] <> '{}'::jsonb) AS bad_code,
       (SELECT coalesce(jsonb_object_agg(valor, n), '{}') FROM (SELECT valor, count(*)::integer AS n FROM cells GROUP BY 1) x) AS "values",
       (SELECT coalesce(jsonb_agg(s ORDER BY s.file_no, s.src_seq, s.decendio), '[]')
          FROM (SELECT * FROM cells ORDER BY file_no, src_seq, decendio LIMIT 20) s) AS samples
