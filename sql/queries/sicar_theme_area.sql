-- Hectares per property and theme without double counting (contract §3): the area of the
-- union of the detailed polygons (overlaps counted once); the *_TOTAL union polygons only
-- when a property has no detailed ones. In APPS only APP_* codes are preservation areas; a
-- polygon without cod_tema (older per-municipality layout) counts as a detailed one. Codes
-- are compared in upper case with blanks and hyphens read as underscores (a re-export that
-- wrote 'app_total', 'APP TOTAL' or 'APP-RIO-ATE-10' fell in no role and its hectares were
-- lost); they are published as written.
--
-- The same number as etl.area_ha(ST_UnaryUnion(ST_Collect(geom))) per property and theme,
-- computed without a union for most groups: within a group (car, theme, detailed or total),
-- polygons whose bounding boxes chain together by overlapping or touching form a cluster
-- (ST_ClusterDBSCAN of the boxes, distance 0: a window over the sorted rows, boxes only, no
-- self-join). Clusters share no interior point, so the union's area is the sum of the
-- clusters' union areas, and a one-polygon cluster's union is the (valid, repaired) polygon
-- itself: its area_calculada_ha, computed by the typed pass. Only clusters of two or more polygons
-- are unioned. Measured on 200,000 properties / 2,001,555 polygons: 1,821,224 clusters, of
-- which 134,424 unioned; 12 s on one connection instead of 32 s.
--
-- The keys are compared bytewise (COLLATE "C"): the window's sort compares with memcmp and
-- abbreviated keys instead of strcoll (a libc collation such as the database's C.UTF-8 sorts
-- the slow way), and the groups' sort becomes an incremental one over the window's order. A
-- deterministic collation's equality is byte equality: the same partitions and groups, and
-- nothing here depends on their order. Measured on one half of 1,000,368 APPS polygons
-- (501,426 rows), load 4–5: 2.6–3.2 s → 2.3–3.2 s, the same hectares to the bit.
--
-- One statement per theme ({{polygons}}: that theme's kept typed rows, or car_tema's rows of it):
-- the caller runs the themes on two connections, beside car_tema's build, into {{theme_area}}
-- (created empty by the caller), one row per property and theme. Earlier the statement took
-- every theme and half of the properties (a hash of the CAR number) on each connection: beside
-- car_tema's build, the second half left one connection idle for its whole length; and each
-- half re-read every theme's rows to keep half of them.
INSERT INTO {{theme_area}} (car, tema_base, ha)
WITH r AS (
  SELECT car COLLATE "C" AS car, tema_base COLLATE "C" AS tema_base, geom, area_calculada_ha AS ha,
         CASE WHEN code LIKE '%\_TOTAL' THEN 'total'
              WHEN tema_base <> 'APPS' OR code LIKE 'APP\_%' OR code IS NULL THEN 'detail' END COLLATE "C" AS role
    FROM {{polygons}}, LATERAL (SELECT upper(translate(cod_tema, ' -', '__')) AS code) c
), clustered AS (
  SELECT car, tema_base, role, geom, ha,
         ST_ClusterDBSCAN(ST_Envelope(geom), 0, 1) OVER (PARTITION BY car, tema_base, role) AS cluster
    FROM r
   WHERE role IS NOT NULL
), per_cluster AS (
  SELECT car, tema_base, role,
         CASE WHEN count(*) = 1 THEN sum(ha) ELSE etl.area_ha(ST_UnaryUnion(ST_Collect(geom))) END AS ha
    FROM clustered
   GROUP BY car, tema_base, role, cluster
), per_role AS (
  SELECT car, tema_base, role, sum(ha) AS ha FROM per_cluster GROUP BY car, tema_base, role
)
-- the detailed polygons' hectares; the *_TOTAL ones' only when there are no detailed ones
SELECT car, tema_base, coalesce(sum(ha) FILTER (WHERE role = 'detail'), sum(ha) FILTER (WHERE role = 'total')) AS ha
  FROM per_role
 GROUP BY car, tema_base
