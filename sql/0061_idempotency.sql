-- Idempotency-Key on POST (issue 10, contract §4): one claim row per (key, method, path,
-- Idempotency-Key). The first request inserts it ('running'); a second one finds it and gets
-- the stored answer, a 409 while it runs, or a 422 for another body. Kept 24 h.
CREATE TABLE platform.idempotency (
  key_id      text NOT NULL,
  method      text NOT NULL,
  path        text NOT NULL,
  idem_key    text NOT NULL,
  body_sha256 bytea NOT NULL,
  state       text NOT NULL CHECK (state IN ('running', 'done')),
  status      smallint,
  headers     jsonb,
  response    text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (key_id, method, path, idem_key)
);
CREATE INDEX idempotency_expires ON platform.idempotency (expires_at);
