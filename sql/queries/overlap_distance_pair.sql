-- Geodesic distance (WGS 84, ST_Distance on geography) from every property of one CAR
-- snapshot (one part of them) to the nearest feature of a line layer (roads), exact:
--  1. the nearest piece in plain lon/lat (KNN on the pieces' GiST index) and its exact
--     geodesic distance g: an upper bound of the answer;
--  2. a geodesic shorter than g from the property stays within g / 110 574 degrees of
--     latitude of it (the meridional radius is smallest at the equator); over that band
--     kx, ky bound the metres per degree from below (etl.kx_min, etl.ky_min), so the
--     planar distance after scaling longitude by kx and latitude by ky is a lower bound
--     of any piece's geodesic distance, and a piece nearer than g lies within
--     rdeg = g / min(kx, ky) degrees in plain lon/lat. The other pieces within rdeg whose
--     lower bound is at most g get their exact geodesic distance;
--  3. the smallest distance, ties to the smallest feature id.
-- No piece outside the candidates can be nearer, so the result is the minimum of
-- ST_Distance over every piece of every road: what a brute-force scan would return.
--   {{part}}: SQL condition on c, the share of the properties this statement takes.
CREATE UNLOGGED TABLE {{out}} AS
WITH k AS MATERIALIZED (
  SELECT c.car, c.uf, c.geom, n.pid, n.fid, ST_Distance(c.geom::geography, n.geom::geography) AS g
  FROM {{car}} c
  CROSS JOIN LATERAL (SELECT s.pid, s.fid, s.geom FROM {{pieces}} s ORDER BY s.geom <-> c.geom LIMIT 1) n
  WHERE {{part}}
),
b AS MATERIALIZED (
  SELECT k.*, w.kx, w.ky, k.g * (1 + 1e-9) / greatest(1, least(w.kx, w.ky)) AS rdeg, ST_Scale(k.geom, w.kx, w.ky) AS scaled
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
    WHERE ST_DWithin(s.geom, b.geom, b.rdeg) AND s.pid <> b.pid
      AND ST_Distance(ST_Scale(s.geom, b.kx, b.ky), b.scaled) <= b.g * (1 + 1e-9)
  ) x
  ORDER BY x.g, x.fid LIMIT 1
) m
