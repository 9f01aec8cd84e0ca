-- FUNAI indigenous lands (SOURCES §4), one national snapshot per load, plus the small
-- text helpers the polygon layers (funai-tis, cnuc-ucs, incra-quilombos) share.

-- A comma-separated list as an array: items trimmed, empty items dropped, NULL when none
-- ('MT,PA' → {MT,PA}; 'Wauja, Kuikuro' → {Wauja,Kuikuro}).
CREATE FUNCTION etl.text_list(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(array(SELECT btrim(x) FROM unnest(string_to_array(t, ',')) WITH ORDINALITY AS u(x, n)
                      WHERE btrim(x) <> '' ORDER BY n), '{}'::text[])
$$;

-- Yes/no flags as the sources write them: t/f, true/false, Sim/Não (also with a damaged
-- 'ã', e.g. 'N\uFFFDo'), S/N, 1/0. NULL for anything else.
CREATE FUNCTION etl.parse_flag(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN lower(btrim(t)) ~ '^(t|true|s|sim|y|yes|v|verdadeiro|1)$' THEN true
    WHEN lower(btrim(t)) ~ '^(f|false|n|n.o|nao|no|falso|0)$' THEN false
  END
$$;

-- An identifier read from a numeric or text field, as text: trimmed, NULL when empty,
-- '33801.0' (a Real DBF field) → '33801'. Dotted codes such as '0000.41.0548' are kept.
CREATE FUNCTION etl.code_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN btrim(t) ~ '^\d+\.0*$' THEN split_part(btrim(t), '.', 1) ELSE nullif(btrim(t), '') END
$$;

-- Occurrences of U+FFFD (bytes that were not valid text before they reached us).
CREATE FUNCTION etl.replacement_chars(t text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(length(t) - length(replace(t, chr(65533), '')), 0)
$$;

CREATE TABLE snap.funai_tis__template (
  codigo               text NOT NULL,
  nome                 text,
  etnias               text[],
  municipios           text[],
  ufs                  text[],
  area_declarada_ha    double precision,
  area_calculada_ha    double precision,
  fase                 text,
  modalidade           text,
  reestudo             text,
  coordenacao_regional text,
  faixa_fronteira      boolean,
  unidade_adm_codigo   text,
  unidade_adm_nome     text,
  unidade_adm_sigla    text,
  dominio_uniao        boolean,
  data_atualizacao     date,
  geom                 geometry(MultiPolygon, 4326),
  extra                jsonb,
  snapshot_id          bigint NOT NULL
);

CREATE VIEW "current".funai_tis AS SELECT * FROM snap.funai_tis__template;

CREATE VIEW serving.funai_tis AS
SELECT t.codigo, t.nome, t.etnias, t.municipios, t.ufs, t.area_declarada_ha, t.area_calculada_ha,
       t.fase, t.modalidade, t.reestudo, t.coordenacao_regional, t.faixa_fronteira,
       t.unidade_adm_codigo, t.unidade_adm_nome, t.unidade_adm_sigla, t.dominio_uniao,
       t.data_atualizacao, t.extra, t.geom, t.snapshot_id
FROM "current".funai_tis t;

COMMENT ON VIEW serving.funai_tis IS
  'FUNAI indigenous lands (tis_poligonais), published snapshot. codigo = terrai_codigo; area_calculada_ha is geodesic.';
