-- Snapshot lifecycle (issue 6, B): an honest `loaded` status, a retention exemption
-- flag, and the publication history that rollback follows.

-- `loaded`: the snapshot's tables are complete and kept, but it was not made current
-- (a backfill older than the current snapshot, or a publish that gave up waiting for locks).
ALTER TABLE etl.runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE etl.runs ADD CONSTRAINT runs_status_check
  CHECK (status IN ('running', 'published', 'loaded', 'unchanged', 'blocked', 'failed', 'killed'));

ALTER TABLE etl.snapshots DROP CONSTRAINT IF EXISTS snapshots_status_check;
ALTER TABLE etl.snapshots ADD CONSTRAINT snapshots_status_check
  CHECK (status IN ('loading', 'blocked', 'published', 'superseded', 'rolled_back', 'loaded', 'failed', 'dropped'));

-- `agro keep <snapshot_id>`: exempt from retention (historical series).
ALTER TABLE etl.snapshots ADD COLUMN IF NOT EXISTS kept boolean NOT NULL DEFAULT false;

-- Every change of what is current, in order. Rollback undoes the latest change:
-- it returns to the snapshot that was current before, whatever its id or date.
CREATE TABLE etl.publications (
  publication_id bigserial PRIMARY KEY,
  dataset        text NOT NULL,
  scope          text NOT NULL,
  snapshot_id    bigint NOT NULL REFERENCES etl.snapshots,
  action         text NOT NULL CHECK (action IN ('publish', 'rollback')),
  forced         boolean NOT NULL DEFAULT false,
  run_id         bigint,
  at             timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX publications_scope_idx ON etl.publications (dataset, scope, publication_id);

-- History for databases that published before this migration, as far as it can be told:
-- the superseded snapshots and the current one in publication order (a rolled-back snapshot
-- was undone, so it is not a place to return to).
INSERT INTO etl.publications (dataset, scope, snapshot_id, action, forced, run_id, at)
SELECT s.dataset, s.scope, s.snapshot_id, 'publish', s.forced, s.run_id, s.published_at
FROM etl.snapshots s
WHERE s.published_at IS NOT NULL AND s.status IN ('published', 'superseded')
ORDER BY s.published_at, s.snapshot_id;

CREATE OR REPLACE VIEW serving.snapshots AS
SELECT s.snapshot_id, s.dataset, s.uf, s.as_of,
       CASE WHEN c.snapshot_id IS NOT NULL THEN 'current' ELSE s.status END AS status,
       s.rows, s.source_sha256, s.published_at, s.forced, s.run_id, s.created_at, s.kept
FROM etl.snapshots s
LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id;
