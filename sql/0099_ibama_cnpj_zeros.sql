-- etl.ibama_documento (0090) put back the zeros a CPF lost to a number (9–10 digits) and those
-- a CNPJ lost when it still had 12–13 digits. A CNPJ whose root starts with 000 (old
-- registrations: federal banks and bodies among them) loses three zeros or more and arrived
-- with 9–11 digits: published untyped, or, with 11 digits, as a garbled CPF, with an HMAC no
-- search by document finds. Now bare digits that are no CPF however padded become a CNPJ when
-- the padded value passes its check digits. Where both read (a 9–10 digit value valid as
-- either, about 1 in 100), the CPF stays: far more CPFs start with 0 than CNPJs with 0000.
-- A formatted document never lost zeros: only bare digits are padded.
CREATE OR REPLACE FUNCTION etl.ibama_documento(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN strpos(c, '*') > 0 THEN nullif(regexp_replace(c, '[^0-9A-Z*]', '', 'g'), '')
              WHEN c ~ '^[0-9A-Z]{12}[0-9]{2}$' THEN c
              WHEN c ~ '^[0-9]{11}$' AND (NOT bare OR etl.cpf_ok(c) OR NOT etl.cnpj_ok(lpad(c, 14, '0'))) THEN c
              WHEN c ~ '^[0-9]{9,10}$' AND etl.cpf_ok(lpad(c, 11, '0')) THEN lpad(c, 11, '0')
              WHEN c ~ '^[0-9]{12,13}$' AND etl.cnpj_ok(lpad(c, 14, '0')) THEN lpad(c, 14, '0')
              WHEN bare AND c ~ '^[0-9]{9,11}$' AND etl.cnpj_ok(lpad(c, 14, '0')) THEN lpad(c, 14, '0')
              ELSE nullif(regexp_replace(coalesce(t, ''), '\D', '', 'g'), '') END
  FROM (SELECT upper(regexp_replace(coalesce(t, ''), '[\s./-]', '', 'g')) AS c,
               coalesce(btrim(t) ~ '^[0-9]+$', false) AS bare) x
$$;
