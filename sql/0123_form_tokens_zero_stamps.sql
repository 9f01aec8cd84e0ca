-- Two small fixes (the panel's create-key form; zero dates with a zero time).

-- The panel's create-key form carries a one-time token (a fresh one in every rendered
-- dashboard); the key it made keeps it, so a second POST of that form (a browser's reload of
-- the 201 page) finds the key instead of creating another, in whichever API process it lands.
-- Null for keys made otherwise (`agro keys create`, a rotation); the token goes with its key.
ALTER TABLE platform.api_keys ADD COLUMN form_token text UNIQUE;

-- A zero date followed by an all-zero time ('0000-00-00 00:00:00.000', '00/00/0000 00:00:00',
-- '0000-00-00T00:00:00Z', as a database export writes its "no date") counted as an unparseable
-- date, its text kept, where the bare '0000-00-00' is a placeholder: NULL, counted as one. Both
-- date classifiers now share one rule: "0", a zero date in any layout they read, optionally
-- followed by a zero time (hh:mm[:ss[.000…]], 'T' only after an ISO date, an ISO one then 'Z').
CREATE FUNCTION etl.is_zero_date(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT btrim(t) ~ '^(0|00000000|(00/00/0000|00-00-0000|0000-00-00)( 00:00(:00(\.0+)?)?)?|0000-00-00T00:00(:00(\.0+)?)?Z?)$'
$$;

-- The exact spellings first, then real dates: only what does not parse pays the expression.
CREATE OR REPLACE FUNCTION etl.date_kind(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t IS NULL THEN 'null'
    WHEN btrim(t) IN ('', '0', '00/00/0000', '00-00-0000', '0000-00-00', '00000000') THEN 'placeholder'
    WHEN etl.parse_date(t) IS NOT NULL THEN 'ok'
    WHEN etl.is_zero_date(t) THEN 'placeholder'
    ELSE 'bad' END
$$;

CREATE OR REPLACE FUNCTION etl.date_dmy_iso_kind(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t IS NULL OR btrim(t) = '' THEN 'null'
    WHEN etl.is_zero_date(t) THEN 'placeholder'
    WHEN etl.parse_date_dmy_iso(t) IS NOT NULL THEN 'ok'
    ELSE 'bad' END
$$;
