-- Pieces of a line layer snapshot (roads) for the nearest-feature search: every line cut
-- into runs of at most 8 vertices (7 edges, ~1 km of SNV road) that share their end
-- vertices, numbered (pid). The road distance is the minimum of ST_Distance(geography)
-- over these pieces (src/etl/road-distance, which reads them into memory): short pieces
-- keep its boxes tight and the pair PostGIS finds nearest on the sphere close to the
-- nearest on the ellipsoid. Built once per layer snapshot and registered with it
-- (retention drops it).
CREATE TABLE {{pieces}} AS
WITH v AS (
  SELECT {{id}}::text AS fid, (d).path[1] AS line, (d).path[2] AS n, (d).geom AS pt
  FROM (SELECT l.{{id}}, ST_DumpPoints(ST_Multi(l.geom)) AS d FROM {{layer}} l
        WHERE l.geom IS NOT NULL AND NOT ST_IsEmpty(l.geom) AND {{filter}}) l
)
SELECT row_number() OVER () AS pid, r.fid, ST_SetSRID(ST_MakeLine(r.pts), 4326) AS geom
FROM (
  SELECT d.fid, array_agg(d.pt ORDER BY d.n) AS pts
  FROM (
    SELECT v.fid, v.line, v.n, v.pt, (v.n - 1) / 7 AS run FROM v
    UNION ALL
    -- a run's last vertex is the next run's first
    SELECT v.fid, v.line, v.n, v.pt, (v.n - 1) / 7 - 1 FROM v WHERE v.n > 1 AND (v.n - 1) % 7 = 0
  ) d
  GROUP BY d.fid, d.line, d.run
  HAVING count(*) >= 2
) r
