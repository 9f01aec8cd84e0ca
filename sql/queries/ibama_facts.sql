-- What the quality report says of one IBAMA load, counted from the typed terms
-- (queries/ibama_typed.sql) in one statement: geometry routes and problems, activity,
-- documents, NUM_TAD shared by loaded terms, the release stamps, statuses counted as active
-- without being known (contract §3), cancel/lift flags that are neither yes nor no, rows with U+FFFD. Problems are counted among keyed,
-- non-superseded terms (loaded or rejected for their geometry).
WITH t AS MATERIALIZED (
  SELECT verdict, geom_origem, geom_problema, pt_outside, ativo, documento, documento_tipo, documento_escrito, numero_tad,
         release_stamp, status_desconhecido, flag_desconhecido, replacement_char, documento_completado,
         verdict NOT IN ('no_key', 'duplicate_key') AS candidate
  FROM {{classified}}
), kept AS MATERIALIZED (SELECT * FROM t WHERE verdict = 'ok'),
-- Unknown statuses and flags, ranked: the {{named}} most frequent are named, the rest counted
-- (a broken file can make every term's value different); ties in byte order, as SICAR's lists.
su AS (SELECT status_desconhecido AS s, count(*)::int AS n, row_number() OVER (ORDER BY count(*) DESC, status_desconhecido COLLATE "C") AS rn
         FROM kept WHERE status_desconhecido IS NOT NULL GROUP BY 1),
fu AS (SELECT flag_desconhecido AS s, count(*)::int AS n, row_number() OVER (ORDER BY count(*) DESC, flag_desconhecido COLLATE "C") AS rn
         FROM kept WHERE flag_desconhecido IS NOT NULL GROUP BY 1)
SELECT (SELECT count(*) FROM kept WHERE geom_origem = 'poligono')::int AS poligono,
       (SELECT count(*) FROM kept WHERE geom_origem = 'ponto')::int AS ponto,
       (SELECT count(*) FROM kept WHERE geom_origem = 'ponto' AND geom_problema IS NOT NULL)::int AS ponto_em_vez_de_poligono,
       (SELECT count(*) FROM t WHERE candidate AND geom_problema IN ('bad_wkt', 'not_polygonal', 'repair_failed', 'empty_after_repair'))::int AS polygons_unusable,
       (SELECT count(*) FROM t WHERE candidate AND geom_problema = 'polygon_outside_brazil')::int AS polygons_outside,
       (SELECT count(*) FROM t WHERE candidate AND pt_outside)::int AS points_outside,
       (SELECT coalesce(jsonb_object_agg(p, n), '{}'::jsonb) FROM (
          SELECT geom_problema AS p, count(*)::int AS n FROM t WHERE candidate AND geom_problema IS NOT NULL GROUP BY 1 ORDER BY 1) x) AS problemas_poligono,
       (SELECT count(*) FROM kept WHERE ativo)::int AS ativos,
       (SELECT count(*) FROM kept WHERE documento_tipo = 'cpf')::int AS cpf,
       (SELECT count(*) FROM kept WHERE documento_tipo = 'cnpj')::int AS cnpj,
       (SELECT count(*) FROM kept WHERE CASE WHEN documento IS NULL THEN documento_escrito ELSE documento_tipo IS NULL AND strpos(documento, '*') = 0 END)::int AS outro,
       (SELECT count(*) FROM kept WHERE strpos(documento, '*') > 0)::int AS mascarado,
       (SELECT count(*) FROM kept WHERE documento_completado)::int AS zeros_completados,
       (SELECT count(*) FROM kept WHERE documento IS NULL AND NOT documento_escrito)::int AS ausente,
       (SELECT count(*) FROM (SELECT 1 FROM kept GROUP BY numero_tad HAVING count(*) > 1) x)::int AS grupos,
       (SELECT coalesce(sum(n), 0) FROM (SELECT count(*) AS n FROM kept GROUP BY numero_tad HAVING count(*) > 1) x)::int AS repetidos,
       (SELECT count(DISTINCT btrim(release_stamp)) FROM t WHERE release_stamp IS NOT NULL)::int AS stamps,
       (SELECT min(btrim(release_stamp)) FROM t WHERE release_stamp IS NOT NULL) AS stamp_min,
       (SELECT max(btrim(release_stamp)) FROM t WHERE release_stamp IS NOT NULL) AS stamp_max,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(s, n) ORDER BY rn), '[]'::jsonb) FROM su WHERE rn <= {{named}}) AS status_desconhecido,
       (SELECT jsonb_build_object('codigos', count(*), 'termos', coalesce(sum(n), 0)) FROM su WHERE rn > {{named}}) AS status_nao_listados,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(s, n) ORDER BY rn), '[]'::jsonb) FROM fu WHERE rn <= {{named}}) AS flag_desconhecido,
       (SELECT jsonb_build_object('codigos', count(*), 'termos', coalesce(sum(n), 0)) FROM fu WHERE rn > {{named}}) AS flag_nao_listados,
       (SELECT count(*) FROM t WHERE replacement_char)::int AS replacement_chars
