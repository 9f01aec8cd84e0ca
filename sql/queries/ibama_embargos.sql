-- The ibama_embargos snapshot: typed terms with their geometry in EPSG:4326. Column order
-- and types match snap.ibama_embargos__template (checked before publishing). The HMAC key
-- comes from the session setting agro.hmac_key, set by the loader for this statement only.
-- documento_tipo is the shared check-digit rule (etl.documento_tipo, sql/0013 and
-- src/documents.ts): 'cpf' / 'cnpj' for a valid document, NULL otherwise.
-- situacao / ativo follow contract §3 (sql/0018): issued = 'Lavrado' in either status column
-- or 'Impresso' in DES_STATUS_FORMULARIO_AIE; a status not known to be inactive is active.
-- Dates after the release date ({{release_date}}, the snapshot's as_of) and dates that do
-- not parse are NULL, their source text kept in `extra` under the column's name (so is an
-- embargoed area that is not a number; a run of asterisks is no value and is not kept).
CREATE TABLE {{target}} AS
SELECT c.id_tad::text AS id_tad,
       btrim(s.numero_tad)::text AS numero_tad,
       nullif(btrim(s.serie_tad), '')::text AS serie_tad,
       etl.ibama_seq(s.seq_tad) AS seq_tad,
       etl.date_not_after(dt.embargo, {{release_date}}) AS data_embargo,
       st.situacao,
       coalesce(st.situacao = 'ativo', false) AS ativo,
       st.status AS status_formulario,
       st.cancelado,
       st.desembargado,
       etl.date_not_after(dt.desembargo, {{release_date}}) AS data_desembargo,
       nullif(btrim(s.tipo_desembargo), '')::text AS tipo_desembargo,
       nullif(btrim(s.descricao_desembargo), '')::text AS descricao_desembargo,
       d.doc AS documento,
       etl.documento_tipo(d.doc) AS documento_tipo,
       etl.ibama_hmac(d.doc, current_setting('agro.hmac_key')) AS documento_hmac,
       nullif(btrim(s.nome_embargado), '')::text AS nome_embargado,
       nullif(btrim(s.cod_municipio), '')::text AS cod_municipio_ibge,
       nullif(btrim(s.municipio), '')::text AS municipio,
       nullif(upper(btrim(s.uf)), '')::text AS uf,
       etl.parse_number(s.area_embargada) AS area_embargada_ha,
       CASE WHEN c.verdict = 'poligono' THEN etl.area_ha(c.poly) END AS area_calculada_ha,
       nullif(btrim(s.nome_imovel), '')::text AS nome_imovel,
       nullif(btrim(s.tipo_area), '')::text AS tipo_area,
       nullif(btrim(s.descricao), '')::text AS descricao,
       nullif(btrim(s.localizacao), '')::text AS localizacao,
       nullif(btrim(s.numero_processo), '')::text AS numero_processo,
       nullif(btrim(s.numero_auto_infracao), '')::text AS numero_auto_infracao,
       nullif(btrim(s.deter_prodes), '')::text AS deter_prodes,
       nullif(btrim(s.id_poligono), '')::text AS id_poligono,
       nullif(btrim(s.embarga_poligono), '')::text AS embarga_poligono,
       CASE WHEN dt.alteracao::date <= {{release_date}} THEN dt.alteracao END AS data_alteracao,
       (CASE WHEN c.verdict = 'poligono' THEN 'poligono' ELSE 'ponto' END)::text AS geom_origem,
       c.poly_problem::text AS geom_problema,
       (CASE WHEN c.verdict = 'poligono' THEN c.poly ELSE c.pt END)::geometry(Geometry, 4326) AS geom,
       c.pt::geometry(Point, 4326) AS geom_ponto,
       nullif(jsonb_strip_nulls({{extra}}) || coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
         'data_embargo', etl.date_unkept_text(s.data_embargo, {{release_date}}),
         'data_desembargo', etl.date_unkept_text(s.data_desembargo, {{release_date}}),
         'data_alteracao', etl.date_unkept_text(s.data_alteracao, {{release_date}}),
         'area_embargada_ha', CASE WHEN btrim(s.area_embargada) <> '' AND etl.parse_number(s.area_embargada) IS NULL
                                    AND NOT etl.is_overflow(s.area_embargada) THEN s.area_embargada END)), '{}'::jsonb) AS extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
CROSS JOIN LATERAL (
  SELECT etl.ibama_status(coalesce(nullif(btrim(s.status_formulario), ''), nullif(btrim(s.x_des_status_formulario_aie), ''))) AS status,
         etl.ibama_status(s.status_formulario) AS status_tad,
         nullif(btrim(s.x_des_status_formulario_aie), '') AS status_aie,
         etl.ibama_flag(s.cancelado) AS cancelado,
         etl.ibama_flag(s.desembargado) AS desembargado
) st0
CROSS JOIN LATERAL (SELECT st0.*, etl.ibama_situacao(st0.status_tad, st0.status_aie, st0.cancelado, st0.desembargado) AS situacao) st
CROSS JOIN LATERAL (
  SELECT etl.parse_date(s.data_embargo) AS embargo, etl.parse_date(s.data_desembargo) AS desembargo,
         etl.ibama_timestamp(s.data_alteracao) AS alteracao
) dt
CROSS JOIN LATERAL (SELECT etl.ibama_documento(s.documento) AS doc) d
WHERE c.verdict IN ('poligono', 'ponto')
