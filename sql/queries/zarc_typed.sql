-- The ZARC classify: every staged row (all season files, staged into one table in name
-- order, src_file saying which) typed once, with its verdict and canonical values, into an
-- unlogged table that the build and the facts read (the build copies the declared columns of
-- the kept rows: ShapeSpec.typed). The search name is computed once per distinct crop name.
-- chave sorts in byte order (COLLATE "C"): a locale collation makes the 3.3 M-row
-- deduplication sort and the key index several times slower. {{file_safra}} is the season
-- in the name of the row's file, used only when the header has neither SafraIni nor SafraFin
-- (staged NULL = column absent, '' = empty cell).
-- Codes are text (etl.zarc_code: digits of any length). An optional code that is not digits
-- and a risk cell that is not a risk value load as NULL, and their source text goes into
-- `extra` under the column's name (`unparsed`, counted in the report); a run of asterisks is
-- no value at all (not kept; the engine counts it as overflowed).
CREATE UNLOGGED TABLE {{classified}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT s.src_file::integer AS file_no, s.src_seq,
       CASE WHEN NOT etl.zarc_geocodigo_ok(k.geocodigo) THEN 'bad_geocodigo'
            WHEN k.cultura IS NULL THEN 'missing_cultura'
            WHEN k.ciclo IS NULL THEN 'bad_ciclo'
            WHEN k.solo IS NULL THEN 'bad_solo'
            WHEN z.safra IS NULL THEN 'bad_safra'
            ELSE 'ok' END AS verdict,
       k.geocodigo, z.safra, k.cultura, b.cultura_busca, k.cod_cultura, k.ciclo, k.solo, k.manejo,
       nullif(btrim(s.nome_manejo), '') AS nome_manejo, k.cod_clima, nullif(btrim(s.clima), '') AS clima, k.portaria,
       nullif(btrim(s.uf), '') AS uf, nullif(btrim(s.municipio), '') AS municipio,
       nullif(btrim(s.cod_municipio_bacen), '') AS cod_municipio_bacen,
       {{decs}},
       CASE WHEN z.safra <> 'perene' THEN left(z.safra, 4)::smallint END AS safra_ini,
       CASE WHEN z.safra <> 'perene' THEN right(z.safra, 4)::smallint END AS safra_fim,
       nullif(btrim(s.produtividade), '') AS produtividade, nullif(btrim(s.cod_nm), '') AS cod_nm,
       k.cod_meso, k.cod_micro,
       (k.cultura || '|' || k.ciclo || '|' || k.solo || '|' || k.geocodigo || '|' || coalesce(k.manejo, '') || '|'
         || coalesce(k.cod_clima, '') || '|' || z.safra || '|' || coalesce(k.portaria, '')) COLLATE "C" AS chave,
       CASE WHEN u.unparsed IS NULL THEN s.extra ELSE coalesce(s.extra, '{}'::jsonb) || u.unparsed END AS extra,
       {{snapshot_id}}::bigint AS snapshot_id,
       iv.invalid_cells,
       u.unparsed,
       (strpos(s.cultura, U&'\FFFD') > 0 OR strpos(s.municipio, U&'\FFFD') > 0 OR strpos(s.portaria, U&'\FFFD') > 0
         OR strpos(s.nome_manejo, U&'\FFFD') > 0 OR strpos(s.clima, U&'\FFFD') > 0) AS replacement_char,
       (nullif(btrim(s.uf), '') IS NOT NULL AND etl.uf_ibge_code(btrim(s.uf)) IS DISTINCT FROM left(k.geocodigo, 2)) AS uf_mismatch
FROM {{stage}} s
CROSS JOIN LATERAL (
  SELECT btrim(s.geocodigo) AS geocodigo, nullif(btrim(s.cultura), '') AS cultura,
         etl.zarc_code(s.cod_cultura) AS cod_cultura, etl.zarc_code(s.ciclo) AS ciclo, etl.zarc_code(s.solo) AS solo,
         etl.zarc_code(s.manejo) AS manejo, etl.zarc_code(s.cod_clima) AS cod_clima,
         etl.zarc_code(s.cod_meso) AS cod_meso, etl.zarc_code(s.cod_micro) AS cod_micro,
         nullif(btrim(s.portaria), '') AS portaria,
         nullif(btrim(s.safra_ini), '') AS ini, nullif(btrim(s.safra_fim), '') AS fim
  OFFSET 0 -- evaluated once per row, not once per reference (a pulled-up subquery is inlined)
) k
CROSS JOIN LATERAL (
  SELECT CASE
    WHEN s.safra_ini IS NULL AND s.safra_fim IS NULL THEN coalesce({{file_safra}}, 'perene')
    WHEN k.ini IS NULL AND k.fim IS NULL THEN 'perene'
    WHEN length(k.ini) = 4 AND length(k.fim) = 4 AND btrim(k.ini || k.fim, '0123456789') = '' THEN k.ini || '/' || k.fim END AS safra
  OFFSET 0
) z
CROSS JOIN LATERAL (SELECT {{invalid_cells}} AS invalid_cells OFFSET 0) iv
-- Optional codes that did not type, and invalid risk cells: built only for the rare rows that have one.
CROSS JOIN LATERAL (
  SELECT CASE WHEN iv.invalid_cells > 0 OR b.any_bad THEN
           nullif(jsonb_strip_nulls(jsonb_build_object(
             'cod_cultura', CASE WHEN k.cod_cultura IS NULL AND NOT etl.is_overflow(s.cod_cultura) THEN nullif(btrim(s.cod_cultura), '') END,
             'manejo', CASE WHEN k.manejo IS NULL AND NOT etl.is_overflow(s.manejo) THEN nullif(btrim(s.manejo), '') END,
             'cod_clima', CASE WHEN k.cod_clima IS NULL AND NOT etl.is_overflow(s.cod_clima) THEN nullif(btrim(s.cod_clima), '') END,
             'cod_meso', CASE WHEN k.cod_meso IS NULL AND NOT etl.is_overflow(s.cod_meso) THEN nullif(btrim(s.cod_meso), '') END,
             'cod_micro', CASE WHEN k.cod_micro IS NULL AND NOT etl.is_overflow(s.cod_micro) THEN nullif(btrim(s.cod_micro), '') END))
             || CASE WHEN iv.invalid_cells > 0 THEN {{invalid_json}} ELSE '{}'::jsonb END, '{}'::jsonb) END AS unparsed
  FROM (SELECT (k.cod_cultura IS NULL AND btrim(s.cod_cultura) <> '') OR (k.manejo IS NULL AND btrim(s.manejo) <> '')
            OR (k.cod_clima IS NULL AND btrim(s.cod_clima) <> '') OR (k.cod_meso IS NULL AND btrim(s.cod_meso) <> '')
            OR (k.cod_micro IS NULL AND btrim(s.cod_micro) <> '') AS any_bad) b
  OFFSET 0
) u
LEFT JOIN (SELECT x.cultura, etl.zarc_busca(x.cultura) AS cultura_busca
             FROM (SELECT DISTINCT nullif(btrim(cultura), '') AS cultura FROM {{stage}}) x) b ON b.cultura = k.cultura
