-- Shapefile route: the polygonal part of each staged feature, kept in the layer's SRID
-- (EPSG:4674); repair and the transform to 4326 come next, as for the CSV route.
CREATE UNLOGGED TABLE {{geoms}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT src_seq, src_srid,
       CASE WHEN state = 'ok' THEN ST_Force2D(ST_CollectionExtract(geom, 3)) END AS geom,
       state
FROM (
  SELECT src_seq, src_srid, geom,
         CASE WHEN geom IS NULL OR ST_IsEmpty(geom) THEN NULL
              WHEN ST_IsEmpty(ST_CollectionExtract(geom, 3)) THEN 'not_polygonal'
              ELSE 'ok' END AS state
  FROM {{stage}}
) s
