-- API keys (issue 7). Only a SHA-256 of the key is stored; the key itself is shown once.
-- `prefix` and `last4` let an operator recognise a key in `agro keys list` without it.
CREATE SCHEMA IF NOT EXISTS platform;

CREATE TABLE platform.api_keys (
  id         text PRIMARY KEY,
  name       text,
  env        text NOT NULL CHECK (env IN ('test', 'live')),
  plan       text NOT NULL CHECK (plan IN ('starter', 'growth', 'professional', 'scale', 'enterprise')),
  key_sha256 bytea NOT NULL UNIQUE,
  prefix     text NOT NULL,
  last4      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

-- Servers cache keys they have checked; any change to a key row (revocation, deletion)
-- tells them at once, whoever makes it (the CLI or plain SQL).
CREATE FUNCTION platform.api_keys_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agro_api_keys', encode(OLD.key_sha256, 'hex'));
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_notify AFTER UPDATE OR DELETE ON platform.api_keys
FOR EACH ROW EXECUTE FUNCTION platform.api_keys_notify();
