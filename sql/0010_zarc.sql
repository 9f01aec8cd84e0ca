-- ZARC risk table (MAPA Tábua de Risco, SOURCES §7): one national snapshot covering every
-- season file of the source (crop seasons + the perennial/vegetable file). Non-spatial;
-- joins to geometry through geocodigo. One row per chave =
-- cultura|ciclo|solo|geocodigo|manejo|cod_clima|safra|portaria (empty text for a NULL part).

-- Non-negative integer codes written as text; NULL when empty or not an integer. (Digit
-- tests with btrim(…, digits) rather than regular expressions: this runs on 3.3 M rows.)
CREATE FUNCTION etl.zarc_int(t text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN t <> '' AND length(t) <= 9 AND btrim(t, '0123456789') = '' THEN t::integer
              WHEN length(btrim(t)) BETWEEN 1 AND 9 AND btrim(btrim(t), '0123456789') = '' THEN btrim(t)::integer END
$$;

-- A risk cell: 20, 30 or 40 (% chance of loss); NULL for "not indicated" (0 or empty) and
-- for anything else (counted as invalid by etl.zarc_risco_invalido).
-- (36 cells a row: the common spellings are tested before any trimming.)
CREATE FUNCTION etl.zarc_risco(t text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE t WHEN '0' THEN NULL WHEN '' THEN NULL
    WHEN '20' THEN 20::smallint WHEN '30' THEN 30::smallint WHEN '40' THEN 40::smallint
    ELSE CASE btrim(t) WHEN '20' THEN 20::smallint WHEN '30' THEN 30::smallint WHEN '40' THEN 40::smallint END END
$$;

-- True for a cell that is neither a risk value nor "not indicated" (e.g. 25, 'x').
CREATE FUNCTION etl.zarc_risco_invalido(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT t IS NOT NULL AND t NOT IN ('0', '', '20', '30', '40')
     AND btrim(t) NOT IN ('', '20', '30', '40') AND btrim(btrim(t), '0') <> ''
$$;

-- An IBGE municipality code by shape: 7 digits, the first two a real UF code (never by
-- check digit: 9 official codes fail it, SOURCES §1.3). The same test as etl.ibge_code_ok
-- (0004), written without a regular expression or a jsonb lookup: that one is not inlined
-- (jsonb_build_object is STABLE) and costs ~20 times more a row, and this runs on 3.3 M rows.
CREATE FUNCTION etl.zarc_geocodigo_ok(g text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(length(g) = 7 AND btrim(g, '0123456789') = '' AND left(g, 2) IN (
    '11','12','13','14','15','16','17','21','22','23','24','25','26','27','28','29',
    '31','32','33','35','41','42','43','50','51','52','53'), false)
$$;

-- Search form of a crop name: accents stripped, ordinal indicators spelled out, lower case,
-- whitespace collapsed ('Milho 2ª Safra' → 'milho 2a safra', 'Feijão' → 'feijao').
-- translate() rather than the unaccent extension: IMMUTABLE and no contrib module needed.
CREATE FUNCTION etl.zarc_busca(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(btrim(regexp_replace(lower(translate(t,
    'áàâãäåéèêëíìîïóòôõöúùûüçñýÿÁÀÂÃÄÅÉÈÊËÍÌÎÏÓÒÔÕÖÚÙÛÜÇÑÝªº',
    'aaaaaaeeeeiiiiooooouuuucnyyAAAAAAEEEEIIIIOOOOOUUUUCNYao')), '\s+', ' ', 'g')), '')
$$;

-- Decêndio n (1..36): month ⌈n/3⌉, days 1–10, 11–20 or 21–end of month, as 'MM-DD'.
-- The end of February is '02-29' (the period runs to the month's end, leap years included;
-- as 'MM-DD' text it still orders correctly against '02-28').
CREATE FUNCTION etl.zarc_decendio_inicio(n integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN n BETWEEN 1 AND 36 THEN lpad(((n + 2) / 3)::text, 2, '0') || '-' || (ARRAY['01', '11', '21'])[(n - 1) % 3 + 1] END
$$;

CREATE FUNCTION etl.zarc_decendio_fim(n integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN n NOT BETWEEN 1 AND 36 THEN NULL
    WHEN (n - 1) % 3 = 0 THEN lpad(((n + 2) / 3)::text, 2, '0') || '-10'
    WHEN (n - 1) % 3 = 1 THEN lpad(((n + 2) / 3)::text, 2, '0') || '-20'
    ELSE to_char(make_date(2024, (n + 2) / 3, 1) + interval '1 month' - interval '1 day', 'MM-DD') END
$$;

CREATE TABLE snap.zarc_risco__template (
  geocodigo           text NOT NULL,
  safra               text NOT NULL,
  cultura             text NOT NULL,
  cultura_busca       text,
  cod_cultura         integer,
  ciclo               integer NOT NULL,
  solo                integer NOT NULL,
  manejo              integer,
  nome_manejo         text,
  cod_clima           integer,
  clima               text,
  portaria            text,
  uf                  text,
  municipio           text,
  cod_municipio_bacen text,
  dec1 smallint, dec2 smallint, dec3 smallint, dec4 smallint, dec5 smallint, dec6 smallint,
  dec7 smallint, dec8 smallint, dec9 smallint, dec10 smallint, dec11 smallint, dec12 smallint,
  dec13 smallint, dec14 smallint, dec15 smallint, dec16 smallint, dec17 smallint, dec18 smallint,
  dec19 smallint, dec20 smallint, dec21 smallint, dec22 smallint, dec23 smallint, dec24 smallint,
  dec25 smallint, dec26 smallint, dec27 smallint, dec28 smallint, dec29 smallint, dec30 smallint,
  dec31 smallint, dec32 smallint, dec33 smallint, dec34 smallint, dec35 smallint, dec36 smallint,
  safra_ini           smallint,
  safra_fim           smallint,
  produtividade       text,
  cod_nm              text,
  cod_meso            integer,
  cod_micro           integer,
  chave               text COLLATE "C" NOT NULL, -- byte order: cheap sorts and key lookups
  extra               jsonb,
  snapshot_id         bigint NOT NULL
);

CREATE VIEW "current".zarc_risco AS SELECT * FROM snap.zarc_risco__template;

CREATE VIEW serving.zarc_risco AS
SELECT r.geocodigo, r.safra, r.cultura, r.cultura_busca, r.cod_cultura, r.ciclo, r.solo, r.manejo, r.nome_manejo,
       r.cod_clima, r.clima, r.portaria, r.uf, r.municipio, r.cod_municipio_bacen,
       r.dec1, r.dec2, r.dec3, r.dec4, r.dec5, r.dec6, r.dec7, r.dec8, r.dec9, r.dec10, r.dec11, r.dec12,
       r.dec13, r.dec14, r.dec15, r.dec16, r.dec17, r.dec18, r.dec19, r.dec20, r.dec21, r.dec22, r.dec23, r.dec24,
       r.dec25, r.dec26, r.dec27, r.dec28, r.dec29, r.dec30, r.dec31, r.dec32, r.dec33, r.dec34, r.dec35, r.dec36,
       r.safra_ini, r.safra_fim, r.produtividade, r.cod_nm, r.cod_meso, r.cod_micro, r.chave, r.extra, r.snapshot_id
FROM "current".zarc_risco r;

-- Long form: one row per indicated (non-NULL) ten-day period, with its calendar days.
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
