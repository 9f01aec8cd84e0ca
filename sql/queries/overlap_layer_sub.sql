-- Subdivided copy of one layer snapshot (≤ 256 vertices a piece): overlap joins then
-- test small pieces instead of 50,000-vertex indigenous lands. Pieces of one feature
-- do not overlap each other, so summing per-piece intersections gives the feature's.
CREATE TABLE {{sub}} AS
SELECT l.fid, l.ativo, GeometryType(p.g) IN ('POINT', 'MULTIPOINT') AS is_point, p.g AS geom,
       CASE WHEN GeometryType(p.g) LIKE '%POLYGON' THEN etl.area_ha(p.g) ELSE 0 END AS area_ha
FROM (SELECT {{id}}::text AS fid, {{active}} AS ativo, geom FROM {{layer}} WHERE geom IS NOT NULL AND {{filter}}) l
CROSS JOIN LATERAL (SELECT ST_Subdivide(l.geom, 256) AS g) p
