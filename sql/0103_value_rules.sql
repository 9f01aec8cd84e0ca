-- Value rules left open by earlier audits: lists of states, planned roads.

-- FUNAI's uf_sigla lists more than one state as 'MT,PA' (SOURCES §4), but hand-edited lands
-- also write 'MT/PA', 'MT e PA', 'MT;PA': etl.text_list split on commas only, so each of
-- those was one item ('MT/PA'), matching no state filter (ufs @> '{PA}') and counted as an
-- unknown sigla. A list of states splits on every separator a person types between two of
-- them: ',', ';', '/', '|', '&' and the word 'e' (any case, spaces around it; the 'E' of
-- 'PE' or 'SE' is no separator). Items are upper-cased and trimmed of spaces of any kind
-- (etl.trim_spaces), empty ones dropped; an item that is no sigla is kept as written and
-- counted by the pipeline (funai_unknown_ufs.sql), never dropped. Ethnic groups and
-- municipality lists keep etl.text_list: 'e' and '/' may be part of a name.
CREATE FUNCTION etl.uf_list(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(array(SELECT y FROM regexp_split_to_table(upper(t), '[,;/|&]|[[:space:]\u00a0\u202f\u3000]+E[[:space:]\u00a0\u202f\u3000]+') WITH ORDINALITY AS u(x, n)
                      CROSS JOIN LATERAL (SELECT etl.trim_spaces(x) AS y) c
                      WHERE y <> '' ORDER BY n), '{}'::text[])
$$;

-- DNIT SNV: a planned road (SOURCES §8.4 ds_superfi, the SNV's surface/situation code: 'PLA',
-- 'Planejada'; its map legend says the same) is drawn where no road exists yet. It counted in
-- the distance to the nearest federal road, which a bank reads as how far the farm is from a
-- road it can use: a property on a planned line measured 0 km. Planned segments stay in the
-- published layer (serving.dnit_snv) and are left out of the distance: the derived
-- car_rodovias (the dnit-snv overlay's filter) and the API's nearest road
-- (serving.dnit_snv_principal). The spelling is UNVERIFIED per version, so the code and the
-- word in any case or accent count, in the surface or, when that is empty, in the legend.
-- A road snapshot whose pieces (dnit_snv_sub) were cut before this migration keeps them
-- until the next SNV version publishes.
CREATE FUNCTION etl.snv_planejada(superficie text, legenda text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(CASE WHEN nullif(etl.trim_spaces(superficie), '') IS NOT NULL
                       THEN upper(etl.trim_spaces(superficie)) = 'PLA' OR etl.normalize_nome(superficie) ~ '^(RODOVIA )?PLANEJAD'
                       ELSE etl.normalize_nome(legenda) ~ '^(RODOVIA )?PLANEJAD' END, false)
$$;

CREATE OR REPLACE VIEW serving.dnit_snv_principal AS
SELECT * FROM serving.dnit_snv WHERE tipo_trecho = 'B' AND NOT etl.snv_planejada(superficie, legenda);
