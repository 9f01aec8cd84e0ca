-- etl.car_number_ok, same answer, a quarter of the cost. The pattern of 0003
-- ('^[A-Z]{2}-\d{7}-[0-9A-F]{32}$') compiles its counted repetitions into a large automaton:
-- 2.8 µs a row, called twice a row by the SICAR typed passes (measured: a third of the
-- 1,000,368-polygon APPS pass). Here the length (43 characters) and the second hyphen's
-- position fix the counts, and the pattern has no counted repetition: the only hyphen
-- after the third character is the 11th, so \d+ covers characters 4–10 (seven) and the
-- hex digits 12–43 (32). 0.6 µs a row. test/sicar-theme-area.test.ts checks both agree.
CREATE OR REPLACE FUNCTION etl.car_number_ok(car text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(length(car) = 43 AND substr(car, 11, 1) = '-' AND car ~ '^[A-Z][A-Z]-\d+-[0-9A-F]+$'
                  AND substr(car, 4, 2) = etl.uf_ibge_code(left(car, 2)), false)
$$;
