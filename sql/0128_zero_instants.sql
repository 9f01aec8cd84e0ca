-- The zero date with a zero time and an offset ('0000-00-00T00:00:00-03:00', '0000-00-00
-- 00:00:00+00', as a timestamptz export writes its "no date") counted as an unparseable date,
-- its text kept, where the 'Z' form is a placeholder: an ISO zero date's zero time may now end
-- in Z or any offset (±hh, ±hhmm, ±hh:mm), after 'T' or a space.
CREATE OR REPLACE FUNCTION etl.is_zero_date(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT btrim(t) ~ '^(0|00000000|(00/00/0000|00-00-0000)( 00:00(:00(\.0+)?)?)?|0000-00-00([T ]00:00(:00(\.0+)?)?(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?)$'
$$;
