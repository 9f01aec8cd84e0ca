-- Road distance, last step: the candidates src/etl/nearest-line.ts found for each property
-- (per polygon ring and road line part within 0.8 % of the least, on the sphere: their
-- closest points, PostGIS' own), measured on the ellipsoid as ST_Distance(geography)
-- measures two points; the least per property, ties to the smallest feature id.
CREATE UNLOGGED TABLE {{out}} AS
SELECT DISTINCT ON (x.car) x.car, x.uf, x.fid, NULL::double precision AS area_sobreposta_ha, NULL::double precision AS percentual,
       NULL::boolean AS ativo, x.g / 1000 AS distancia_km
FROM (
  SELECT r.car, r.uf, r.fid,
         ST_Distance(ST_SetSRID(ST_MakePoint(r.px, r.py), 4326)::geography, ST_SetSRID(ST_MakePoint(r.qx, r.qy), 4326)::geography) AS g
  FROM {{raw}} r
) x
ORDER BY x.car, x.g, x.fid
