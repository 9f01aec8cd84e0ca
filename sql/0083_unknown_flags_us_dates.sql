-- Values that were read as something they may not be:
--
-- 1. IBAMA's SIT_CANCELADO / SIT_DESEMBARGO hold 'S'/'N' (SOURCES §3.4 writes "`S`/…": other
--    values exist). etl.ibama_flag reads anything but a yes as "no", so an unknown value made
--    the term active with nothing said. It still counts as active (contract §3: a status not
--    known to be inactive is active) but is now known to be unknown: listed in the report and
--    kept in `extra` (pipelines/ibama-embargos, queries/ibama_typed.sql).
CREATE FUNCTION etl.ibama_flag_known(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT upper(btrim(coalesce(t, ''))) IN ('', 'S', 'SIM', 'Y', 'T', 'TRUE', '1', 'N', 'NAO', 'NÃO', 'NO', 'F', 'FALSE', '0')
$$;

-- 2. A date whose year runs on into more digits ('10/03/20255', '2025-03-105': a typo, two
--    cells run together) was read from its first digits as another date: it is no date now
--    (NULL, its text kept and counted). A date followed by anything else (a time, 'Z') still
--    parses, as IBAMA's 'ISO-like prefix' stamps need.
CREATE OR REPLACE FUNCTION etl.parse_date(t text) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN t ~ '^\d{2}/\d{2}/\d{4}$' THEN etl.ymd(substr(t, 7, 4)::int, substr(t, 4, 2)::int, substr(t, 1, 2)::int)
    WHEN t ~ '^\d{4}-\d{2}-\d{2}(\D|$)' THEN etl.ymd(substr(t, 1, 4)::int, substr(t, 6, 2)::int, substr(t, 9, 2)::int)
    WHEN t IS NULL OR t !~ '\d' THEN NULL
    ELSE etl.parse_date_any(t) END
$$;

-- 3. A day/month date followed by a 12-hour time ('03/10/2025 01:15:00 PM') is written in the
--    US order (month first): Brazilian sources never use AM/PM. Read day first it was
--    silently another date (10 March as 3 October); it is now no date: NULL, its text kept
--    and counted as unparseable like any other (etl.date_kind 'bad'). ISO dates
--    ('2025-03-10 01:15 PM') stay unambiguous and keep parsing. Only the slow branch
--    (parse_date_any) changes: the exact dd/mm/yyyy and ISO patterns never carry a time marker.
CREATE OR REPLACE FUNCTION etl.parse_date_any(t text) RETURNS date
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE s text := btrim(coalesce(t, ''));
        m text[];
BEGIN
  m := regexp_match(s, '^(\d{1,2})[/-](\d{1,2})[/-](\d{4})(\D|$)');
  IF m IS NOT NULL THEN
    IF s ~* '\d\s*[ap]\.?\s?m\.?$' THEN RETURN NULL; END IF;
    RETURN etl.ymd(m[3]::int, m[2]::int, m[1]::int);
  END IF;
  m := regexp_match(s, '^(\d{4})-(\d{1,2})-(\d{1,2})(\D|$)');
  IF m IS NOT NULL THEN RETURN etl.ymd(m[1]::int, m[2]::int, m[3]::int); END IF;
  m := regexp_match(s, '^(\d{4})(\d{2})(\d{2})$');
  IF m IS NOT NULL THEN RETURN etl.ymd(m[1]::int, m[2]::int, m[3]::int); END IF;
  RETURN NULL;
END $$;

-- The time of day of such a stamp with an unambiguous date ('2025-03-10 01:15 PM') honours
-- its marker: 13:15, not 01:15 (12 AM is 00, 12 PM is 12).
CREATE OR REPLACE FUNCTION etl.ibama_timestamp(t text) RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE d date := etl.parse_date(t);
        m text[];
        h int;
        pm text[];
BEGIN
  IF d IS NULL THEN RETURN NULL; END IF;
  m := regexp_match(t, '\d[T ](\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?');
  IF m IS NULL OR m[1]::int > 23 OR m[2]::int > 59 OR coalesce(m[3], '0')::numeric >= 60 THEN RETURN d::timestamp; END IF;
  h := m[1]::int;
  pm := regexp_match(t, '\d\s*([ap])\.?\s?m\.?\s*$', 'i');
  IF pm IS NOT NULL THEN
    IF h < 1 OR h > 12 THEN RETURN d::timestamp; END IF;
    h := (h % 12) + CASE WHEN lower(pm[1]) = 'p' THEN 12 ELSE 0 END;
  END IF;
  RETURN d + make_interval(hours => h, mins => m[2]::int, secs => coalesce(m[3], '0')::double precision);
END $$;
