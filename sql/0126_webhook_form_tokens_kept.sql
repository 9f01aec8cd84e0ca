-- The webhooks page's one-time form tokens (0124) lived in the subscription's row: removing the
-- subscription forgot its subscribe token, and each rotation overwrote the last rotate token (a
-- CLI rotation cleared it), so a reload of an older 201 page subscribed or rotated again. A used
-- token is now a row of its own, kept whatever happens to the subscription (no foreign key: it
-- outlives it); the subscription it names tells the page what the form did.
CREATE TABLE events.form_tokens (
  token text PRIMARY KEY,
  endpoint_id text NOT NULL,
  used_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO events.form_tokens (token, endpoint_id)
SELECT form_token, id FROM events.endpoints WHERE form_token IS NOT NULL
UNION ALL
SELECT rotation_form_token, id FROM events.endpoints WHERE rotation_form_token IS NOT NULL
ON CONFLICT (token) DO NOTHING;

ALTER TABLE events.endpoints DROP COLUMN form_token, DROP COLUMN rotation_form_token;
