-- Hectares per property and theme without double counting (contract §3): the area of the
-- union of the detailed polygons (overlaps counted once); the *_TOTAL union polygons only
-- when a property has no detailed ones. In APPS only APP_* codes are preservation areas; a
-- polygon without cod_tema (older per-municipality layout) counts as a detailed one.
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
-- One statement per part ({{part}} of 2, by a hash of the CAR number): the caller runs the two
-- parts on two connections into {{theme_area}} (created empty by the caller). The polygons are
-- car_tema's or the kept typed rows it is built from (the same columns and values), so that
-- the hectares and car_tema's build can run at once.
INSERT INTO {{theme_area}} (car, app_ha, reserva_legal_ha, area_consolidada_ha)
WITH r AS (
  SELECT car COLLATE "C" AS car, tema_base COLLATE "C" AS tema_base, geom, area_calculada_ha AS ha,
         CASE WHEN cod_tema LIKE '%\_TOTAL' THEN 'total'
              WHEN tema_base <> 'APPS' OR cod_tema LIKE 'APP\_%' OR cod_tema IS NULL THEN 'detail' END COLLATE "C" AS role
    FROM {{polygons}}
   WHERE (coalesce(hashtext(car), 0) & 1) = {{part}}
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
SELECT car,
       coalesce(sum(ha) FILTER (WHERE tema_base = 'APPS' AND role = 'detail'),
                sum(ha) FILTER (WHERE tema_base = 'APPS' AND role = 'total')) AS app_ha,
       coalesce(sum(ha) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND role = 'detail'),
                sum(ha) FILTER (WHERE tema_base = 'RESERVA_LEGAL' AND role = 'total')) AS reserva_legal_ha,
       coalesce(sum(ha) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND role = 'detail'),
                sum(ha) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA' AND role = 'total')) AS area_consolidada_ha
  FROM per_role
 GROUP BY car
