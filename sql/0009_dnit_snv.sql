-- DNIT SNV (Sistema Nacional de Viação, SOURCES §8): one national snapshot per SNV
-- version (YYYYMM + revision letter), one row per segment ("sub-trecho").

CREATE TABLE snap.dnit_snv__template (
  codigo                text NOT NULL,
  br                    text,
  uf                    text,
  km_inicial            double precision,
  km_final              double precision,
  extensao_km           double precision,
  extensao_calculada_km double precision,
  tipo_trecho           text,
  nome_tipo_trecho      text,
  superficie            text,
  legenda               text,
  jurisdicao            text,
  unidade_local         text,
  versao                text,
  extra                 jsonb,
  geom                  geometry(MultiLineString, 4326),
  snapshot_id           bigint NOT NULL
);

CREATE VIEW "current".dnit_snv AS SELECT * FROM snap.dnit_snv__template;

CREATE VIEW serving.dnit_snv AS
SELECT s.codigo, s.br, s.uf, s.km_inicial, s.km_final, s.extensao_km, s.extensao_calculada_km,
       s.tipo_trecho, s.nome_tipo_trecho, s.superficie, s.legenda, s.jurisdicao, s.unidade_local,
       s.versao, s.extra, s.geom, s.snapshot_id
FROM "current".dnit_snv s;

-- Main BR alignments only (sg_tipo_tr = 'B'): variants, accesses and coincident stretches
-- would double the network. What distance-to-road queries use.
CREATE VIEW serving.dnit_snv_principal AS
SELECT * FROM serving.dnit_snv WHERE tipo_trecho = 'B';
