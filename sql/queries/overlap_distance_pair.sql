-- Geodesic distance (WGS 84, ST_Distance on geography) from every property of one CAR
-- snapshot (one part of them) to the nearest feature of a line layer (roads), exact:
--  1. the nearest piece in plain lon/lat (KNN on the pieces' GiST index) and its exact
--     geodesic distance g: an upper bound of the answer;
--  2. a geodesic shorter than g from the property stays within g / 110 574 degrees of
--     latitude of it (the meridional radius is smallest at the equator); over that band
--     kx, ky bound the metres per degree from below (etl.kx_min, etl.ky_min), so a piece
--     nearer than g lies within rdeg = g / min(kx, ky) degrees in plain lon/lat;
--     for each piece there, a lower bound of its geodesic distance: the planar distance
--     after scaling longitude and latitude by the metres per degree (lower bounds) over
--     the latitudes a geodesic between the two can reach — their boxes', widened by how
--     far a geodesic of length g bulges past its end points (under (g/R)²/2 radians with R
--     the smallest radius of curvature, for |φ| ≤ 75°). Pieces whose bound is at most g
--     get their exact geodesic distance (about one a property in bench/overlaps.ts);
--  3. the smallest distance, ties to the smallest feature id.
-- No piece outside the candidates can be nearer, so the result is the minimum of
-- ST_Distance over every piece of every road: what a brute-force scan would return.
-- Each candidate piece takes its own call, the KNN piece's same-line neighbours too:
-- ST_Distance(geography) returns the spheroid distance of the pair nearest on the sphere,
-- so one call on a line or collection of several pieces can exceed their minimum (up to
-- 8.5 m on 156 of 5,490 properties of bench/overlaps; test/overlap-distance.test.ts).
--   {{part}}: SQL condition on c, the share of the properties this statement takes.
CREATE UNLOGGED TABLE {{out}} AS
WITH k AS MATERIALIZED (
  SELECT c.car, c.uf, c.geom, n.pid, n.fid, ST_Distance(c.geom::geography, n.geom::geography) AS g
  -- properties in geohash order: consecutive probes walk the same index pages (2-3 % less
  -- backend CPU than heap order, measured on 45,000 properties)
  FROM (SELECT c.car, c.uf, c.geom FROM {{car}} c WHERE {{part}}
        ORDER BY CASE WHEN NOT ST_IsEmpty(c.geom) THEN ST_GeoHash(ST_Centroid(c.geom), 7) END) c
  CROSS JOIN LATERAL (SELECT s.pid, s.fid, s.geom FROM {{pieces}} s ORDER BY s.geom <-> c.geom LIMIT 1) n
),
b AS MATERIALIZED (
  SELECT k.*, w.kx, w.ky, k.g * (1 + 1e-9) / greatest(1, least(w.kx, w.ky)) AS rdeg,
         ST_YMin(k.geom) AS ylo, ST_YMax(k.geom) AS yhi, degrees((k.g / 6335439.0) ^ 2 / 2) + 1e-9 AS bulge
  FROM k
  CROSS JOIN LATERAL (SELECT ST_YMin(k.geom) - k.g / 110574.0 * (1 + 1e-9) AS lo, ST_YMax(k.geom) + k.g / 110574.0 * (1 + 1e-9) AS hi) y
  CROSS JOIN LATERAL (SELECT etl.kx_min(y.lo, y.hi) AS kx, etl.ky_min(y.lo, y.hi) AS ky) w
)
SELECT b.car, b.uf, m.fid, NULL::double precision AS area_sobreposta_ha, NULL::double precision AS percentual,
       NULL::boolean AS ativo, m.g / 1000 AS distancia_km
FROM b
CROSS JOIN LATERAL (
  SELECT x.fid, x.g FROM (
    SELECT b.fid, b.g
    UNION ALL
    SELECT s.fid, ST_Distance(b.geom::geography, s.geom::geography)
    FROM {{pieces}} s
    -- the latitudes a geodesic between the two can reach: their boxes' plus its bulge
    CROSS JOIN LATERAL (SELECT least(ST_YMin(s.geom), b.ylo) - b.bulge AS lo, greatest(ST_YMax(s.geom), b.yhi) + b.bulge AS hi) y
    CROSS JOIN LATERAL (SELECT least(90, greatest(abs(y.lo), abs(y.hi))) AS far,
                               CASE WHEN y.lo <= 0 AND y.hi >= 0 THEN 0 ELSE least(abs(y.lo), abs(y.hi)) END AS near) l
    -- etl.kx_min / etl.ky_min written out: a function call per candidate costs more than the test
    CROSS JOIN LATERAL (SELECT 6378137 * cos(radians(l.far)) / sqrt(1 - 0.00669437999014 * sin(radians(l.far)) ^ 2) * pi() / 180 AS kx,
                               6378137 * (1 - 0.00669437999014) / (1 - 0.00669437999014 * sin(radians(l.near)) ^ 2) ^ 1.5 * pi() / 180 AS ky) w
    -- box distance first: it never exceeds the real one and drops the corners of the
    -- index's square search box without reading their vertices
    WHERE ST_DWithin(s.geom, b.geom, b.rdeg) AND (s.geom <#> b.geom) <= b.rdeg AND s.pid <> b.pid
      AND ST_Distance(ST_Scale(s.geom, w.kx, w.ky), ST_Scale(b.geom, w.kx, w.ky)) <= b.g * (1 + 1e-9)
  ) x
  ORDER BY x.g, x.fid LIMIT 1
) m
