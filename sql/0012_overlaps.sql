-- Precomputed overlaps between CAR properties and the territorial layers, one set of
-- rows per (CAR state snapshot, layer snapshot) pair. Pairs are computed before a
-- snapshot is published; the serving views only show pairs whose two snapshots are
-- both current, so readers switch to new overlap figures in the same transaction
-- that repoints the snapshots.
CREATE SCHEMA IF NOT EXISTS derived;

CREATE TABLE derived.car_overlaps (
  car_snapshot_id    bigint NOT NULL,
  layer_snapshot_id  bigint NOT NULL,
  camada             text NOT NULL,
  car                text NOT NULL,
  uf                 text NOT NULL,
  feicao_id          text NOT NULL,
  area_sobreposta_ha double precision,
  percentual         double precision,
  distancia_km       double precision,
  ativo              boolean
);
CREATE INDEX car_overlaps_car_idx ON derived.car_overlaps (car, camada);
CREATE INDEX car_overlaps_pair_idx ON derived.car_overlaps (car_snapshot_id, layer_snapshot_id);
CREATE INDEX car_overlaps_feicao_idx ON derived.car_overlaps (camada, feicao_id);

-- Which pairs are done (a pair with no overlap at all is done too).
CREATE TABLE derived.overlap_pairs (
  car_snapshot_id   bigint NOT NULL,
  layer_snapshot_id bigint NOT NULL,
  camada            text NOT NULL,
  rows              bigint NOT NULL,
  duration_ms       int NOT NULL,
  computed_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (car_snapshot_id, layer_snapshot_id)
);

CREATE VIEW derived.current_overlaps AS
SELECT o.*
FROM derived.car_overlaps o
WHERE o.car_snapshot_id IN (SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar')
  AND o.layer_snapshot_id IN (SELECT snapshot_id FROM etl.current WHERE dataset <> 'sicar');

CREATE VIEW serving.car_sobreposicoes AS
SELECT car, uf, camada, feicao_id, area_sobreposta_ha, percentual, ativo,
       car_snapshot_id AS snapshot_id, layer_snapshot_id
FROM derived.current_overlaps
WHERE camada IN ('embargo', 'uc', 'ti', 'quilombo');

-- Municipality shares of each property (the key ZARC and CAR share).
CREATE VIEW serving.car_municipios AS
SELECT car, uf, feicao_id AS geocodigo, area_sobreposta_ha, percentual, car_snapshot_id AS snapshot_id, layer_snapshot_id
FROM derived.current_overlaps WHERE camada = 'municipio';

-- Distance from each property to the nearest federal road segment.
CREATE VIEW serving.car_rodovias AS
SELECT car, uf, feicao_id AS codigo, distancia_km, car_snapshot_id AS snapshot_id, layer_snapshot_id
FROM derived.current_overlaps WHERE camada = 'rodovia';

-- embargo_ibama: an active embargo polygon intersects the property, or an active
-- point-only embargo lies inside it; NULL while no IBAMA snapshot is published.
CREATE OR REPLACE VIEW serving.car_imovel AS
SELECT c.car, c.uf, c.cod_municipio_ibge, c.municipio, c.situacao, c.tipo, c.condicao, c.modulos_fiscais,
       c.area_total_ha, c.area_calculada_ha, c.app_ha, c.reserva_legal_ha, c.area_consolidada_ha,
       c.data_inscricao, c.data_atualizacao,
       CASE WHEN EXISTS (SELECT 1 FROM etl.current WHERE dataset = 'ibama-embargos')
            THEN EXISTS (SELECT 1 FROM derived.current_overlaps o WHERE o.car = c.car AND o.camada = 'embargo' AND o.ativo)
       END AS embargo_ibama,
       c.centroid, c.geom, c.extra, c.snapshot_id
FROM "current".car_imovel c;
