-- One row per term (id_tad): the most recently changed version (DAT_ULT_ALTERACAO) wins,
-- then the one read last. Rows without a term number have no key and are not candidates.
CREATE UNLOGGED TABLE {{winners}} AS
SELECT DISTINCT ON (id_tad) src_seq, id_tad
FROM (
  SELECT src_seq, etl.ibama_id_tad(seq_tad, numero_tad, serie_tad) AS id_tad,
         etl.ibama_timestamp(data_alteracao) AS changed
  FROM {{stage}}
  WHERE nullif(btrim(numero_tad), '') IS NOT NULL
) s
ORDER BY id_tad, changed DESC NULLS LAST, src_seq DESC
