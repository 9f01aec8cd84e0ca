-- SICAR: the declaration of a snapshot of one state. Snapshot tables are created
-- with exactly these columns (checked before publishing), current.* unions the
-- published snapshot of every state, serving.* is the stable read interface.

CREATE TABLE snap.car_imovel__template (
  car                 text NOT NULL,
  uf                  text NOT NULL,
  cod_municipio_ibge  text,
  municipio           text,
  situacao            text,
  tipo                text,
  condicao            text,
  modulos_fiscais     double precision,
  area_total_ha       double precision,
  area_calculada_ha   double precision,
  app_ha              double precision,
  reserva_legal_ha    double precision,
  area_consolidada_ha double precision,
  data_inscricao      date,
  data_atualizacao    date,
  centroid            geometry(Point, 4326),
  geom                geometry(MultiPolygon, 4326),
  extra               jsonb,
  snapshot_id         bigint NOT NULL
);

-- Theme polygons (APPS, RESERVA_LEGAL, AREA_CONSOLIDADA) of the same snapshot.
CREATE TABLE snap.car_tema__template (
  car               text NOT NULL,
  uf                text NOT NULL,
  tema_base         text NOT NULL,
  cod_tema          text,
  nome_tema         text,
  area_ha           double precision,
  area_calculada_ha double precision,
  situacao          text,
  condicao          text,
  geom              geometry(MultiPolygon, 4326),
  extra             jsonb,
  snapshot_id       bigint NOT NULL
);

CREATE VIEW "current".car_imovel AS SELECT * FROM snap.car_imovel__template;
CREATE VIEW "current".car_tema AS SELECT * FROM snap.car_tema__template;

-- embargo_ibama is NULL until the IBAMA layer and the overlaps exist (next migrations).
CREATE VIEW serving.car_imovel AS
SELECT c.car, c.uf, c.cod_municipio_ibge, c.municipio, c.situacao, c.tipo, c.condicao, c.modulos_fiscais,
       c.area_total_ha, c.area_calculada_ha, c.app_ha, c.reserva_legal_ha, c.area_consolidada_ha,
       c.data_inscricao, c.data_atualizacao, NULL::boolean AS embargo_ibama, c.centroid, c.geom, c.extra, c.snapshot_id
FROM "current".car_imovel c;

CREATE VIEW serving.car_temas AS SELECT * FROM "current".car_tema;

-- A well-formed CAR number whose IBGE part belongs to its UF (SOURCES §2.5).
CREATE FUNCTION etl.car_number_ok(car text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(car ~ '^[A-Z]{2}-\d{7}-[0-9A-F]{32}$' AND substr(car, 4, 2) = etl.uf_ibge_code(left(car, 2)), false)
$$;

CREATE FUNCTION etl.car_situacao(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE upper(btrim(code))
    WHEN 'AT' THEN 'ativo' WHEN 'ATIVO' THEN 'ativo'
    WHEN 'PE' THEN 'pendente' WHEN 'PENDENTE' THEN 'pendente'
    WHEN 'CA' THEN 'cancelado' WHEN 'CANCELADO' THEN 'cancelado'
    WHEN 'SU' THEN 'suspenso' WHEN 'SUSPENSO' THEN 'suspenso' END
$$;

CREATE FUNCTION etl.car_tipo(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE upper(btrim(code))
    WHEN 'IRU' THEN 'imovel_rural' WHEN 'AST' THEN 'assentamento' WHEN 'PCT' THEN 'territorio_tradicional' END
$$;
