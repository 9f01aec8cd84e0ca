-- Overlap, step 3 of 3: hectares (EPSG:10857, the same method as the property's own
-- area) and share of the property per (property, feature); for a property crossing a
-- large feature, the sum over the feature's pieces near it (pieces of one feature do not
-- overlap). Two polygons sharing less than 1 m² share a border, not an area
-- (CONTRACT §3): no row.
CREATE UNLOGGED TABLE {{out}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT z.car, z.uf, z.fid,
       CASE WHEN bool_and(z.is_point) THEN NULL ELSE sum(z.ha) END AS area_sobreposta_ha,
       CASE WHEN bool_and(z.is_point) THEN NULL ELSE least(1, sum(z.ha) / nullif(min(z.car_ha), 0)) END AS percentual,
       bool_or(z.ativo) AS ativo
FROM (
  SELECT h.car, h.uf, h.fid, h.car_ha, h.is_point, h.ativo, h.ha FROM {{hits}} h WHERE h.ha IS NOT NULL
  UNION ALL
  SELECT h.car, h.uf, h.fid, h.car_ha, false, h.ativo,
         -- no ST_Covers(piece, property) branch: these properties are the ones the whole
         -- feature does not cover, so none of its pieces does (that relate test, always
         -- false, was ~10 % of this statement on the municipalities)
         CASE WHEN ST_CoveredBy(p.geom, h.geom) THEN etl.area_ha(p.geom)
              ELSE etl.area_ha(ST_Intersection(h.geom, p.geom)) END
  FROM {{hits}} h JOIN {{pieces}} p ON p.k = h.k AND p.geom && h.geom
  WHERE h.ha IS NULL
) z
GROUP BY z.car, z.uf, z.fid
-- a shared border is not an overlap: at least 1 m²
HAVING bool_or(z.is_point) OR sum(z.ha) >= 0.0001
