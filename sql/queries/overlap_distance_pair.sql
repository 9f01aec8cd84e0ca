-- Distance from every property to the nearest feature of a line layer (roads): the
-- index finds the nearest candidates in degrees, the geodesic distance picks the one.
CREATE UNLOGGED TABLE {{out}} AS
SELECT c.car, c.uf, n.fid, NULL::double precision AS area_sobreposta_ha, NULL::double precision AS percentual,
       NULL::boolean AS ativo, n.km AS distancia_km
FROM {{car}} c
CROSS JOIN LATERAL (
  SELECT k.fid, ST_Distance(c.geom::geography, k.geom::geography) / 1000 AS km
  FROM (SELECT s.fid, s.geom FROM {{sub}} s ORDER BY s.geom <-> c.geom LIMIT 8) k
  ORDER BY km, k.fid LIMIT 1
) n
