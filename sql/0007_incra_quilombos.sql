-- INCRA quilombola areas (SOURCES §6), one national snapshot per load.

-- INCRA mixes dd/mm/yyyy and yyyy-mm-dd in one column (SOURCES §6.7): exactly those two
-- layouts parse (and must be real calendar dates); anything else is NULL.
CREATE FUNCTION etl.parse_date_dmy_iso(t text) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN btrim(t) ~ '^(\d{1,2}/\d{1,2}/\d{4}|\d{4}-\d{1,2}-\d{1,2})$' THEN etl.parse_date(btrim(t)) END
$$;

-- 'null' (absent or blank), 'placeholder' (0, 00/00/0000, 0000-00-00), 'ok' or 'bad'.
CREATE FUNCTION etl.date_dmy_iso_kind(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t IS NULL OR btrim(t) = '' THEN 'null'
    WHEN btrim(t) IN ('0', '00/00/0000', '0000-00-00') THEN 'placeholder'
    WHEN etl.parse_date_dmy_iso(t) IS NOT NULL THEN 'ok'
    ELSE 'bad' END
$$;

CREATE TABLE snap.incra_quilombos__template (
  codigo                  text NOT NULL,
  comunidade              text,
  municipio               text,
  uf                      text,
  sr_incra                text,
  numero_processo         text,
  fase                    text,
  esfera                  text,
  responsavel             text,
  familias                integer,
  area_ha                 double precision,
  perimetro               double precision,
  area_calc_fonte         double precision,
  perimetro_calc_fonte    double precision,
  area_calculada_ha       double precision,
  titulado                boolean,
  data_portaria           date,
  data_publicacao_decreto date,
  data_decreto            date,
  data_titulacao          date,
  cod_sipra               text,
  observacao              text,
  tipo_levantamento       text,
  geom                    geometry(MultiPolygon, 4326),
  extra                   jsonb,
  snapshot_id             bigint NOT NULL
);

CREATE VIEW "current".incra_quilombos AS SELECT * FROM snap.incra_quilombos__template;

-- `nome` (contract §2b) is the community name, also exposed as `comunidade`.
CREATE VIEW serving.incra_quilombos AS
SELECT q.codigo, q.comunidade AS nome, q.comunidade, q.municipio, q.uf, q.sr_incra, q.numero_processo,
       q.fase, q.esfera, q.responsavel, q.familias, q.area_ha, q.perimetro, q.area_calc_fonte,
       q.perimetro_calc_fonte, q.area_calculada_ha, q.titulado, q.data_portaria, q.data_publicacao_decreto,
       q.data_decreto, q.data_titulacao, q.cod_sipra, q.observacao, q.tipo_levantamento,
       q.extra, q.geom, q.snapshot_id
FROM "current".incra_quilombos q;

COMMENT ON VIEW serving.incra_quilombos IS
  'INCRA quilombola areas (Áreas de Quilombolas), published snapshot. codigo = cd_quilomb; uf is a sigla; area_calculada_ha is geodesic.';
