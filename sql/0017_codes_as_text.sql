-- Codes are text, and a run of asterisks is no value (issue 6, A.3/A.4).
--
-- 1. Overflowed fields. A DBF numeric field too narrow for its value is written as a run of
--    asterisks ('**********': INCRA's cd_quilomb in most rows of the real layer). Such a
--    cell is NULL, not a value, wherever a value is typed (codes, numbers): etl.is_overflow
--    says so, etl.code_text and etl.zarc_code return NULL for it, etl.parse_number already
--    does (it is not a number), and loaders count it in the report (fields.overflowed)
--    instead of keeping it as text. (GDAL already reads such cells of N/F fields as NULL;
--    the loaders count those from the DBF bytes, src/etl/dbf-overflow.ts.)
-- 2. ZARC's codes become text. Real Cod_Cultura values have 14 digits ('12016720000011' is
--    soy): they overflowed the integer columns and every row published NULL. Every code
--    column (cod_cultura, ciclo, solo, manejo, cod_clima, cod_meso, cod_micro) is text,
--    in the template and in every kept snapshot table; the views are rebuilt on top.

-- A run of asterisks, possibly padded with spaces (a DBF numeric overflow).
CREATE FUNCTION etl.is_overflow(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(strpos(t, '*') > 0 AND btrim(t, ' *') = '', false)
$$;

-- An identifier read from a numeric or text field, as text: trimmed, NULL when empty or
-- overflowed ('**********'), '33801.0' (a Real DBF field) → '33801'. Dotted codes such as
-- '0000.41.0548' are kept. (Replaces the 0005 version, which kept asterisks as a code.)
CREATE OR REPLACE FUNCTION etl.code_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN etl.is_overflow(t) THEN NULL
              WHEN btrim(t) ~ '^\d+\.0*$' THEN split_part(btrim(t), '.', 1)
              ELSE nullif(btrim(t), '') END
$$;

-- A ZARC code as text: the digits as published (any length: crop codes have 14), trimmed;
-- NULL when empty, overflowed or not digits (the loader keeps such text in `extra` and
-- counts it). No regular expression: this runs on 7 columns of 3.3 M rows.
CREATE FUNCTION etl.zarc_code(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN t <> '' AND btrim(t, '0123456789') = '' THEN t
              WHEN btrim(t) <> '' AND btrim(btrim(t), '0123456789') = '' THEN btrim(t) END
$$;

DROP VIEW serving.zarc_periodos;
DROP VIEW serving.zarc_risco;
DROP VIEW "current".zarc_risco;

DO $$
DECLARE t text;
BEGIN
  FOR t IN SELECT format('snap.%I', tablename) FROM pg_tables
            WHERE schemaname = 'snap' AND (tablename = 'zarc_risco__template' OR tablename ~ '^zarc_risco__s\d+$')
  LOOP
    EXECUTE format('ALTER TABLE %s
      ALTER COLUMN cod_cultura TYPE text USING cod_cultura::text,
      ALTER COLUMN ciclo TYPE text USING ciclo::text,
      ALTER COLUMN solo TYPE text USING solo::text,
      ALTER COLUMN manejo TYPE text USING manejo::text,
      ALTER COLUMN cod_clima TYPE text USING cod_clima::text,
      ALTER COLUMN cod_meso TYPE text USING cod_meso::text,
      ALTER COLUMN cod_micro TYPE text USING cod_micro::text', t);
  END LOOP;
END $$;

-- current.zarc_risco as publication builds it (src/etl/publish.ts): the current snapshot, else the template.
DO $$
DECLARE body text;
BEGIN
  SELECT string_agg(format('SELECT * FROM snap.%I', 'zarc_risco__s' || snapshot_id), E'\nUNION ALL\n' ORDER BY scope)
    INTO body FROM etl.current WHERE dataset = 'zarc';
  EXECUTE 'CREATE VIEW "current".zarc_risco AS ' || coalesce(body, 'SELECT * FROM snap.zarc_risco__template');
END $$;

CREATE VIEW serving.zarc_risco AS
SELECT r.geocodigo, r.safra, r.cultura, r.cultura_busca, r.cod_cultura, r.ciclo, r.solo, r.manejo, r.nome_manejo,
       r.cod_clima, r.clima, r.portaria, r.uf, r.municipio, r.cod_municipio_bacen,
       r.dec1, r.dec2, r.dec3, r.dec4, r.dec5, r.dec6, r.dec7, r.dec8, r.dec9, r.dec10, r.dec11, r.dec12,
       r.dec13, r.dec14, r.dec15, r.dec16, r.dec17, r.dec18, r.dec19, r.dec20, r.dec21, r.dec22, r.dec23, r.dec24,
       r.dec25, r.dec26, r.dec27, r.dec28, r.dec29, r.dec30, r.dec31, r.dec32, r.dec33, r.dec34, r.dec35, r.dec36,
       r.safra_ini, r.safra_fim, r.produtividade, r.cod_nm, r.cod_meso, r.cod_micro, r.chave, r.extra, r.snapshot_id
FROM "current".zarc_risco r;

CREATE VIEW serving.zarc_periodos AS
SELECT r.geocodigo, r.safra, r.cultura, r.ciclo, r.solo, r.manejo, r.cod_clima, r.portaria,
       d.n::integer AS decendio, d.risco,
       etl.zarc_decendio_inicio(d.n::integer) AS inicio, etl.zarc_decendio_fim(d.n::integer) AS fim,
       r.chave, r.snapshot_id
FROM "current".zarc_risco r
CROSS JOIN LATERAL unnest(ARRAY[r.dec1, r.dec2, r.dec3, r.dec4, r.dec5, r.dec6, r.dec7, r.dec8, r.dec9,
  r.dec10, r.dec11, r.dec12, r.dec13, r.dec14, r.dec15, r.dec16, r.dec17, r.dec18, r.dec19, r.dec20, r.dec21,
  r.dec22, r.dec23, r.dec24, r.dec25, r.dec26, r.dec27, r.dec28, r.dec29, r.dec30, r.dec31, r.dec32, r.dec33,
  r.dec34, r.dec35, r.dec36]) WITH ORDINALITY AS d(risco, n)
WHERE d.risco IS NOT NULL;
