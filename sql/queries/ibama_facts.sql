-- Counts for the quality report of one load, from the classified staging rows.
SELECT count(*) FILTER (WHERE verdict = 'no_key')::int AS no_key,
       count(*) FILTER (WHERE verdict = 'duplicate_key')::int AS duplicate_key,
       count(*) FILTER (WHERE verdict = 'poligono')::int AS poligono,
       count(*) FILTER (WHERE verdict = 'ponto')::int AS ponto,
       count(*) FILTER (WHERE verdict = 'bad_wkt')::int AS bad_wkt,
       count(*) FILTER (WHERE verdict = 'geometry_unrepairable')::int AS geometry_unrepairable,
       count(*) FILTER (WHERE verdict = 'outside_brazil')::int AS outside_brazil,
       count(*) FILTER (WHERE verdict = 'no_geometry')::int AS no_geometry,
       count(*) FILTER (WHERE verdict = 'ponto' AND poly_problem IS NOT NULL)::int AS ponto_em_vez_de_poligono,
       count(*) FILTER (WHERE verdict NOT IN ('no_key', 'duplicate_key') AND poly_problem IN ('bad_wkt', 'not_polygonal', 'repair_failed', 'empty_after_repair'))::int AS polygons_unusable,
       count(*) FILTER (WHERE verdict NOT IN ('no_key', 'duplicate_key') AND poly_problem = 'polygon_outside_brazil')::int AS polygons_outside,
       count(*) FILTER (WHERE verdict NOT IN ('no_key', 'duplicate_key') AND pt_outside)::int AS points_outside
FROM {{classified}}
