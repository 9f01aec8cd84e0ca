-- The panel's subscribe and rotate-secret forms answer 201 with the secret on the page, so a
-- browser's reload posted them again: a second subscription (every event delivered twice) or a
-- second rotation (the secret just stored demoted to "previous", to stop signing after the
-- window). Each rendered form carries a one-time token, as the create-key form does (0123):
-- the subscription it made keeps it (unique), and an endpoint keeps its last rotation's.
-- Null for what the API or the CLI does (their retries have Idempotency-Key, or are explicit).
ALTER TABLE events.endpoints ADD COLUMN form_token text UNIQUE;
ALTER TABLE events.endpoints ADD COLUMN rotation_form_token text;
