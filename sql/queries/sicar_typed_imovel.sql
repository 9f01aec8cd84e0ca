-- The typed pass of AREA_IMOVEL: each staged row typed once into car_imovel's columns, with
-- its verdict (why it is kept or not, in priority order) and what the facts count. The build
-- (CAR_IMOVEL's declaration) and the facts read only this table: no join back to the staged
-- rows, no second scan of them. Repairs are in the staged row itself (repair.ts repairInPlace);
-- the verdict is etl.sicar_verdict (migration 0030), shared with the themes. Dates after the
-- release date (as_of, contract §3), dates or numbers that do not parse and status or type
-- codes that are none of SOURCES §2.5's are NULL, their source text kept in `extra` under the
-- column's name, as is a negative area or fiscal module; a run of asterisks is no value.
-- The CAR number is upper-cased and trimmed of spaces of any kind (etl.trim_spaces: a no-break
-- space typed after it is no part of it); a space inside it still makes it a bad number.
-- Each lateral ends in `clock_timestamp() AS once` (see sicar_typed_tema.sql): its values are
-- computed once a row, not copied into every place they are used (each date was parsed four
-- times a row). The statement is serial; the caller runs the inputs on two connections.
-- area_calculada_ha is computed here (on the two connections), not in car_imovel's build.
-- etl.date_unkept_text(t, as_of) is written out as CASE WHEN kind = 'bad' OR date > as_of
-- THEN t END, from the date and its kind computed once.
CREATE UNLOGGED TABLE {{typed}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_seq, w.verdict, s.repair, k.car, {{uf}}::text AS uf, substr(k.car, 4, 7)::text AS cod_municipio_ibge,
       nullif(btrim(s.municipio), '')::text AS municipio,
       k.situacao, k.tipo,
       nullif(btrim(s.des_condic), '')::text AS condicao,
       CASE WHEN k.mf >= 0 THEN k.mf END AS modulos_fiscais,
       CASE WHEN k.area >= 0 THEN k.area END AS area_total_ha,
       etl.date_not_after(k.criaca, {{as_of}}) AS data_inscricao,
       etl.date_not_after(k.atuali, {{as_of}}) AS data_atualizacao,
       -- Ranks the copies of a CAR number (winningProperties): an implausible date is no date here either.
       etl.date_not_after(k.atuali, {{as_of}}) AS updated,
       g.geom, etl.area_ha(g.geom) AS area_calculada_ha,
       CASE WHEN coalesce(u.di, u.da, u.at, u.mf, u.st, u.tp) IS NULL THEN s.extra
            ELSE coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
              'data_inscricao', u.di, 'data_atualizacao', u.da, 'area_total_ha', u.at, 'modulos_fiscais', u.mf,
              'situacao', u.st, 'tipo', u.tp)) END AS extra,
       -- Counted by the facts, over every staged row.
       CASE WHEN k.criaca > {{as_of}} THEN 'implausible' ELSE k.criaca_kind END AS dat_criaca_kind,
       CASE WHEN k.atuali > {{as_of}} THEN 'implausible' ELSE k.atuali_kind END AS dat_atuali_kind,
       u.at IS NOT NULL AS num_area_unparsed, u.mf IS NOT NULL AS mod_fiscal_unparsed,
       etl.is_overflow(s.num_area) AS num_area_overflow, etl.is_overflow(s.mod_fiscal) AS mod_fiscal_overflow,
       CASE WHEN k.situacao IS NULL AND s.ind_status IS NOT NULL THEN s.ind_status END AS unknown_status,
       CASE WHEN k.tipo IS NULL AND s.ind_tipo IS NOT NULL THEN s.ind_tipo END AS unknown_tipo
FROM {{stage}} s
CROSS JOIN LATERAL (
  SELECT upper(etl.trim_spaces(s.car)) AS car, etl.parse_date(s.dat_criaca) AS criaca, etl.parse_date(s.dat_atuali) AS atuali,
         etl.date_kind(s.dat_criaca) AS criaca_kind, etl.date_kind(s.dat_atuali) AS atuali_kind,
         etl.parse_number(s.num_area) AS area, etl.parse_number(s.mod_fiscal) AS mf,
         etl.car_situacao(s.ind_status) AS situacao, etl.car_tipo(s.ind_tipo) AS tipo, clock_timestamp() AS once
) k
CROSS JOIN LATERAL (
  SELECT CASE WHEN k.criaca_kind = 'bad' OR k.criaca > {{as_of}} THEN s.dat_criaca END AS di,
         CASE WHEN k.atuali_kind = 'bad' OR k.atuali > {{as_of}} THEN s.dat_atuali END AS da,
         -- a negative area or fiscal module is no value either (the 'area' conversion's rule)
         CASE WHEN btrim(s.num_area) <> '' AND coalesce(k.area < 0, NOT etl.is_overflow(s.num_area)) THEN s.num_area END AS at,
         CASE WHEN btrim(s.mod_fiscal) <> '' AND coalesce(k.mf < 0, NOT etl.is_overflow(s.mod_fiscal)) THEN s.mod_fiscal END AS mf,
         -- A status or type code that is none of §2.5's: NULL in its column, its text kept here.
         CASE WHEN k.situacao IS NULL AND btrim(s.ind_status) <> '' THEN s.ind_status END AS st,
         CASE WHEN k.tipo IS NULL AND btrim(s.ind_tipo) <> '' THEN s.ind_tipo END AS tp,
         clock_timestamp() AS once
) u
CROSS JOIN LATERAL (SELECT etl.sicar_verdict(k.car, {{uf}}, s.geom, s.src_srid, s.repair) AS verdict, clock_timestamp() AS once) w
CROSS JOIN LATERAL (SELECT CASE WHEN w.verdict = 'ok' THEN etl.sicar_geom(s.geom, s.src_srid) END AS geom, clock_timestamp() AS once) g
