-- Normalisation audit (helpers that rejected good features or aborted a load on one cell).
--
-- 1. The Brazil envelope covers the sea Brazil's units reach. The old box (lon −75…−28,
--    lat −35…+6) held the land, but not the marine conservation units of 2018 around the
--    oceanic islands: the APAs and MONAs of São Pedro e São Paulo (0.92 N, 29.35 W) and of
--    Trindade / Martim Vaz (20.5 S, 28.85 W) cover the 200-nautical-mile zone around them,
--    to about 26° W and 25.3° W, and were rejected whole as 'outside_brazil' (CNUC's largest
--    units; SOURCES §4.7: "widen the bbox gate"). Their zones end near 25.3° W (east of
--    Martim Vaz), 23.9° S and 4.3° N: the eastern bound moves to 24° W, the others stay
--    (widening them would let more unsigned southern latitudes of the north-east pass as
--    northern ones). It still rejects what it is for: swapped axes (a swapped land point has
--    a longitude of −34…+6), a lost minus sign, projected metres read as degrees.
CREATE OR REPLACE FUNCTION etl.in_brazil(g geometry) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 'BOX(-75 -35,-24 6)'::box2d ~ box2d(g)
$$;

-- 2. A number cell never aborts a load. etl.parse_number tested its text with '\s', which
--    also matches Unicode spaces (U+2009 thin space, U+3000, U+2028, …) that the
--    double precision cast refuses: '12,5' followed by a thin space raised an error and
--    failed the whole run, as did an exponent out of range ('1e400', '1e-400': a DBF
--    numeric overflow written out, a spreadsheet's artefact). Spaces of any kind around the
--    number are now trimmed (NBSP too: '12,5 ' is 12.5); the number has at most 100
--    characters and an exponent of three digits is range-checked first, so the cast is
--    always in range; anything else is no number (NULL, its text kept and counted like any other).

-- Text without the spaces of any kind around it (what '\s' matches, NBSP, BOM). Plain SQL:
-- inlined into its callers.
CREATE FUNCTION etl.trim_spaces(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT btrim(t, E' \t\n\r\u000b\u000c\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff')
$$;

CREATE OR REPLACE FUNCTION etl.parse_number(t text) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN length(etl.trim_spaces(t)) > 100 THEN NULL
    WHEN etl.trim_spaces(t) ~ '^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,2})?$' THEN etl.trim_spaces(t)::double precision
    -- a three-digit exponent (1e+100, as a writer prints a huge double): range checked first
    WHEN etl.trim_spaces(t) ~ '^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]{3}$' THEN
      CASE WHEN abs(etl.trim_spaces(t)::numeric) BETWEEN 1e-300 AND 1e300 THEN etl.trim_spaces(t)::double precision END
    WHEN etl.trim_spaces(t) ~ '^[-+]?[0-9.]*[0-9],[0-9]*$' THEN replace(replace(etl.trim_spaces(t), '.', ''), ',', '.')::double precision
  END
$$;

-- 3. A code keeps no invisible space. etl.code_text trimmed ASCII spaces only: a code typed
--    into a DBF with a no-break space after it ('0000.52.9002 ', cp1252 0xA0, common in
--    attribute tables filled from spreadsheets) was published with it, a key no lookup by
--    code finds and no duplicate check matches; with '.0' ('5208707.0 ') it kept the '.0'
--    too. Spaces of any kind are trimmed now (0017's rule otherwise unchanged).
CREATE OR REPLACE FUNCTION etl.code_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN etl.is_overflow(t) THEN NULL
              WHEN etl.trim_spaces(t) ~ '^\d+\.0*$' THEN split_part(etl.trim_spaces(t), '.', 1)
              ELSE nullif(etl.trim_spaces(t), '') END
$$;

-- 4. An empty polygon is no geometry. A staged CAR geometry that is empty but not NULL (a
--    WFS feature {"type":"MultiPolygon","coordinates":[[]]}, 'MULTIPOLYGON EMPTY' in a CSV)
--    is valid, so never repaired, and has no bounding box: the envelope test was NULL and the
--    verdict fell through to 'ok', publishing a property without a polygon (area 0, no
--    overlap ever). It is 'no_geometry' now, counted and rejected like a missing one.
--    (layer_classify and dnit_classify already test ST_IsEmpty.)
CREATE OR REPLACE FUNCTION etl.sicar_verdict(car text, uf text, geom geometry, srid integer, repair text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN NOT etl.car_number_ok(car) THEN 'bad_car_number'
    WHEN left(car, 2) <> uf THEN 'other_state'
    WHEN geom IS NULL THEN 'no_geometry'
    WHEN repair = 'rejected' THEN 'geometry_unrepairable'
    WHEN repair = 'empty' THEN 'geometry_empty_after_repair'
    -- the envelope test is NULL for an empty geometry (no box); ST_IsEmpty (a full detoast)
    -- runs only for the rows the envelope does not keep
    WHEN coalesce(NOT etl.in_brazil(CASE WHEN srid IN (4326, 4674) THEN geom ELSE ST_Transform(ST_SetSRID(geom, srid), 4326) END), true)
      THEN CASE WHEN ST_IsEmpty(geom) THEN 'no_geometry' ELSE 'outside_brazil' END
    ELSE 'ok' END
$$;
