-- A document IBAMA publishes masked ('***.456.789-**' as Receita masks CPFs, '123.***.***-00')
-- is not its visible digits: etl.ibama_documento reduced it to them ('456789'), published as a
-- 6-digit "document" with an HMAC that every other person with the same visible digits shares.
-- It is now kept as written without punctuation, asterisks included ('***456789**'): no type
-- (etl.documento_tipo), no HMAC (the declaration), counted as masked in the report
-- (pipelines/ibama-embargos, queries/ibama_facts.sql). Unmasked documents read as before.
CREATE OR REPLACE FUNCTION etl.ibama_documento(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN strpos(c, '*') > 0 THEN nullif(regexp_replace(c, '[^0-9A-Z*]', '', 'g'), '')
              WHEN c ~ '^[0-9]{11}$' OR c ~ '^[0-9A-Z]{12}[0-9]{2}$' THEN c
              ELSE nullif(regexp_replace(coalesce(t, ''), '\D', '', 'g'), '') END
  FROM (SELECT upper(regexp_replace(coalesce(t, ''), '[\s./-]', '', 'g')) AS c) x
$$;
