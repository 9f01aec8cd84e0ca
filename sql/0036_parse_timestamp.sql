-- A date with an optional time of day, under its general name: the 'timestamp' conversion of
-- a relation declaration (src/etl/relation.ts). Same rule as etl.ibama_timestamp (0008), which
-- it reads: the day as etl.parse_date reads it, plus hh:mm[:ss] when valid, else midnight.
CREATE FUNCTION etl.parse_timestamp(t text) RETURNS timestamp
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT etl.ibama_timestamp(t)
$$;
