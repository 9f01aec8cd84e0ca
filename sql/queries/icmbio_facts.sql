-- What the quality report says of one ICMBio load, counted from the kept typed embargoes
-- (queries/icmbio_typed.sql) in one statement: documents per class (absent, masked, CPF, CNPJ,
-- other) and those completed with their lost zeros, num_emb shared across series, embargoes
-- without a conservation unit.
WITH kept AS MATERIALIZED (
  SELECT documento, documento_tipo, documento_escrito, documento_completado, numero_embargo, nome_uc, cnuc FROM {{classified}} WHERE verdict = 'ok'
), classes AS (
  SELECT CASE WHEN documento IS NULL AND NOT documento_escrito THEN 'ausente'
              WHEN documento IS NULL THEN 'outro'
              WHEN strpos(documento, '*') > 0 THEN 'mascarado'
              WHEN documento_tipo IN ('cpf', 'cnpj') THEN documento_tipo
              ELSE 'outro' END AS classe, count(*)::int AS n
  FROM kept GROUP BY 1
), shared AS (
  SELECT count(*)::int AS n FROM kept GROUP BY numero_embargo HAVING count(*) > 1
)
SELECT (SELECT coalesce(jsonb_object_agg(classe, n), '{}'::jsonb) FROM classes) AS documentos,
       (SELECT count(*) FROM kept WHERE documento_completado)::int AS zeros_completados,
       (SELECT count(*) FROM shared)::int AS grupos,
       (SELECT coalesce(sum(n), 0) FROM shared)::int AS repetidos,
       (SELECT count(*) FROM kept WHERE nome_uc IS NULL AND cnuc IS NULL)::int AS sem_uc
