// The order an `as_of` read takes serving.snapshots_as_of in: the greatest as-of first; within a
// date a readable snapshot, the current one (what is served), then the latest loaded. The same
// rule as catalog.answeringOn (src/etl/catalog.ts), which a run and a backfill's derive use.
export const AS_OF_ORDER = 'as_of DESC, legivel DESC, is_current DESC, snapshot_id DESC';
