-- Repairs the staged rows $1 (src_seq[]) where they lie: the geometry replaced by its repair
-- (structure method, polygonal parts kept, in the source SRID) and `repair` set to 'repaired';
-- a repair that leaves nothing polygonal keeps the source geometry and is marked 'empty'.
UPDATE {{stage}} s
   SET geom = CASE WHEN r.g IS NULL OR ST_IsEmpty(r.g) THEN s.geom ELSE r.g END,
       repair = CASE WHEN r.g IS NULL OR ST_IsEmpty(r.g) THEN 'empty' ELSE 'repaired' END
  FROM (SELECT src_seq, ST_CollectionExtract(ST_MakeValid(ST_SetSRID(geom, src_srid), 'method=structure'), 3) AS g
          FROM {{stage}} WHERE src_seq = ANY($1::bigint[])) r
 WHERE s.src_seq = r.src_seq
RETURNING s.repair AS status
