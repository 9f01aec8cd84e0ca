-- When an operator rolled a snapshot back (NULL once it is published again). A rolled-back
-- snapshot is data the operator took back: an as_of read of its dates must not answer from it,
-- and that holds after retention drops it too (status 'dropped' forgets 'rolled_back').
ALTER TABLE etl.snapshots ADD COLUMN rolled_back_at timestamptz;

-- Snapshots rolled back before this column: the rollbacks in the publication history whose
-- snapshot taken back was not made current again later.
WITH p AS (
  SELECT publication_id, snapshot_id, action, at,
         lag(snapshot_id) OVER (PARTITION BY dataset, scope ORDER BY publication_id) AS before
    FROM etl.publications)
UPDATE etl.snapshots s SET rolled_back_at = w.at
  FROM (SELECT DISTINCT ON (r.before) r.before, r.at FROM p r
         WHERE r.action = 'rollback' AND r.before IS NOT NULL AND r.before <> r.snapshot_id
           AND NOT EXISTS (SELECT 1 FROM etl.publications l WHERE l.snapshot_id = r.before AND l.publication_id > r.publication_id)
         ORDER BY r.before, r.publication_id DESC) w
 WHERE s.snapshot_id = w.before AND s.status IN ('rolled_back', 'dropped');

-- 0115's view, without the snapshots rolled back (rolled_back, or dropped after it).
CREATE OR REPLACE VIEW serving.snapshots_as_of AS
SELECT s.snapshot_id, s.dataset, s.uf, s.as_of,
       (c.snapshot_id IS NOT NULL) AS is_current,
       (l.snapshot_id IS NOT NULL) AS legivel
FROM etl.snapshots s
LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
LEFT JOIN serving.snapshots_legiveis l ON l.snapshot_id = s.snapshot_id
WHERE s.rolled_back_at IS NULL
  AND (s.status IN ('published', 'superseded', 'loaded')
       OR (s.status = 'dropped' AND (s.published_at IS NOT NULL OR s.quality #>> '{gate,passed}' = 'true')));

COMMENT ON VIEW serving.snapshots_as_of IS
  'Snapshots as_of reads choose among (readable, or dropped by retention after answering; never one rolled back and not published again); legivel: tables kept.';
