-- Change events and webhook delivery (issue 11, contract §5).
--
-- events.outbox (0060) holds every event once, with its final body. An event belongs to one
-- key (`key_id`); a test event names the one endpoint it is for (`endpoint_id`). The drainer
-- fans each new outbox row out into one delivery per matching endpoint (`dispatched_at` marks
-- it done) and delivers those with retries; every attempt is a row of the delivery log.
-- `delivered_at` of 0060 is not used: delivery is per endpoint (events.deliveries).

-- Records a key watches for change events. `record`: a CAR number in upper case, or a CNPJ's
-- 14 characters without punctuation.
CREATE TABLE events.monitors (
  id         text PRIMARY KEY,
  key_id     text NOT NULL REFERENCES platform.api_keys (id) ON DELETE CASCADE,
  kind       text NOT NULL CHECK (kind IN ('car', 'cnpj')),
  record     text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (key_id, kind, record)
);
CREATE INDEX monitors_record ON events.monitors (kind, record);
CREATE INDEX monitors_cnpj_basico ON events.monitors (left(record, 8)) WHERE kind = 'cnpj';

-- Webhook endpoints. The secret is kept in clear (it signs every delivery); after a rotation
-- the previous one keeps signing until `previous_secret_until` (both signatures are sent).
CREATE TABLE events.endpoints (
  id                    text PRIMARY KEY,
  key_id                text NOT NULL REFERENCES platform.api_keys (id) ON DELETE CASCADE,
  url                   text NOT NULL,
  events                text[] NOT NULL,
  secret                text NOT NULL,
  previous_secret       text,
  previous_secret_until timestamptz,
  created_at            timestamptz NOT NULL DEFAULT now(),
  disabled_at           timestamptz,
  disabled_reason       text
);
CREATE INDEX endpoints_key ON events.endpoints (key_id);

ALTER TABLE events.outbox
  ADD COLUMN key_id text,
  ADD COLUMN endpoint_id text,
  ADD COLUMN dispatched_at timestamptz;
CREATE INDEX outbox_undispatched ON events.outbox (created_at, id) WHERE dispatched_at IS NULL;
CREATE INDEX outbox_key ON events.outbox (key_id, created_at DESC);

-- quota.threshold rows (src/platform/limits.ts) carry their key only in the body.
CREATE FUNCTION events.outbox_key() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.key_id := coalesce(NEW.key_id, NEW.body->'data'->>'key_id');
  RETURN NEW;
END
$$;
CREATE TRIGGER outbox_key BEFORE INSERT ON events.outbox FOR EACH ROW EXECUTE FUNCTION events.outbox_key();
UPDATE events.outbox SET key_id = body->'data'->>'key_id' WHERE key_id IS NULL;

-- One event for one key, once: the id is derived from `dedupe`, so that whoever writes the
-- same change twice (a retried publish, two processes) writes one row.
CREATE FUNCTION events.enqueue(p_type text, p_dedupe text, p_key_id text, p_data jsonb) RETURNS text
LANGUAGE sql AS $$
  INSERT INTO events.outbox (id, type, dedupe, key_id, body)
  VALUES ('evt_' || substr(md5(p_dedupe), 1, 24), p_type, p_dedupe, p_key_id,
          jsonb_build_object('id', 'evt_' || substr(md5(p_dedupe), 1, 24), 'type', p_type,
                             'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                             'api_version', 'v1', 'data', p_data))
  ON CONFLICT DO NOTHING
  RETURNING id
$$;

-- One delivery of one event to one endpoint: the event id stays the same on every retry.
-- `lease_*`: the process delivering it now (claimed with FOR UPDATE SKIP LOCKED); an expired
-- lease (a process that died) is claimed again: at least once.
CREATE TABLE events.deliveries (
  event_id        text NOT NULL REFERENCES events.outbox (id) ON DELETE CASCADE,
  endpoint_id     text NOT NULL REFERENCES events.endpoints (id) ON DELETE CASCADE,
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  lease_token     text,
  lease_until     timestamptz,
  last_status     integer,
  last_error      text,
  delivered_at    timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX deliveries_due ON events.deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_endpoint ON events.deliveries (endpoint_id);

-- The delivery log: every attempt, its answer or its error.
CREATE TABLE events.attempts (
  seq         bigserial PRIMARY KEY,
  event_id    text NOT NULL,
  endpoint_id text NOT NULL,
  attempt     integer NOT NULL,
  at          timestamptz NOT NULL,
  status_code integer,
  error       text,
  duration_ms integer NOT NULL,
  FOREIGN KEY (event_id, endpoint_id) REFERENCES events.deliveries (event_id, endpoint_id) ON DELETE CASCADE
);
CREATE INDEX attempts_endpoint ON events.attempts (endpoint_id, seq DESC);
