-- The account panel (issue 10). An account is the set of keys created from one another in the
-- panel: account_id null means the key is its own account (keys made by `agro keys create`).
ALTER TABLE platform.api_keys ADD COLUMN account_id text;
CREATE INDEX api_keys_account ON platform.api_keys ((coalesce(account_id, id)));

-- Panel sessions: only a SHA-256 of the cookie's token is stored; `csrf` is the token each
-- form must echo (with the SameSite=Strict cookie, a cross-site form cannot post).
CREATE TABLE platform.panel_sessions (
  token_sha256 bytea PRIMARY KEY,
  key_id       text NOT NULL REFERENCES platform.api_keys (id) ON DELETE CASCADE,
  csrf         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL
);
