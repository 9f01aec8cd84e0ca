-- Each staged IBAMA term typed once (pipelines/ibama-embargos/queries.ts): its key, statuses,
-- document, point and polygon, the declared columns of ibama_embargos (the columns placeholder:
-- the declaration's typed select list and check flags, reading the staged row `s` and the values
-- `c` computed here), the flags the facts count, and its verdict. The build reads this table
-- alone; the facts count from it (queries/ibama_facts.sql).
--
-- Verdict, in priority order: no key (no NUM_TAD), a superseded duplicate (among keyed rows of
-- an id_tad the most recently changed version wins, then the one read last), kept ('ok': with
-- its polygon, repaired and in EPSG:4326 inside Brazil, else with its point), else why not.
-- geom_problema says why a polygon the source had was not used (the term may still load with
-- its point); pt_outside marks a point outside the Brazil envelope. The HMAC key comes from
-- the session setting agro.hmac_key, set by the loader for this statement only. Situation and
-- activity follow contract §3 (sql/0018): issued = 'Lavrado' in either status column or
-- 'Impresso' in DES_STATUS_FORMULARIO_AIE; a status not known to be inactive is active, and
-- listed (status_desconhecido); so is a cancel or lift flag that is neither yes nor no
-- (flag_desconhecido, its text kept in `extra`). OFFSET 0 keeps each lateral evaluated once per row.
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT x.*,
       CASE WHEN x.no_key THEN 'no_key'
            WHEN x.rn > 1 THEN 'duplicate_key'
            WHEN x.poly_in OR x.pt_in THEN 'ok'
            WHEN x.geom_state IN ('bad_wkt', 'not_polygonal') THEN 'bad_wkt'
            WHEN x.repair IN ('rejected', 'empty') THEN 'geometry_unrepairable'
            WHEN NOT x.poly_in OR NOT x.pt_in THEN 'outside_brazil'
            ELSE 'no_geometry' END AS verdict
FROM (
  SELECT s.src_seq, c.no_key, c.poly_in, c.pt_in, c.pt_outside, c.repair, c.geom_state,
         row_number() OVER (PARTITION BY c.no_key, c.id_tad ORDER BY c.changed DESC NULLS LAST, s.src_seq DESC) AS rn,
         nullif(btrim(s.ultima_atualizacao), '') AS release_stamp,
         CASE WHEN NOT c.cancelado AND NOT c.desembargado AND NOT etl.ibama_status_conhecido(c.status_tad, s.x_des_status_formulario_aie)
              THEN coalesce(nullif(btrim(s.status_formulario), ''), '∅') || ' / ' || coalesce(c.status_aie, '∅') END AS status_desconhecido,
         -- A cancel/lift flag that is neither yes nor no: read as no (the term stays active), listed.
         nullif(concat_ws(', ', CASE WHEN NOT etl.ibama_flag_known(s.cancelado) THEN 'SIT_CANCELADO "' || btrim(s.cancelado) || '"' END,
                                CASE WHEN NOT etl.ibama_flag_known(s.desembargado) THEN 'SIT_DESEMBARGO "' || btrim(s.desembargado) || '"' END), '') AS flag_desconhecido,
         etl.ibama_documento_completado(s.documento) AS documento_completado,
         -- written but with no digit ('n/d'): no document, counted outro; blank or marks only: ausente (sql/0132)
         etl.ibama_documento_escrito(s.documento) AS documento_escrito,
         concat_ws(' ', s.nome_embargado, s.municipio, s.nome_imovel, s.descricao, s.localizacao) LIKE '%' || chr(65533) || '%' AS replacement_char,
{{columns}}
  FROM {{stage}} s
  LEFT JOIN {{geoms}} g ON g.src_seq = s.src_seq
  LEFT JOIN {{fix}} f ON f.src_seq = s.src_seq
  CROSS JOIN LATERAL (
    SELECT nullif(btrim(s.numero_tad), '') IS NULL AS no_key,
           etl.ibama_id_tad(s.seq_tad, s.numero_tad, s.serie_tad) AS id_tad,
           etl.ibama_timestamp(s.data_alteracao) AS changed,
           etl.ibama_status(coalesce(nullif(btrim(s.status_formulario), ''), nullif(btrim(s.x_des_status_formulario_aie), ''))) AS status,
           etl.ibama_status(s.status_formulario) AS status_tad,
           nullif(btrim(s.x_des_status_formulario_aie), '') AS status_aie,
           etl.ibama_flag(s.cancelado) AS cancelado,
           etl.ibama_flag(s.desembargado) AS desembargado,
           etl.ibama_documento(s.documento) AS doc,
           g.state AS geom_state, f.status AS repair,
           CASE WHEN g.geom IS NULL THEN NULL
                WHEN f.src_seq IS NULL THEN ST_Multi(ST_Transform(ST_SetSRID(g.geom, g.src_srid), 4326))
                WHEN f.status = 'repaired' THEN ST_Multi(ST_Transform(f.geom, 4326)) END AS g4326,
           -- The point columns hold degrees: in the layer's CRS when it is geographic, else SIRGAS 2000.
           etl.ibama_point(s.longitude, s.latitude, s.longitude_dms, s.latitude_dms,
                           coalesce((SELECT CASE WHEN r.proj4text LIKE '%+proj=longlat%' THEN r.srid ELSE 4674 END
                                       FROM spatial_ref_sys r WHERE r.srid = g.src_srid), 4326)) AS p0
    OFFSET 0
  ) k
  CROSS JOIN LATERAL (
    SELECT k.*, etl.ibama_situacao(k.status_tad, k.status_aie, k.cancelado, k.desembargado) AS situacao,
           etl.in_brazil(k.g4326) AS poly_in, etl.in_brazil(k.p0) AS pt_in
    OFFSET 0
  ) b
  CROSS JOIN LATERAL (
    SELECT b.*,
           CASE WHEN b.poly_in THEN b.g4326 END AS poly,
           CASE WHEN b.pt_in THEN b.p0 END AS pt,
           coalesce(NOT b.pt_in, false) AS pt_outside,
           CASE WHEN b.geom_state IN ('bad_wkt', 'not_polygonal') THEN b.geom_state
                WHEN b.repair = 'rejected' THEN 'repair_failed'
                WHEN b.repair = 'empty' THEN 'empty_after_repair'
                WHEN NOT b.poly_in THEN 'polygon_outside_brazil' END AS poly_problem
    OFFSET 0
  ) c
) x
