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
