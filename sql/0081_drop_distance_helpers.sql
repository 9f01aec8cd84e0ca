-- The metres-per-degree bounds of 0025 served the road distance's SQL statement
-- (overlap_distance_pair); the road distance is computed in Node now
-- (src/etl/road-distance/nearest.ts has the same bounds), and nothing calls them.
DROP FUNCTION etl.kx_min(float8, float8);
DROP FUNCTION etl.ky_min(float8, float8);
DROP FUNCTION etl.m_per_deg_lon(float8);
DROP FUNCTION etl.m_per_deg_lat(float8);
