-- The official list's municipalities the mesh lacks, staged as rows without geometry
-- (SOURCES §9.7: the code stays in ref_municipio, spatial joins find no geometry). Mesh codes
-- compare as the classify reads them (a numeric DBF field reads '5208707.0').
INSERT INTO {{stage}} (src_seq, src_layer, src_srid, geocodigo, nome, extra)
SELECT m.n + row_number() OVER (ORDER BY o.geocodigo), 'localidades', 4674, o.geocodigo, o.nome, '{"sem_malha": true}'::jsonb
FROM {{list}} o
CROSS JOIN (SELECT coalesce(max(src_seq), 0) AS n FROM {{stage}}) m
WHERE NOT EXISTS (SELECT 1 FROM {{stage}} s WHERE regexp_replace(btrim(s.geocodigo), '\.0*$', '') = o.geocodigo)
