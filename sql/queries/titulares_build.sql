-- The car_titulares snapshot: the declared links of the extract. Column order and types
-- match snap.car_titulares__template (checked before publishing). The HMAC key comes from
-- the transaction-local setting agro.hmac_key, set by the loader (never in the SQL text).
CREATE TABLE {{target}} AS
SELECT c.car::text AS car,
       c.documento::text AS documento,
       c.tipo_documento::text AS tipo_documento,
       c.nome::text AS nome,
       c.vinculo::text AS vinculo,
       'declarado'::text AS origem,
       jsonb_build_object('fonte', 'extrato do operador', 'snapshot_id', {{snapshot_id}}::bigint) AS evidencia,
       etl.documento_hmac(c.documento, current_setting('agro.hmac_key')) AS documento_hmac,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{classified}} c
WHERE c.verdict = 'ok'
ORDER BY c.car, c.src_seq
