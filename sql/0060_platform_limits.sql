-- Rate limits, monthly quota, query history and the event outbox (issue 10).
-- Counters live in the database, not in a server's memory, so that several API processes
-- sharing it enforce one limit: each request is one INSERT … ON CONFLICT DO UPDATE … RETURNING.

-- One row per (key, UTC minute): n requests seen in that window (the rejected ones included).
CREATE TABLE platform.rate_windows (
  key_id       text NOT NULL,
  window_start timestamptz NOT NULL,
  n            integer NOT NULL,
  PRIMARY KEY (key_id, window_start)
);

-- Billable answers per (key, UTC month).
CREATE TABLE platform.usage_months (
  key_id text NOT NULL,
  month  date NOT NULL,
  used   integer NOT NULL,
  PRIMARY KEY (key_id, month)
);

-- Query history: one row per authenticated request; `path` has its documents masked.
CREATE TABLE platform.requests (
  seq        bigserial PRIMARY KEY,
  id         text NOT NULL,
  key_id     text NOT NULL,
  method     text NOT NULL,
  path       text NOT NULL,
  status     smallint NOT NULL,
  billable   boolean NOT NULL,
  lgpd_base  text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX requests_key_seq ON platform.requests (key_id, seq DESC);
CREATE INDEX requests_created ON platform.requests (created_at);

-- Events waiting for delivery (the events issue delivers them). `dedupe` makes an event that
-- must happen once (a quota threshold per key per month) a unique row.
CREATE SCHEMA IF NOT EXISTS events;
CREATE TABLE events.outbox (
  id           text PRIMARY KEY,
  type         text NOT NULL,
  dedupe       text UNIQUE,
  body         jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
