-- Repairs the staged rows $1 (src_seq[]): structure method, rings rebuilt by their nesting,
-- then only polygonal parts kept. One statement for many rows (a state's few thousand
-- bow-ties take well under a second together); repair.ts falls back to one row at a time.
INSERT INTO {{fix}} (src_seq, geom, status)
SELECT src_seq, g, CASE WHEN g IS NULL OR ST_IsEmpty(g) THEN 'empty' ELSE 'repaired' END
FROM (
  SELECT src_seq, ST_CollectionExtract(ST_MakeValid(ST_SetSRID(geom, src_srid), 'method=structure'), 3) AS g
  FROM {{stage}} WHERE src_seq = ANY($1::bigint[])
) x
RETURNING status
