-- INCRA dates written with a time of day ('15/03/2018 00:00:00', '2018-03-15 00:00:00',
-- '2018-03-15T00:00:00', as a spreadsheet or database export writes them) matched neither
-- layout of 0007: NULL, counted unparseable, text kept, so a release written that way would
-- have published every date NULL. Each layout may now be followed by a time (hh:mm[:ss[.f]],
-- a real one; 'T' or a space after an ISO date, a space after dd/mm/yyyy) and an ISO date and
-- time by an offset, and is read by etl.parse_date as every other pipeline reads it: the day
-- as written, a stamp with an offset as Brasília's wall time (0114). Anything else is still no
-- date: other layouts, no such day or hour, AM/PM, text after the time.
CREATE OR REPLACE FUNCTION etl.parse_date_dmy_iso(t text) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN btrim(t) ~ '^(\d{1,2}/\d{1,2}/\d{4}( ([01]?\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?)?|\d{4}-\d{1,2}-\d{1,2}([T ]([01]?\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?)?|\d{4}-\d{2}-\d{2}[T ]([01]?\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?\s*([Zz]|[+-]\d{2}(:?\d{2})?))$'
    THEN etl.parse_date(btrim(t)) END
$$;

-- A placeholder with a time ('00/00/0000 00:00:00') is a placeholder, not an unparseable date.
CREATE OR REPLACE FUNCTION etl.date_dmy_iso_kind(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t IS NULL OR btrim(t) = '' THEN 'null'
    WHEN btrim(t) ~ '^(0|(00/00/0000|0000-00-00)( 00:00(:00)?)?|0000-00-00T00:00(:00)?)$' THEN 'placeholder'
    WHEN etl.parse_date_dmy_iso(t) IS NOT NULL THEN 'ok'
    ELSE 'bad' END
$$;
