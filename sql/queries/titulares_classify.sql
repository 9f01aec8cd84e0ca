-- One verdict per row of the holder extract (staged as text by stageCsv): 'ok',
-- 'duplicate' (same car, documento and vinculo as an earlier row, after normalisation:
-- the first one in file order is kept), or the first failing check, in this order:
-- 'bad_car_number' (not ^[A-Z]{2}-\d{7}-[0-9A-F]{32}$ with the UF's IBGE code),
-- 'bad_document' (not a CPF or CNPJ with valid check digits), 'bad_vinculo' (not
-- proprietario / possuidor). `fffd` marks rows holding U+FFFD (the file was not UTF-8).
-- Every column of snap.car_titulares is typed here (ShapeSpec.typed: the build copies the
-- kept rows). The HMAC key comes from the transaction-local setting agro.hmac_key, set by
-- the loader (never in the SQL text); only checked documents get one.
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
WITH n AS (
  SELECT s.src_seq,
         upper(etl.trim_spaces(coalesce(s.car, ''))) AS car,
         etl.documento_normalizado(coalesce(s.documento, '')) AS documento,
         nullif(regexp_replace(btrim(coalesce(s.nome, ''), E' \t\r\n\u00a0'), '\s+', ' ', 'g'), '') AS nome,
         etl.titular_vinculo(s.vinculo) AS vinculo,
         strpos(concat_ws(' ', s.car, s.documento, s.nome, s.vinculo), chr(65533)) > 0 AS fffd
  FROM {{stage}} s
), checked AS (
  SELECT n.*, t.tipo_documento,
         CASE WHEN NOT etl.car_number_ok(n.car) THEN 'bad_car_number'
              WHEN t.tipo_documento IS NULL THEN 'bad_document'
              WHEN n.vinculo IS NULL THEN 'bad_vinculo'
              ELSE 'ok' END AS check_verdict
  FROM n
  CROSS JOIN LATERAL (SELECT etl.documento_tipo(n.documento) AS tipo_documento) t
)
SELECT c.src_seq, c.car, c.documento, c.tipo_documento, c.nome, c.vinculo, c.fffd,
       'declarado'::text AS origem,
       jsonb_build_object('fonte', 'extrato do operador', 'snapshot_id', {{snapshot_id}}::bigint) AS evidencia,
       CASE WHEN c.check_verdict = 'ok' THEN etl.documento_hmac(c.documento, current_setting('agro.hmac_key')) END AS documento_hmac,
       {{snapshot_id}}::bigint AS snapshot_id,
       CASE WHEN c.check_verdict = 'ok'
             AND row_number() OVER (PARTITION BY c.check_verdict, c.car, c.documento, c.vinculo ORDER BY c.src_seq) > 1
            THEN 'duplicate' ELSE c.check_verdict END AS verdict
FROM checked c
