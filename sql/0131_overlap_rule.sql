-- One overlap rule for both paths (contract §3): two polygons sharing less than 1 m² share a
-- border, not an area. The derive stage (sql/queries/overlap_area_pair.sql) and the on-the-fly
-- requests (POST /enriquecimento/territorial, POST /car/by-geometry) each wrote `>= 0.0001`;
-- they now call this (inlined: no cost).
CREATE OR REPLACE FUNCTION serving.shares_area(ha double precision) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ha >= 0.0001 $$;

-- An embargo number's `ativo` counted every term of it that touched the property, one sharing
-- only its border (or under 1 m²) too: an active term beside the land and a lifted twin over it
-- made embargo_ibama true. It now counts only the terms that overlap (overlap_area_pair.sql).
-- The pairs derived before keep their rows: forgetting them would recompute only the current
-- ones, and leave `as_of` reads of older pairs without their fields and the next publish's
-- change events without the pair they compare with. The rule applies from the next IBAMA or
-- CAR snapshot's derive (IBAMA publishes most nights).

-- The same hectares on both paths: the request's area (serving.area_ha) is the loaders'
-- (etl.area_ha, EPSG:10857) by definition now, not a copy of its body.
CREATE OR REPLACE FUNCTION serving.area_ha(g geometry) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT etl.area_ha(g) $$;

-- The same roads on both paths: a main alignment that exists (tipo_trecho 'B', not planned,
-- migration 0103), once, for the dnit-snv overlay's filter (the derived car_rodovias) and the
-- API's nearest road (serving.dnit_snv_principal). The same rule as before: no pair is forgotten.
CREATE OR REPLACE FUNCTION etl.snv_principal(tipo_trecho text, superficie text, legenda text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT tipo_trecho = 'B' AND NOT etl.snv_planejada(superficie, legenda) $$;

CREATE OR REPLACE VIEW serving.dnit_snv_principal AS
SELECT * FROM serving.dnit_snv WHERE etl.snv_principal(tipo_trecho, superficie, legenda);
