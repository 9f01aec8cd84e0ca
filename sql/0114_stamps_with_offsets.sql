-- A date and time that carries its offset ('2025-06-11T01:30:00Z', '…-03:00', '…+0000') is an
-- instant; its first ten characters are its day where it was written, not in Brazil. A
-- property registered at 22:30 in Brasília on 10 June, written in UTC, was dated the 11th: a
-- day after a release of the 10th (nulled as implausible) and a day apart from the same record
-- read from a shapefile (10/06/2025). Such a stamp now reads as Brasília's wall time (the
-- official time the publishers date by; daylight saving of the years that had it included),
-- its day the date. A stamp without an offset is a wall time already and reads as before; so
-- does one whose parts are not a date and time (its day as written, as etl.parse_date reads it).

-- Brasília's wall time of an ISO date and time with an explicit offset; NULL for anything else.
CREATE FUNCTION etl.brasilia_time(t text) RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE m text[] := regexp_match(btrim(coalesce(t, '')),
          '^(\d{4})-(\d{2})-(\d{2})[T ](\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?\s*(?:([Zz])|([+-])(\d{2}):?(\d{2})?)$');
        d date;
        off interval;
BEGIN
  IF m IS NULL THEN RETURN NULL; END IF;
  d := etl.ymd(m[1]::int, m[2]::int, m[3]::int);
  IF d IS NULL OR m[4]::int > 23 OR m[5]::int > 59 OR coalesce(m[6], '0')::numeric >= 60
     OR coalesce(m[9], '0')::int > 14 OR coalesce(m[10], '0')::int > 59 THEN RETURN NULL; END IF;
  off := CASE WHEN m[7] IS NOT NULL THEN interval '0'
              ELSE CASE WHEN m[8] = '-' THEN -1 ELSE 1 END * make_interval(hours => m[9]::int, mins => coalesce(m[10], '0')::int) END;
  RETURN ((d + make_interval(hours => m[4]::int, mins => m[5]::int, secs => coalesce(m[6], '0')::double precision) - off)
          AT TIME ZONE 'UTC') AT TIME ZONE 'America/Sao_Paulo';
END $$;

-- The fast paths of 0083 stay first; only an ISO date and time ending in an offset calls the helper.
CREATE OR REPLACE FUNCTION etl.parse_date(t text) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t ~ '^\d{2}/\d{2}/\d{4}$' THEN etl.ymd(substr(t, 7, 4)::int, substr(t, 4, 2)::int, substr(t, 1, 2)::int)
    WHEN t ~ '^\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}.*([Zz]|[+-]\d{2}(:?\d{2})?)\s*$'
      THEN coalesce(etl.brasilia_time(t)::date, etl.ymd(substr(t, 1, 4)::int, substr(t, 6, 2)::int, substr(t, 9, 2)::int))
    WHEN t ~ '^\d{4}-\d{2}-\d{2}(\D|$)' THEN etl.ymd(substr(t, 1, 4)::int, substr(t, 6, 2)::int, substr(t, 9, 2)::int)
    WHEN t IS NULL OR t !~ '\d' THEN NULL
    ELSE etl.parse_date_any(t) END
$$;

-- The time of day likewise (etl.parse_timestamp reads this function): the rule of 0083, kept
-- under a name of its own, reads a stamp without an offset.
ALTER FUNCTION etl.ibama_timestamp(text) RENAME TO written_timestamp;
CREATE FUNCTION etl.ibama_timestamp(t text) RETURNS timestamp
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(etl.brasilia_time(t), etl.written_timestamp(t))
$$;
