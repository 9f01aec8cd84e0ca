-- IBGE Malha Municipal (SOURCES §9): one national snapshot per mesh year, and the
-- municipality crosswalk every name-only or code-only source resolves through (§1.3).

-- UF abbreviation of an IBGE UF code ('52' → 'GO'); NULL when the code is not a UF.
CREATE FUNCTION etl.uf_from_ibge_code(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (jsonb_build_object(
    '11','RO','12','AC','13','AM','14','RR','15','PA','16','AP','17','TO',
    '21','MA','22','PI','23','CE','24','RN','25','PB','26','PE','27','AL','28','SE','29','BA',
    '31','MG','32','ES','33','RJ','35','SP','41','PR','42','SC','43','RS',
    '50','MS','51','MT','52','GO','53','DF') ->> btrim(code))
$$;

-- An IBGE municipality code by shape: 7 digits whose first two are a real UF code.
-- Never by check digit: 9 official codes fail the algorithm (SOURCES §1.3).
CREATE FUNCTION etl.ibge_code_ok(code text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(code ~ '^\d{7}$' AND etl.uf_from_ibge_code(left(code, 2)) IS NOT NULL, false)
$$;

-- The mesh carries features that are not municipalities (Lagoa Mirim 4300001, Lagoa dos
-- Patos 4300002): their municipality number (digits 3–6) is 0000, which no municipality has.
CREATE FUNCTION etl.ibge_is_municipio(code text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT etl.ibge_code_ok(code) AND substr(code, 3, 4) <> '0000'
$$;

-- The name key of name-only joins (SOURCES §1.3): accents stripped, upper case, typographic
-- apostrophes unified, whitespace collapsed. translate() rather than the unaccent extension
-- so that the function is IMMUTABLE (indexable) and needs no contrib module.
-- Other pipelines must normalise their own names with this same function.
CREATE FUNCTION etl.normalize_nome(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(btrim(regexp_replace(upper(translate(t,
    'áàâãäåéèêëíìîïóòôõöúùûüçñýÿÁÀÂÃÄÅÉÈÊËÍÌÎÏÓÒÔÕÖÚÙÛÜÇÑÝ’‘´`',
    'aaaaaaeeeeiiiiooooouuuucnyyAAAAAAEEEEIIIIOOOOOUUUUCNY''''''''')), '\s+', ' ', 'g')), '')
$$;

CREATE TABLE snap.ibge_municipios__template (
  geocodigo          text NOT NULL,
  nome               text NOT NULL,
  uf                 text NOT NULL,
  cod_uf             text NOT NULL,
  area_oficial_km2   double precision,
  area_calculada_km2 double precision,
  ponto_interior     geometry(Point, 4326),
  ano                integer NOT NULL,
  is_municipio       boolean NOT NULL,
  extra              jsonb,
  geom               geometry(MultiPolygon, 4326),
  snapshot_id        bigint NOT NULL
);

CREATE VIEW "current".ibge_municipios AS SELECT * FROM snap.ibge_municipios__template;

-- Municipalities only; the mesh's other features stay in current.ibge_municipios (is_municipio = false).
CREATE VIEW serving.ibge_municipios AS
SELECT m.geocodigo, m.nome, m.uf, m.cod_uf, m.area_oficial_km2, m.area_calculada_km2,
       m.ponto_interior, m.ano, m.extra, m.geom, m.snapshot_id
FROM "current".ibge_municipios m
WHERE m.is_municipio;

-- The crosswalk of SOURCES §1.3 over the current mesh. cod_municipio_rf (Receita/SIAFI TOM)
-- and cod_municipio_bacen (ZARC) stay NULL until those crosswalks are loaded.
CREATE VIEW serving.ref_municipio AS
SELECT m.geocodigo, m.nome, m.uf, etl.normalize_nome(m.nome) AS nome_normalizado,
       NULL::text AS cod_municipio_rf, NULL::text AS cod_municipio_bacen,
       m.ano, m.snapshot_id
FROM "current".ibge_municipios m
WHERE m.is_municipio;
