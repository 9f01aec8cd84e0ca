-- Overlap, step 3 of 3: hectares (EPSG:10857, the same method as the property's own
-- area) and share of the property per (property, feature); for a property crossing a
-- large feature, the sum over the feature's pieces near it (pieces of one feature do not
-- overlap). Two polygons sharing less than 1 m² share a border, not an area
-- (CONTRACT §3): no row.
-- Several features may share an id (IBAMA terms sharing NUM_TAD: a lifted term and its
-- re-issued twin over the same land): their hectares are those of the union of their
-- polygons over the property, not the sum (which counted twin land twice).
CREATE UNLOGGED TABLE {{out}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT y.car, y.uf, y.fid,
       CASE WHEN y.all_points THEN NULL ELSE coalesce(u.ha, y.ha) END AS area_sobreposta_ha,
       CASE WHEN y.all_points THEN NULL ELSE least(1, coalesce(u.ha, y.ha) / nullif(y.car_ha, 0)) END AS percentual,
       y.ativo
FROM (
  SELECT t.car, t.uf, t.fid, min(t.car_ha) AS car_ha, bool_and(t.is_point) AS all_points, bool_or(t.is_point) AS any_point,
         -- active when a term of the number that is over the property is: one sharing only
         -- its border (under 1 m²) is not, though it touches it (an active term beside the
         -- land and a lifted twin over it); NULL for layers without activity
         CASE WHEN bool_or(t.ativo) IS NOT NULL
              THEN coalesce(bool_or(t.ativo) FILTER (WHERE t.is_point OR serving.shares_area(t.ha)), false) END AS ativo,
         sum(t.ha) AS ha, array_agg(t.k) FILTER (WHERE NOT t.is_point) AS ks
  FROM (
    SELECT z.car, z.uf, z.fid, z.k, min(z.car_ha) AS car_ha, bool_and(z.is_point) AS is_point, bool_or(z.ativo) AS ativo, sum(z.ha) AS ha
    FROM (
  SELECT h.k, h.car, h.uf, h.fid, h.car_ha, h.is_point, h.ativo, h.ha FROM {{hits}} h WHERE h.ha IS NOT NULL
  UNION ALL
  SELECT h.k, h.car, h.uf, h.fid, h.car_ha, false, h.ativo,
         -- no ST_Covers(piece, property) branch: these properties are the ones the whole
         -- feature does not cover, so none of its pieces does (that relate test, always
         -- false, was ~10 % of this statement on the municipalities)
         CASE WHEN ST_CoveredBy(p.geom, h.geom) THEN etl.area_ha(p.geom)
              ELSE etl.area_ha(ST_Intersection(h.geom, p.geom)) END
  FROM {{hits}} h JOIN {{pieces}} p ON p.k = h.k AND p.geom && h.geom
  WHERE h.ha IS NULL
    ) z
    GROUP BY z.car, z.uf, z.fid, z.k
  ) t
  GROUP BY t.car, t.uf, t.fid
) y
LEFT JOIN LATERAL (
  SELECT etl.area_ha(ST_Intersection(c.geom, ST_Union(l.geom))) AS ha
  FROM {{car}} c, {{layer}} l
  WHERE cardinality(y.ks) > 1 AND c.car = y.car AND l.ctid = ANY (y.ks)
  GROUP BY c.geom
) u ON true
-- a shared border is not an overlap: at least 1 m²
WHERE y.any_point OR serving.shares_area(coalesce(u.ha, y.ha))
