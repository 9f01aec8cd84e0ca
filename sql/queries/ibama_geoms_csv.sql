-- CSV route: the polygon of each staged term, parsed in SQL from its inline WKT (the file
-- gives lon/lat in EPSG:4326). A cell that does not parse becomes NULL with state 'bad_wkt'
-- instead of aborting the load; a parsed cell without polygonal parts is 'not_polygonal'.
CREATE UNLOGGED TABLE {{geoms}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, 4326 AS src_srid, p.geom, p.state
FROM {{stage}} s
CROSS JOIN LATERAL etl.ibama_parse_wkt(s.geom_wkt, 4326) p
