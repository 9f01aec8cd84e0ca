-- Core catalogue: run ledger, snapshot catalogue, current-snapshot pointers.
CREATE EXTENSION IF NOT EXISTS postgis;

-- SIRGAS 2000 / Brazil Albers (equal-area), for builds whose PROJ predates it.
INSERT INTO spatial_ref_sys (srid, auth_name, auth_srid, proj4text)
SELECT 10857, 'EPSG', 10857,
  '+proj=aea +lat_0=-12 +lon_0=-54 +lat_1=-2 +lat_2=-22 +x_0=5000000 +y_0=10000000 +ellps=GRS80 +towgs84=0,0,0,0,0,0,0 +units=m +no_defs'
WHERE NOT EXISTS (SELECT 1 FROM spatial_ref_sys WHERE srid = 10857);

CREATE SCHEMA IF NOT EXISTS etl;      -- ledger and catalogue
CREATE SCHEMA IF NOT EXISTS stage;    -- per-run staging tables (unlogged, dropped after the run)
CREATE SCHEMA IF NOT EXISTS snap;     -- physical snapshot tables, one per snapshot and relation
CREATE SCHEMA IF NOT EXISTS "current"; -- generated views: the published snapshot(s) of each relation
CREATE SCHEMA IF NOT EXISTS serving;  -- the stable read interface (contract §2b)

CREATE TABLE etl.runs (
  run_id        bigserial PRIMARY KEY,
  pipeline      text NOT NULL,
  scope         text NOT NULL DEFAULT '',
  status        text NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'published', 'unchanged', 'blocked', 'failed', 'killed')),
  options       jsonb NOT NULL DEFAULT '{}',
  snapshot_id   bigint,
  rows_read     bigint,
  rows_loaded   bigint,
  rows_rejected bigint,
  error         text,
  error_code    text,
  pid           int,
  host          text,
  started_at    timestamptz NOT NULL DEFAULT now(),
  finished_at   timestamptz
);
CREATE INDEX runs_pipeline_idx ON etl.runs (pipeline, scope, run_id DESC);

CREATE TABLE etl.run_stages (
  run_id      bigint NOT NULL REFERENCES etl.runs ON DELETE CASCADE,
  stage       text NOT NULL,
  seq         int NOT NULL,
  status      text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed', 'skipped')),
  rows        bigint,
  detail      jsonb NOT NULL DEFAULT '{}',
  started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
  finished_at timestamptz,
  duration_ms int,
  PRIMARY KEY (run_id, stage)
);

CREATE TABLE etl.snapshots (
  snapshot_id   bigserial PRIMARY KEY,
  dataset       text NOT NULL,
  uf            text,
  scope         text GENERATED ALWAYS AS (coalesce(uf, '')) STORED,
  as_of         date NOT NULL,
  status        text NOT NULL DEFAULT 'loading'
                CHECK (status IN ('loading', 'blocked', 'published', 'superseded', 'rolled_back', 'failed', 'dropped')),
  rows          bigint,
  source_sha256 text,
  source        jsonb NOT NULL DEFAULT '{}',
  schema_fingerprint text,
  tables        text[] NOT NULL DEFAULT '{}',
  quality       jsonb,
  forced        boolean NOT NULL DEFAULT false,
  run_id        bigint REFERENCES etl.runs,
  created_at    timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);
CREATE INDEX snapshots_dataset_idx ON etl.snapshots (dataset, scope, snapshot_id DESC);

-- The one pointer readers follow: the published snapshot of each (dataset, scope).
CREATE TABLE etl.current (
  dataset     text NOT NULL,
  scope       text NOT NULL,
  snapshot_id bigint NOT NULL REFERENCES etl.snapshots,
  PRIMARY KEY (dataset, scope)
);

CREATE VIEW serving.snapshots AS
SELECT s.snapshot_id, s.dataset, s.uf, s.as_of,
       CASE WHEN c.snapshot_id IS NOT NULL THEN 'current' ELSE s.status END AS status,
       s.rows, s.source_sha256, s.published_at, s.forced, s.run_id, s.created_at
FROM etl.snapshots s
LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id;
