-- Leftovers of an upgrade in place from older releases (each part touches only what they left).

-- A backfill's snapshot is exempt from retention (be17508: the single `agro backfill` as --series
-- already was). A release before that left a single backfill's snapshot under retention, and the
-- next run's retention drops a past date first: upgraded in place, the backfills an operator
-- made before would be lost in a night or two while those made after are kept. The snapshots a
-- backfill run loaded (etl.runs.options.backfill) and still holding their tables are kept here.
-- Not one an older backfill found unchanged: that release compared with the current snapshot,
-- whatever its date, so the snapshot it named is no snapshot of the backfill's date.
UPDATE etl.snapshots s SET kept = true
  FROM etl.runs r
 WHERE r.run_id = s.run_id
   AND r.options ->> 'backfill' = 'true'
   AND s.status IN ('published', 'superseded', 'rolled_back', 'loaded')
   AND NOT s.kept;

-- 0108 dropped the road pieces (snap.dnit_snv_sub__s<id>) but left them in their snapshot's
-- tables, and a snapshot is readable only while every table it lists exists
-- (serving.snapshots_legiveis): upgraded from a release before 0108, every SNV snapshot was
-- unreadable, its as-of date gone from /v1/sources, the current one's until a derive cut its
-- pieces again (linePieces, which lists them again), the older ones' for good. The pieces are
-- cut again on demand: a missing one is no longer listed.
UPDATE etl.snapshots s
   SET tables = ARRAY(SELECT t FROM unnest(s.tables) WITH ORDINALITY AS u(t, i)
                       WHERE NOT (t LIKE 'snap."dnit\_snv\_sub\_\_s%' AND to_regclass(t) IS NULL) ORDER BY i)
 WHERE s.dataset = 'dnit-snv'
   AND EXISTS (SELECT 1 FROM unnest(s.tables) t WHERE t LIKE 'snap."dnit\_snv\_sub\_\_s%' AND to_regclass(t) IS NULL);
