-- Overlap, step 2 of 3: the large features some property crosses, cut into pieces of at
-- most 256 vertices (etl.subdivide_by_box). Only these features are cut, once per pair
-- part; nothing is copied for the rest of the layer.
CREATE UNLOGGED TABLE {{pieces}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT x.k, p.geom
FROM (SELECT DISTINCT k FROM {{hits}} WHERE ha IS NULL) x
JOIN {{layer}} l ON l.ctid = x.k
CROSS JOIN LATERAL etl.subdivide_by_box(l.geom, 256) p(geom)
