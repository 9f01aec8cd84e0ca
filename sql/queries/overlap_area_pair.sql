-- Overlap of every property of one CAR snapshot with every feature of one layer
-- snapshot: hectares (EPSG:10857, the same method as the property's own area) and the
-- share of the property. Cheap containment cases skip the intersection. Point
-- features (IBAMA terms without a polygon) count when they lie inside the property.
-- No JIT: PostGIS' function costs push these plans past jit_above_cost, and compiling
-- them cost 1.2–2.8 s per pair statement (each parallel worker compiles too) against
-- 0.3–3.5 s of execution in bench/overlaps.ts. SET LOCAL lasts until the pair's
-- transaction ends.
SET LOCAL jit = off;
CREATE UNLOGGED TABLE {{out}} AS
SELECT c.car, c.uf, s.fid,
       CASE WHEN bool_and(s.is_point) THEN NULL ELSE sum(x.ha) END AS area_sobreposta_ha,
       CASE WHEN bool_and(s.is_point) THEN NULL ELSE least(1, sum(x.ha) / nullif(c.area_calculada_ha, 0)) END AS percentual,
       bool_or(s.ativo) AS ativo
FROM {{car}} c
JOIN {{sub}} s ON ST_Intersects(c.geom, s.geom)
CROSS JOIN LATERAL (SELECT CASE
    WHEN s.is_point THEN 0
    WHEN ST_CoveredBy(s.geom, c.geom) THEN s.area_ha
    WHEN ST_CoveredBy(c.geom, s.geom) THEN c.area_calculada_ha
    ELSE etl.area_ha(ST_Intersection(c.geom, s.geom)) END AS ha) x
GROUP BY c.car, c.uf, c.area_calculada_ha, s.fid
-- a shared border is not an overlap: at least 1 m²
HAVING bool_or(s.is_point) OR sum(x.ha) >= 0.0001
