-- The panel's create-key form carries a one-time token (a fresh one in every rendered
-- dashboard); the key it made keeps it, so a second POST of that form (a browser's reload of
-- the 201 page) finds the key instead of creating another, in whichever API process it lands.
-- Null for keys made otherwise (`agro keys create`, a rotation); the token goes with its key.
ALTER TABLE platform.api_keys ADD COLUMN form_token text UNIQUE;
