-- The official list's municipalities the mesh lacks, or whose only mesh features the classify
-- rejected (no usable geometry, outside Brazil, …), staged as rows without geometry and kept
-- (SOURCES §9.7: the code stays in ref_municipio, spatial joins find no geometry). Runs after
-- the classify: a rejected feature must not take an official code out of the crosswalk.
WITH added AS (
  INSERT INTO {{stage}} (src_seq, src_layer, src_srid, geocodigo, nome, extra)
  SELECT m.n + row_number() OVER (ORDER BY o.geocodigo), 'localidades', 4674, o.geocodigo, o.nome, '{"sem_malha": true}'::jsonb
  FROM {{list}} o
  CROSS JOIN (SELECT coalesce(max(src_seq), 0) AS n FROM {{stage}}) m
  WHERE NOT EXISTS (SELECT 1 FROM {{classified}} c WHERE c.geocodigo = o.geocodigo AND c.verdict = 'ok')
  RETURNING src_seq, geocodigo
)
INSERT INTO {{classified}} (src_seq, geocodigo, oficial, sem_malha, verdict)
SELECT src_seq, geocodigo, true, true, 'ok' FROM added
