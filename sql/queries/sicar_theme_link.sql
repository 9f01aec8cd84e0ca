-- Theme polygons from layers without cod_imovel (the older per-municipality layout: IDF,
-- NOM_TEMA, NUM_AREA) linked to a property of this snapshot: the property whose polygon
-- contains the theme polygon's point-on-surface (ST_PointOnSurface lies inside the polygon,
-- a centroid may not), when exactly one property does. matches = 0 (no property) or > 1
-- (overlapping self-declared properties: ambiguous) leaves it unlinked: counted in the
-- report, not loaded. {{properties}} holds the winning properties (car, geom in 4326).
-- Repairs are in the staged row (repair.ts repairInPlace).
CREATE UNLOGGED TABLE {{links}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, CASE WHEN count(p.car) = 1 THEN min(p.car) END AS car, count(p.car)::int AS matches
FROM {{stage}} s
CROSS JOIN LATERAL (
  SELECT ST_PointOnSurface(ST_Transform(ST_SetSRID(s.geom, s.src_srid), 4326)) AS pt
  WHERE s.geom IS NOT NULL AND coalesce(s.repair, 'repaired') = 'repaired'
) x
LEFT JOIN {{properties}} p ON ST_Contains(p.geom, x.pt)
WHERE s.src_layer = ANY({{layers}}::text[])
GROUP BY s.src_seq
