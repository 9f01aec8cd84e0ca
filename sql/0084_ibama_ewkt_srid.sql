-- An IBAMA WKT cell that names its CRS (EWKT, 'SRID=4674;POLYGON (…)', as PostGIS exports
-- write it) is read in that CRS and transformed to the CSV's (EPSG:4326). The SRID was
-- dropped with a warning and the coordinates taken as EPSG:4326: a SAD69 (4618) polygon
-- landed some 60 m off, a UTM one outside Brazil. A SRID PostGIS does not know makes the
-- cell 'bad_wkt' (counted; the term keeps its point), as any unreadable WKT does.
CREATE OR REPLACE FUNCTION etl.ibama_parse_wkt(wkt text, srid int, OUT geom geometry, OUT state text)
LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $$
DECLARE g geometry;
BEGIN
  IF nullif(btrim(wkt), '') IS NULL THEN RETURN; END IF;
  BEGIN
    IF btrim(wkt) ~* '^SRID=\d+\s*;' THEN
      g := ST_GeomFromEWKT(btrim(wkt));
      IF ST_SRID(g) <> srid THEN g := ST_Transform(g, srid); END IF;
      g := ST_Force2D(g);
    ELSE
      g := ST_Force2D(ST_GeomFromText(btrim(wkt), srid));
    END IF;
  EXCEPTION WHEN OTHERS THEN
    state := 'bad_wkt';
    RETURN;
  END;
  IF g IS NULL OR ST_IsEmpty(g) THEN RETURN; END IF;
  geom := ST_CollectionExtract(g, 3);
  IF ST_IsEmpty(geom) THEN
    geom := NULL;
    state := 'not_polygonal';
    RETURN;
  END IF;
  state := 'ok';
END $$;
