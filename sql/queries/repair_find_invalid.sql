-- Staged rows whose geometry is not valid, in the src_seq range [$1, $2] (the range lets two
-- connections split the scan; PostgreSQL may also scan each half in parallel).
SELECT src_seq FROM {{stage}} WHERE src_seq BETWEEN $1::bigint AND $2::bigint AND geom IS NOT NULL AND NOT ST_IsValid(geom) ORDER BY src_seq
