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
