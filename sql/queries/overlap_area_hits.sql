-- Overlap, step 1 of 3 (then overlap_area_pieces, overlap_area_pair): every property of
-- one CAR snapshot that intersects a feature of one part of a layer snapshot.
--
-- The features are the outer loop and probe the properties' GiST index, so the same
-- feature is the first argument of consecutive ST_Intersects / ST_Covers calls and
-- PostGIS prepares it once (a municipality or an indigenous land is tested against
-- hundreds of properties). Settled here: point features (IBAMA terms without a polygon:
-- area 0, they count when inside the property), properties inside the feature, and small
-- features (≤ 256 vertices: one overlay). A property crossing the border of a large
-- feature keeps ha NULL and its geometry: step 2 cuts that feature, step 3 sums the
-- overlay with the pieces near the property.
-- A property inside the feature (most pairs of a municipality, an indigenous land) needs one
-- prepared test, ST_Covers, not ST_Intersects as well: covers is asked first (fenced, so it is
-- computed once a pair) and intersects only when it says no (the hits statement 15–20 %
-- faster on bench/overlaps' municipalities and indigenous lands, same rows; ~2 % of the whole
-- derive stage, within its run-to-run spread).
-- The features' subquery is fenced (OFFSET 0): pulled up into the join, its columns
-- (GeometryType, ST_NPoints) were evaluated per joined row, each time detoasting the
-- feature (a municipality or an indigenous land is tens of kB to MBs compressed).
--   {{part}}: SQL condition on l, the share of the layer's features this statement takes.
CREATE UNLOGGED TABLE {{hits}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT f.ctid AS k, f.fid, f.ativo, f.is_point, c.car, c.uf, c.area_calculada_ha AS car_ha, x.ha,
       CASE WHEN x.ha IS NULL THEN c.geom END AS geom
FROM (
  SELECT l.ctid, {{id}}::text AS fid, {{active}} AS ativo, l.geom,
         GeometryType(l.geom) IN ('POINT', 'MULTIPOINT') AS is_point, ST_NPoints(l.geom) <= 256 AS small
  FROM {{layer}} l
  WHERE l.geom && (SELECT ST_SetSRID(ST_Extent(c.geom)::geometry, 4326) FROM {{car}} c) AND {{filter}} AND ({{part}})
  OFFSET 0
) f
CROSS JOIN LATERAL (SELECT c.car, c.uf, c.area_calculada_ha, c.geom, ST_Covers(f.geom, c.geom) AS covered FROM {{car}} c
                    WHERE c.geom && f.geom OFFSET 0) c
CROSS JOIN LATERAL (SELECT CASE WHEN f.is_point THEN 0
                                WHEN c.covered THEN c.area_calculada_ha
                                WHEN NOT f.small THEN NULL
                                WHEN ST_CoveredBy(f.geom, c.geom) THEN etl.area_ha(f.geom)
                                ELSE etl.area_ha(ST_Intersection(c.geom, f.geom)) END AS ha) x
-- a point-only term counts when it lies inside the property (contract §3): a point on the
-- border (a vertex shared by two neighbours) is inside neither
WHERE c.covered OR CASE WHEN f.is_point THEN ST_Relate(f.geom, c.geom, 'T********') ELSE ST_Intersects(f.geom, c.geom) END
