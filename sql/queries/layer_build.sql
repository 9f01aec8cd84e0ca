-- The snapshot table of a national polygon layer (pipelines/_polygon-layer.ts): one row per
-- kept feature, typed, in EPSG:4326, with exactly the columns of snap.<relation>__template
-- (checked before publishing): codigo, the layer's own typed columns, geom, extra and
-- snapshot_id. The layer declares its part in sql/queries/<p>_build.sql, in sections:
--   @columns   the typed select list between codigo and geom, over c ({{classified}}: codigo,
--              geom) and s ({{stage}}: the staged text)
--   @unparsed  jsonb_build_object arguments: the source text of values that did not parse
--              (loaded as NULL), kept in `extra` under the canonical name beside the source
--              columns without a mapping
--   @joins     lateral joins the select list reads from (optional)
CREATE TABLE {{target}} AS
SELECT c.codigo::text AS codigo,
{{columns}},
       c.geom::geometry(MultiPolygon, 4326) AS geom,
       nullif(coalesce(s.extra, '{}'::jsonb) || jsonb_strip_nulls(jsonb_build_object(
{{unparsed}}
       )), '{}'::jsonb) AS extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{classified}} c
JOIN {{stage}} s ON s.src_seq = c.src_seq
{{joins}}
WHERE c.verdict = 'ok'
