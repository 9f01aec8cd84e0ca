-- GET /v1/car/history lists a key's requests newest first by created_at (contract §4), with seq
-- as the tie-break: several `agro serve` processes write their batches at different moments,
-- so seq is the order of the flushes, not of the requests (src/platform/history.ts). This
-- index replaces (key_id, seq DESC): the same number of indexes to maintain per request.
CREATE INDEX requests_key_created ON platform.requests (key_id, created_at DESC, seq DESC);
DROP INDEX platform.requests_key_seq;
