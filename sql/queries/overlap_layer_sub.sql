-- Subdivided copy of one layer snapshot (≤ 256 vertices a piece): overlap joins then
-- test small pieces instead of 50,000-vertex indigenous lands. Pieces of one feature
-- do not overlap each other, so summing per-piece intersections gives the feature's.
--
-- Pieces are cut by halving the bounding box across its longer side with ST_ClipByBox2D
-- until each has ≤ 256 vertices (at most 40 halvings, as ST_Subdivide caps its depth);
-- smaller features are copied whole.
-- A rectangle clip is linear in the vertices, where ST_Subdivide runs a full overlay at
-- every level: about 4× faster on the indigenous-land and conservation-unit layers of
-- bench/overlaps.ts (bench/README.md). A clip can in rare cases return an invalid
-- polygon (rings touching along the cut), so cut polygonal pieces are checked and made
-- valid. JIT compilation costs seconds on these expensive-looking plans, for nothing.
SET LOCAL jit = off;
CREATE TABLE {{sub}} AS
WITH RECURSIVE piece(fid, ativo, g, depth, done) AS (
  SELECT {{id}}::text, {{active}}, geom::geometry, 0, false
  FROM {{layer}} WHERE geom IS NOT NULL AND {{filter}} AND ST_NPoints(geom) > 256
  UNION ALL
  SELECT p.fid, p.ativo, h.g, p.depth + 1, ST_NPoints(h.g) <= 256 OR p.depth + 1 >= 40
  FROM piece p
  CROSS JOIN LATERAL (SELECT ST_XMin(p.g) AS x0, ST_YMin(p.g) AS y0, ST_XMax(p.g) AS x1, ST_YMax(p.g) AS y1,
                             GeometryType(p.g) LIKE '%POLYGON' AS polygonal) b
  CROSS JOIN LATERAL (SELECT b.x1 - b.x0 >= b.y1 - b.y0 AS vertical, (b.x0 + b.x1) / 2 AS xm, (b.y0 + b.y1) / 2 AS ym) m
  CROSS JOIN LATERAL (
    SELECT ST_ClipByBox2D(p.g, CASE WHEN m.vertical THEN ST_MakeBox2D(ST_Point(b.x0, b.y0), ST_Point(m.xm, b.y1))
                                    ELSE ST_MakeBox2D(ST_Point(b.x0, b.y0), ST_Point(b.x1, m.ym)) END)
    UNION ALL
    SELECT ST_ClipByBox2D(p.g, CASE WHEN m.vertical THEN ST_MakeBox2D(ST_Point(m.xm, b.y0), ST_Point(b.x1, b.y1))
                                    ELSE ST_MakeBox2D(ST_Point(b.x0, m.ym), ST_Point(b.x1, b.y1)) END)
  ) c(g)
  CROSS JOIN LATERAL (SELECT CASE WHEN b.polygonal THEN ST_CollectionExtract(c.g, 3) ELSE c.g END AS g) h
  WHERE NOT p.done AND NOT ST_IsEmpty(h.g)
)
SELECT v.fid, v.ativo, GeometryType(v.g) IN ('POINT', 'MULTIPOINT') AS is_point, v.g AS geom,
       CASE WHEN GeometryType(v.g) LIKE '%POLYGON' THEN etl.area_ha(v.g) ELSE 0 END AS area_ha
FROM (
  -- features small enough stay whole (and out of the recursion's work tables)
  SELECT {{id}}::text AS fid, {{active}} AS ativo, geom::geometry AS g
  FROM {{layer}} WHERE geom IS NOT NULL AND {{filter}} AND ST_NPoints(geom) <= 256
  UNION ALL
  SELECT p.fid, p.ativo,
         CASE WHEN GeometryType(p.g) LIKE '%POLYGON' AND NOT ST_IsValid(p.g)
              THEN ST_CollectionExtract(ST_MakeValid(p.g), 3) ELSE p.g END
  FROM piece p WHERE p.done
) v
