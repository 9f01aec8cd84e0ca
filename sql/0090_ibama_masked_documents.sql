-- IBAMA's documents as they really arrive (SOURCES §1.6), read by etl.ibama_documento:
--
-- 1. A document the source publishes masked ('***.456.789-**' as Receita masks CPFs,
--    '123.***.***-00') is not its visible digits: it was reduced to them ('456789'), published
--    as a 6-digit "document" with an HMAC that every other person with the same visible
--    digits shared. It is now kept as written without punctuation, asterisks included
--    ('***456789**'): no type (etl.documento_tipo), no HMAC (the declaration), counted as
--    masked in the report (pipelines/ibama-embargos, queries/ibama_facts.sql).
-- 2. Bare digits that went through a number (the shapefile's cpf_cnpj_s as a numeric DBF
--    field, a spreadsheet re-save of the CSV) lost their leading zeros: a CPF starting with 0
--    came with 10 digits (or 9), such a CNPJ with 13 (or 12), published garbled with an HMAC
--    no search by document could find. Zeros are put back when the padded value passes its
--    check digits (etl.cpf_ok / etl.cnpj_ok, sql/0013); otherwise the digits stay as written.
--    A formatted document ('012.345.678-90') never lost them.
-- Other documents read as before.
CREATE OR REPLACE FUNCTION etl.ibama_documento(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN strpos(c, '*') > 0 THEN nullif(regexp_replace(c, '[^0-9A-Z*]', '', 'g'), '')
              WHEN c ~ '^[0-9]{11}$' OR c ~ '^[0-9A-Z]{12}[0-9]{2}$' THEN c
              WHEN c ~ '^[0-9]{9,10}$' AND etl.cpf_ok(lpad(c, 11, '0')) THEN lpad(c, 11, '0')
              WHEN c ~ '^[0-9]{12,13}$' AND etl.cnpj_ok(lpad(c, 14, '0')) THEN lpad(c, 14, '0')
              ELSE nullif(regexp_replace(coalesce(t, ''), '\D', '', 'g'), '') END
  FROM (SELECT upper(regexp_replace(coalesce(t, ''), '[\s./-]', '', 'g')) AS c) x
$$;

-- Whether etl.ibama_documento put leading zeros back (counted in the report).
CREATE FUNCTION etl.ibama_documento_completado(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(btrim(t) ~ '^[0-9]+$' AND length(etl.ibama_documento(t)) > length(btrim(t)), false)
$$;
