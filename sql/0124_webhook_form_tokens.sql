-- The panel's subscribe and rotate-secret forms answer 201 with the secret on the page, so a
-- browser's reload posted them again: a second subscription (every event delivered twice) or a
-- second rotation (the secret just stored demoted to "previous", to stop signing after the
-- window). Each rendered form carries a one-time token, as the create-key form does (0123). A
-- used token is a row of its own, kept whatever happens to the subscription (no foreign key: it
-- outlives a removal; a CLI rotation in between does not clear it); the subscription it names
-- tells the page what the form did. What the API or the CLI does records none (their retries
-- have Idempotency-Key, or are explicit).
CREATE TABLE events.form_tokens (
  token text PRIMARY KEY,
  endpoint_id text NOT NULL,
  used_at timestamptz NOT NULL DEFAULT now()
);
