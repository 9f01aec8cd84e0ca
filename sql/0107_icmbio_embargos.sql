-- ICMBio embargoes: embargoes inside federal conservation units, published by ICMBio apart
-- from IBAMA's (SOURCES §3 "Related: ICMBio embargoes"): one national snapshot per release of
-- the embargos_icmbio.zip shapefile (pipelines/icmbio-embargos). serving.icmbio_embargos is
-- the stable view, in the style of serving.ibama_embargos.
--
-- Key: id_embargo = num_emb [|| '/' || serie] (numbers repeat across series; duplicates of a
-- key: the one read last wins, the others dropped and counted). documento (cpf_cnpj) and
-- nome_autuado (autuado) are personal data (SOURCES §1.6): restricted columns, masked on
-- output, never logged; documento_hmac (HMAC-SHA256, hex, the same configured key as
-- IBAMA's, so documents match across both) is the equality lookup key.

CREATE TABLE snap.icmbio_embargos__template (
  id_embargo           text NOT NULL,
  numero_embargo       text NOT NULL,
  serie_embargo        text,
  origem               text,
  numero_auto_infracao text,
  documento            text,
  documento_tipo       text,
  documento_hmac       text,
  nome_autuado         text,
  descricao_infracao   text,
  descricao_sancao     text,
  artigo_1             text,
  artigo_2             text,
  tipo_infracao        text,
  nome_uc              text,
  cnuc                 text,
  municipio            text,
  uf                   text,
  data_embargo         date,
  ano                  integer,
  observacao           text,
  julgamento           text,
  area_calculada_ha    double precision,
  geom                 geometry(MultiPolygon, 4326) NOT NULL,
  extra                jsonb,
  snapshot_id          bigint NOT NULL
);

CREATE VIEW "current".icmbio_embargos AS SELECT * FROM snap.icmbio_embargos__template;

CREATE VIEW serving.icmbio_embargos AS
SELECT e.id_embargo, e.numero_embargo, e.serie_embargo, e.origem, e.numero_auto_infracao,
       e.documento, e.documento_tipo, e.documento_hmac, e.nome_autuado, e.descricao_infracao,
       e.descricao_sancao, e.artigo_1, e.artigo_2, e.tipo_infracao, e.nome_uc, e.cnuc,
       e.municipio, e.uf, e.data_embargo, e.ano, e.observacao, e.julgamento,
       e.area_calculada_ha, e.geom, e.extra, e.snapshot_id
FROM "current".icmbio_embargos e;

-- The overlaps with CAR properties are precomputed under camada 'embargo_icmbio' (feicao_id =
-- id_embargo, ativo NULL: the source says nothing of lifting). car_sobreposicoes lists the
-- area layers by name: the new one joins them (same columns, CREATE OR REPLACE). Views that
-- filter camada = 'embargo' (embargo_ibama, the inferred owner links, the embargo events)
-- stay IBAMA's by design.
CREATE OR REPLACE VIEW serving.car_sobreposicoes AS
SELECT car, uf, camada, feicao_id, area_sobreposta_ha, percentual, ativo,
       car_snapshot_id AS snapshot_id, layer_snapshot_id
FROM derived.current_overlaps
WHERE camada IN ('embargo', 'embargo_icmbio', 'uc', 'ti', 'quilombo');
