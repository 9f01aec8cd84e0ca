SELECT src_seq FROM {{stage}} WHERE geom IS NOT NULL AND NOT ST_IsValid(geom) ORDER BY src_seq
