-- The one pipeline shape (src/etl/relation.ts): the conversions a declaration names that had
-- no function of their own yet.

-- A whole number read from text ('12', '12.0'): NULL for a fraction, anything that is not a
-- number, or a value outside integer range.
CREATE FUNCTION etl.parse_whole(t text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN x = trunc(x) AND abs(x) <= 2147483647 THEN x::integer END FROM etl.parse_number(t) AS x
$$;

-- Adding a column to a relation is one line in a migration, beside the declaration's new
-- last column (src/etl/relation.ts; pipelines/README.md): the template, every kept snapshot
-- table of the relation (so that rollbacks keep one shape) and current.<relation> (its
-- SELECT * expanded again) all gain the column, at the end. Serving views list their columns:
-- add it there with CREATE OR REPLACE VIEW in the same migration when it is to be served.
CREATE FUNCTION etl.add_relation_column(relation text, col text, typ text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  t record;
  body text;
BEGIN
  EXECUTE format('ALTER TABLE snap.%I ADD COLUMN %I %s', relation || '__template', col, typ);
  FOR t IN
    SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'snap' AND c.relkind = 'r' AND c.relname ~ ('^' || relation || '__s[0-9]+$')
  LOOP
    EXECUTE format('ALTER TABLE snap.%I ADD COLUMN %I %s', t.relname, col, typ);
  END LOOP;
  -- The tables current.<relation> reads (one per published scope, or the template).
  SELECT string_agg(format('SELECT * FROM %s', d.tbl), E'\nUNION ALL\n' ORDER BY d.tbl)
    INTO body
    FROM (SELECT DISTINCT dep.refobjid::regclass::text AS tbl
            FROM pg_depend dep JOIN pg_rewrite r ON r.oid = dep.objid
           WHERE r.ev_class = format('"current".%I', relation)::regclass
             AND dep.refobjid <> r.ev_class AND dep.classid = 'pg_rewrite'::regclass
             AND dep.refclassid = 'pg_class'::regclass) d;
  EXECUTE format('CREATE OR REPLACE VIEW "current".%I AS %s', relation, coalesce(body, format('SELECT * FROM snap.%I', relation || '__template')));
END
$$;
