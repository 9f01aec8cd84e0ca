-- structure method: rings are rebuilt by their nesting, then only polygonal parts are kept.
INSERT INTO {{fix}} (src_seq, geom, status)
SELECT src_seq, g, CASE WHEN g IS NULL OR ST_IsEmpty(g) THEN 'empty' ELSE 'repaired' END
FROM (
  SELECT src_seq, ST_CollectionExtract(ST_MakeValid(ST_SetSRID(geom, src_srid), 'method=structure'), 3) AS g
  FROM {{stage}} WHERE src_seq = $1
) x
RETURNING status
