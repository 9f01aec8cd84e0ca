-- CNUC conservation units (MMA, SOURCES §5), one national snapshot per load.

-- A state's full name (any case, with or without accents, extra spaces) → its sigla;
-- a sigla stays a sigla. NULL for anything that is not one of the 27 units.
-- translate() strips accents without depending on the database's ctype or unaccent.
CREATE FUNCTION etl.uf_sigla_from_name(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (jsonb_build_object(
    'ACRE', 'AC', 'ALAGOAS', 'AL', 'AMAPA', 'AP', 'AMAZONAS', 'AM', 'BAHIA', 'BA', 'CEARA', 'CE',
    'DISTRITO FEDERAL', 'DF', 'ESPIRITO SANTO', 'ES', 'GOIAS', 'GO', 'MARANHAO', 'MA',
    'MATO GROSSO', 'MT', 'MATO GROSSO DO SUL', 'MS', 'MINAS GERAIS', 'MG', 'PARA', 'PA',
    'PARAIBA', 'PB', 'PARANA', 'PR', 'PERNAMBUCO', 'PE', 'PIAUI', 'PI', 'RIO DE JANEIRO', 'RJ',
    'RIO GRANDE DO NORTE', 'RN', 'RIO GRANDE DO SUL', 'RS', 'RONDONIA', 'RO', 'RORAIMA', 'RR',
    'SANTA CATARINA', 'SC', 'SAO PAULO', 'SP', 'SERGIPE', 'SE', 'TOCANTINS', 'TO')
    || jsonb_build_object(
    'AC', 'AC', 'AL', 'AL', 'AP', 'AP', 'AM', 'AM', 'BA', 'BA', 'CE', 'CE', 'DF', 'DF', 'ES', 'ES', 'GO', 'GO',
    'MA', 'MA', 'MT', 'MT', 'MS', 'MS', 'MG', 'MG', 'PA', 'PA', 'PB', 'PB', 'PR', 'PR', 'PE', 'PE', 'PI', 'PI',
    'RJ', 'RJ', 'RN', 'RN', 'RS', 'RS', 'RO', 'RO', 'RR', 'RR', 'SC', 'SC', 'SP', 'SP', 'SE', 'SE', 'TO', 'TO'))
    ->> upper(regexp_replace(btrim(translate(t,
          'ÁÀÂÃÄáàâãäÉÈÊËéèêëÍÌÎÏíìîïÓÒÔÕÖóòôõöÚÙÛÜúùûüÇç',
          'AAAAAaaaaaEEEEeeeeIIIIiiiiOOOOOoooooUUUUuuuuCc')), '\s+', ' ', 'g'))
$$;

CREATE TABLE snap.cnuc_ucs__template (
  codigo            text NOT NULL,
  uc_id             text,
  nome              text,
  categoria         text,
  grupo             text,
  esfera            text,
  data_criacao      date,
  ato_criacao       text,
  outros_atos       text,
  plano_manejo      text,
  cogestor          text,
  area_total_ha     double precision,
  area_ato_ha       double precision,
  area_fonte_ha     double precision,
  ufs               text[],
  municipios        text[],
  orgao_gestor      text,
  categoria_iucn    text,
  situacao          text,
  limite            text,
  quali_pol         text,
  ppgr              text,
  docleg_id         text,
  wdpa_pid          text,
  nome_abreviado    text,
  area_bioma_ha     jsonb,
  area_calculada_ha double precision,
  geom              geometry(MultiPolygon, 4326),
  extra             jsonb,
  snapshot_id       bigint NOT NULL
);

CREATE VIEW "current".cnuc_ucs AS SELECT * FROM snap.cnuc_ucs__template;

CREATE VIEW serving.cnuc_ucs AS
SELECT u.codigo, u.uc_id, u.nome, u.categoria, u.grupo, u.esfera, u.data_criacao, u.ato_criacao,
       u.outros_atos, u.plano_manejo, u.cogestor, u.area_total_ha, u.area_ato_ha, u.area_fonte_ha,
       u.ufs, u.municipios, u.orgao_gestor, u.categoria_iucn, u.situacao, u.limite, u.quali_pol, u.ppgr,
       u.docleg_id, u.wdpa_pid, u.nome_abreviado, u.area_bioma_ha, u.area_calculada_ha,
       u.extra, u.geom, u.snapshot_id
FROM "current".cnuc_ucs u;

COMMENT ON VIEW serving.cnuc_ucs IS
  'CNUC conservation units (MMA shp_cnuc_YYYY_MM), published snapshot. codigo = cd_cnuc; ufs are siglas; area_calculada_ha is geodesic.';
