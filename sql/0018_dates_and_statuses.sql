-- Implausible dates and IBAMA's statuses (issue 6, A.5; contract §3).
--
-- Dates after the source's release date are implausible: published as NULL, the source text
-- kept in `extra`, counted in the report (facts.dates.implausible). The release date is the
-- snapshot's as_of (the publisher's own date when the files carry one).
--
-- An IBAMA term is issued when DES_STATUS_FORMULARIO or DES_STATUS_FORMULARIO_AIE says
-- 'Lavrado', or DES_STATUS_FORMULARIO_AIE says 'Impresso' (terms of the electronic AIe
-- system carry an empty DES_STATUS_FORMULARIO and 'Impresso'). Active = issued, not
-- cancelled, not lifted. A status not known to be inactive (cancelled, excluded,
-- substituted, annulled) also counts as active, and the loader lists it in the report:
-- a missed embargo costs a lender more than a false alarm.

-- A date when it is not after the release date; NULL otherwise (and for NULL).
CREATE FUNCTION etl.date_not_after(d date, release date) RETURNS date
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN d <= release THEN d END
$$;

-- The source text of a date that is after the release date or does not parse (kept in
-- `extra`); NULL for a good date, an empty cell or a placeholder.
CREATE FUNCTION etl.date_unkept_text(t text, release date) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN etl.date_kind(t) = 'bad' OR etl.parse_date(t) > release THEN t END
$$;

-- A form status IBAMA uses for a term that is not (or no longer) an embargo.
CREATE FUNCTION etl.ibama_status_inativo(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(lower(translate(btrim(t), 'ÍÉÁÓÚÃÕÇíéáóúãõç', 'IEAOUAOCieaouaoc')) ~ '^(cancelad|exclui|substitui|anulad)', false)
$$;

-- Issued: 'Lavrado' in either status column, or 'Impresso' in the electronic one.
CREATE FUNCTION etl.ibama_emitido(status text, status_aie text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(lower(btrim(status)) = 'lavrado', false) OR coalesce(lower(btrim(status_aie)) IN ('lavrado', 'impresso'), false)
$$;

-- Whether the statuses say anything the rule knows (issued or known inactive); a term whose
-- statuses say neither is active by default and listed in the report.
CREATE FUNCTION etl.ibama_status_conhecido(status text, status_aie text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT etl.ibama_emitido(status, status_aie) OR etl.ibama_status_inativo(status) OR etl.ibama_status_inativo(status_aie)
$$;

-- situacao of a term: 'cancelado', 'desembargado', 'ativo' (issued, or a status not known to
-- be inactive), or the inactive status lower-cased ('substituído por outro', 'excluído', …).
-- `status` is DES_STATUS_FORMULARIO as etl.ibama_status reads it (the shapefile's 'AL' is 'Lavrado').
CREATE FUNCTION etl.ibama_situacao(status text, status_aie text, cancelado boolean, desembargado boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN cancelado THEN 'cancelado'
    WHEN desembargado THEN 'desembargado'
    WHEN etl.ibama_emitido(status, status_aie) THEN 'ativo'
    WHEN etl.ibama_status_inativo(status) THEN lower(btrim(status))
    WHEN etl.ibama_status_inativo(status_aie) THEN lower(btrim(status_aie))
    ELSE 'ativo' END
$$;

-- SEQ_TAD as text; some exports glue a '.0' to it; a run of asterisks (an overflowed numeric
-- field) is no value, so the term falls back to its NUM_TAD key. (Replaces the 0008 version.)
CREATE OR REPLACE FUNCTION etl.ibama_seq(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN NOT etl.is_overflow(t) THEN nullif(regexp_replace(btrim(coalesce(t, '')), '[.,]0+$', ''), '') END
$$;
