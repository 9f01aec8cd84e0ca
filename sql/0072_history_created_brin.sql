-- The query history is written in batches in created_at order (src/platform/history-writer.ts),
-- and created_at alone is only searched by the retention purge (the history pages and the
-- panel go through (key_id, seq)). A BRIN index serves that range delete at a fraction of a
-- B-tree's cost on every insert: one index fewer to maintain per request.
DROP INDEX platform.requests_created;
CREATE INDEX requests_created_brin ON platform.requests USING brin (created_at);
