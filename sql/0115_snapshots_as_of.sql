-- The snapshots an `as_of` read chooses among: every snapshot that answers, or answered, the
-- reads of its dates (readable now, or dropped by retention after it was published or loaded
-- past the quality gate), and whether its tables are still kept. A date whose snapshot
-- retention dropped must not be answered from an older kept one (`agro keep`): that is another
-- date's data. Blocked and failed snapshots never answered: they are not listed.
CREATE VIEW serving.snapshots_as_of AS
SELECT s.snapshot_id, s.dataset, s.uf, s.as_of,
       (c.snapshot_id IS NOT NULL) AS is_current,
       (l.snapshot_id IS NOT NULL) AS legivel
FROM etl.snapshots s
LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
LEFT JOIN serving.snapshots_legiveis l ON l.snapshot_id = s.snapshot_id
WHERE s.status IN ('published', 'superseded', 'rolled_back', 'loaded')
   OR (s.status = 'dropped' AND (s.published_at IS NOT NULL OR s.quality #>> '{gate,passed}' = 'true'));

COMMENT ON VIEW serving.snapshots_as_of IS
  'Snapshots as_of reads choose among (readable, or dropped by retention after answering); legivel: tables kept.';
