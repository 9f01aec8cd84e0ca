-- The properties a theme without cod_imovel can be linked to: the winning AREA_IMOVEL rows
-- of this snapshot, in EPSG:4326 (as the car_imovel snapshot will hold them), indexed.
CREATE UNLOGGED TABLE {{properties}} AS
SELECT w.car, ST_Multi(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)) AS geom
FROM {{winners}} w
JOIN {{stage}} s ON s.src_seq = w.src_seq
LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
