-- Helpers of the derive stage (src/etl/overlaps.ts, sql/queries/overlap_*.sql).

-- Cuts a geometry into pieces of at most max_vertices vertices by halving its bounding box
-- across the longer side with ST_ClipByBox2D (GEOS rectangle intersection, linear in the
-- vertices) until each piece is small enough, at most 40 halvings deep (as ST_Subdivide).
-- Pieces of one polygon do not overlap, so per-piece intersection areas add up to the
-- feature's. A clip can in rare cases return an invalid polygon (rings touching along the
-- cut): cut polygonal pieces are checked and made valid. A set-returning function rather
-- than a recursive CTE: the CTE's work tables copied every intermediate piece and took
-- 2–3× longer on large indigenous lands (bench/README.md).
CREATE FUNCTION etl.subdivide_by_box(g geometry, max_vertices int DEFAULT 256, depth int DEFAULT 0)
RETURNS SETOF geometry LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
  polygonal boolean := GeometryType(g) LIKE '%POLYGON';
  x0 float8; y0 float8; x1 float8; y1 float8;
  half box2d;
  h geometry;
BEGIN
  IF ST_NPoints(g) <= max_vertices OR depth >= 40 THEN
    IF depth > 0 AND polygonal AND NOT ST_IsValid(g) THEN
      g := ST_CollectionExtract(ST_MakeValid(g), 3);
    END IF;
    IF NOT ST_IsEmpty(g) THEN
      RETURN NEXT g;
    END IF;
    RETURN;
  END IF;
  x0 := ST_XMin(g); y0 := ST_YMin(g); x1 := ST_XMax(g); y1 := ST_YMax(g);
  FOR half IN
    SELECT CASE WHEN x1 - x0 >= y1 - y0
                THEN ST_MakeBox2D(ST_Point(x0 + (x1 - x0) / 2 * k, y0), ST_Point(x0 + (x1 - x0) / 2 * (k + 1), y1))
                ELSE ST_MakeBox2D(ST_Point(x0, y0 + (y1 - y0) / 2 * k), ST_Point(x1, y0 + (y1 - y0) / 2 * (k + 1))) END
    FROM (VALUES (0), (1)) v(k)
  LOOP
    h := ST_ClipByBox2D(g, half);
    IF polygonal THEN
      h := ST_CollectionExtract(h, 3);
    END IF;
    IF NOT ST_IsEmpty(h) THEN
      RETURN QUERY SELECT etl.subdivide_by_box(h, max_vertices, depth + 1);
    END IF;
  END LOOP;
END $$;

-- Metres per degree of longitude and of latitude at latitude phi (degrees) on WGS 84.
CREATE FUNCTION etl.m_per_deg_lon(phi float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 6378137 * cos(radians(phi)) / sqrt(1 - 0.00669437999014 * sin(radians(phi)) ^ 2) * pi() / 180
$$;
CREATE FUNCTION etl.m_per_deg_lat(phi float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 6378137 * (1 - 0.00669437999014) / (1 - 0.00669437999014 * sin(radians(phi)) ^ 2) ^ 1.5 * pi() / 180
$$;

-- Lower bounds of the metres per degree of longitude (kx) and latitude (ky) over the
-- latitudes [lo, hi]: N·cos φ shrinks and M grows with |φ|, so kx is taken at the |φ|
-- farthest from the equator and ky at the nearest. Single expressions and not STRICT,
-- so that the planner inlines them (otherwise each call runs as its own little plan).
CREATE FUNCTION etl.kx_min(lo float8, hi float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT etl.m_per_deg_lon(least(90, greatest(abs(lo), abs(hi))))
$$;
CREATE FUNCTION etl.ky_min(lo float8, hi float8) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT etl.m_per_deg_lat(CASE WHEN lo <= 0 AND hi >= 0 THEN 0 ELSE least(abs(lo), abs(hi)) END)
$$;
