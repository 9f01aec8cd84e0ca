-- Each staged ICMBio embargo typed once (pipelines/icmbio-embargos/queries.ts): its key,
-- document and final geometry (repaired row by row by the engine into {{fix}}, polygonal, 2D,
-- EPSG:4326, multi), the declared columns of icmbio_embargos (the columns placeholder: the
-- declaration's typed select list and check flags, over the staged row `s` and the values `c`
-- computed here), the flags the facts count, and its verdict. The build reads this table alone.
--
-- Verdict, in priority order: no key (no num_emb), no geometry, unrepairable, not polygonal,
-- outside Brazil, a copy of a kept key (the one read last wins: the layer has no change date),
-- else 'ok'. The HMAC key comes from the session setting agro.hmac_key, set by the loader for
-- this statement only. OFFSET 0 keeps each lateral evaluated once per row.
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT x.*,
       CASE WHEN x.no_key THEN 'no_key'
            WHEN x.no_geom THEN 'no_geometry'
            WHEN x.repair = 'rejected' THEN 'geometry_unrepairable'
            WHEN x.repair = 'empty' THEN 'geometry_empty_after_repair'
            WHEN x.not_polygonal THEN 'geometry_not_polygonal'
            WHEN NOT x.inside THEN 'outside_brazil'
            WHEN x.rn > 1 THEN 'duplicate_key'
            ELSE 'ok' END AS verdict
FROM (
  SELECT s.src_seq, c.no_key, c.no_geom, c.repair, c.not_polygonal, c.inside,
         row_number() OVER (PARTITION BY c.id_embargo, c.usable ORDER BY s.src_seq DESC) AS rn,
         etl.ibama_documento_completado(s.documento) AS documento_completado,
         -- written but with no digit ('n/d'): no document, counted outro; blank or marks only: ausente (sql/0132)
         etl.ibama_documento_escrito(s.documento) AS documento_escrito,
{{columns}}
  FROM {{stage}} s
  LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
  CROSS JOIN LATERAL (
    SELECT etl.code_text(s.numero_embargo) AS numero,
           nullif(btrim(s.serie_embargo), '') AS serie,
           etl.ibama_documento(s.documento) AS doc,
           f.status AS repair, s.geom IS NULL AS no_geom,
           CASE WHEN s.geom IS NOT NULL AND coalesce(f.status, 'repaired') = 'repaired' THEN
             ST_Multi(ST_CollectionExtract(ST_Force2D(ST_Transform(coalesce(f.geom, ST_SetSRID(s.geom, s.src_srid)), 4326)), 3))
           END AS g
    OFFSET 0
  ) k
  CROSS JOIN LATERAL (
    SELECT k.*, k.numero IS NULL OR etl.is_overflow(s.numero_embargo) AS no_key,
           k.numero || coalesce('/' || k.serie, '') AS id_embargo,
           coalesce(ST_IsEmpty(k.g), false) AS not_polygonal,
           coalesce(etl.in_brazil(k.g), false) AS inside
    OFFSET 0
  ) b
  CROSS JOIN LATERAL (
    SELECT b.*, NOT b.no_key AND b.g IS NOT NULL AND NOT b.not_polygonal AND b.inside AS usable
    OFFSET 0
  ) c
) x
