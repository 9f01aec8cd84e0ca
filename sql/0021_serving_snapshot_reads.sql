-- Reads of a given kept snapshot, for the API's `as_of` answers and for cursors that pin
-- the snapshots they page through (issue 7). The API reads only `serving`: these functions
-- are the one place that turns a snapshot id into its physical table, and they only open
-- tables of readable snapshots (the catalogue lists the table and it still exists).
--
-- Readable: published (current or not), superseded, rolled_back, and loaded (a backfill
-- kept without being made current). Not: loading, blocked, failed, dropped.

CREATE VIEW serving.snapshots_legiveis AS
SELECT s.snapshot_id, s.dataset, s.uf, s.as_of, s.status,
       (c.snapshot_id IS NOT NULL) AS is_current, s.rows, s.published_at
FROM etl.snapshots s
LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
WHERE s.status IN ('published', 'superseded', 'rolled_back', 'loaded')
  AND cardinality(s.tables) > 0
  AND NOT EXISTS (SELECT 1 FROM unnest(s.tables) t WHERE to_regclass(t) IS NULL);

COMMENT ON VIEW serving.snapshots_legiveis IS
  'Snapshots whose tables are kept and readable (as_of reads, pinned cursors); is_current marks the published one.';

-- The physical table of `relation` in a readable snapshot, or NULL.
CREATE FUNCTION serving.snapshot_table(p_snapshot_id bigint, p_relation text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  t text;
BEGIN
  IF p_snapshot_id IS NULL OR p_relation IS NULL THEN RETURN NULL; END IF;
  t := format('snap.%I', p_relation || '__s' || p_snapshot_id);
  IF EXISTS (SELECT 1 FROM etl.snapshots s
              WHERE s.snapshot_id = p_snapshot_id
                AND s.status IN ('published', 'superseded', 'rolled_back', 'loaded')
                AND EXISTS (SELECT 1 FROM unnest(s.tables) x WHERE to_regclass(x) = to_regclass(t)))
     AND to_regclass(t) IS NOT NULL THEN
    RETURN t;
  END IF;
  RETURN NULL;
END
$$;

-- CAR properties of the given SICAR snapshots (one per state), the columns of
-- serving.car_imovel that a snapshot table holds itself; keyset page by car.
CREATE FUNCTION serving.car_imovel_snapshot(
  p_snapshot_ids bigint[], p_cars text[], p_after text DEFAULT NULL, p_limit int DEFAULT NULL, p_situacao text DEFAULT NULL)
RETURNS TABLE (car text, uf text, cod_municipio_ibge text, municipio text, situacao text, tipo text,
               area_total_ha double precision, area_calculada_ha double precision, app_ha double precision,
               reserva_legal_ha double precision, area_consolidada_ha double precision, data_inscricao date,
               centroid geometry, geom geometry, snapshot_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  parts text[] := '{}';
  id bigint;
  t text;
BEGIN
  FOREACH id IN ARRAY coalesce(p_snapshot_ids, '{}') LOOP
    t := serving.snapshot_table(id, 'car_imovel');
    IF t IS NOT NULL THEN
      parts := parts || format(
        'SELECT c.car, c.uf, c.cod_municipio_ibge, c.municipio, c.situacao, c.tipo, c.area_total_ha, c.area_calculada_ha,
                c.app_ha, c.reserva_legal_ha, c.area_consolidada_ha, c.data_inscricao, c.centroid::geometry, c.geom::geometry, c.snapshot_id
           FROM %s c WHERE c.car = ANY ($1) AND ($2::text IS NULL OR c.car > $2) AND ($4::text IS NULL OR c.situacao = $4)', t);
    END IF;
  END LOOP;
  IF cardinality(parts) = 0 THEN RETURN; END IF;
  RETURN QUERY EXECUTE array_to_string(parts, ' UNION ALL ') || ' ORDER BY 1 LIMIT $3'
    USING p_cars, p_after, p_limit, p_situacao;
END
$$;

-- Which (CAR snapshot, layer snapshot) pairs have their overlaps computed.
CREATE VIEW serving.overlap_pairs AS
SELECT car_snapshot_id, layer_snapshot_id, camada, rows, computed_at FROM derived.overlap_pairs;

-- Overlap rows of given CAR snapshots with one layer snapshot (any pair still kept).
CREATE FUNCTION serving.car_sobreposicoes_snapshot(p_car_snapshot_ids bigint[], p_layer_snapshot_id bigint, p_cars text[])
RETURNS TABLE (car text, camada text, feicao_id text, area_sobreposta_ha double precision, percentual double precision,
               ativo boolean, car_snapshot_id bigint, layer_snapshot_id bigint)
LANGUAGE sql STABLE AS $$
  SELECT o.car, o.camada, o.feicao_id, o.area_sobreposta_ha, o.percentual, o.ativo, o.car_snapshot_id, o.layer_snapshot_id
  FROM derived.car_overlaps o
  WHERE o.car_snapshot_id = ANY (p_car_snapshot_ids) AND o.layer_snapshot_id = p_layer_snapshot_id AND o.car = ANY (p_cars)
$$;

-- Attribute rows (as jsonb, geometry columns left out) of one relation of a readable snapshot
-- whose `p_key` column is one of `p_values`: the layer attributes behind overlaps and ZARC.
CREATE FUNCTION serving.snapshot_rows(p_snapshot_id bigint, p_relation text, p_key text, p_values text[])
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
  t text := serving.snapshot_table(p_snapshot_id, p_relation);
BEGIN
  IF t IS NULL THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT to_jsonb(x) - ''geom'' - ''geom_ponto'' - ''centroid'' - ''ponto_interior'' FROM %s x WHERE x.%I::text = ANY ($1)', t, p_key)
    USING p_values;
END
$$;

-- Owner links of a document (by its documento_hmac) as of given snapshots: the declared
-- links of a car-titulares snapshot, and the links inferred from active IBAMA embargoes
-- of an IBAMA snapshot over the given CAR snapshots (the rule of
-- derived.car_titulares_inferidos, applied to kept snapshots instead of current ones).
CREATE FUNCTION serving.car_titulares_snapshot(
  p_titulares_snapshot_id bigint, p_ibama_snapshot_id bigint, p_car_snapshot_ids bigint[], p_documento_hmac text)
RETURNS TABLE (car text, documento text, tipo_documento text, nome text, vinculo text, origem text, evidencia jsonb, snapshot_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  t text;
  e text;
  cars text[] := '{}';
  id bigint;
BEGIN
  t := serving.snapshot_table(p_titulares_snapshot_id, 'car_titulares');
  IF t IS NOT NULL THEN
    RETURN QUERY EXECUTE format(
      'SELECT x.car, x.documento, x.tipo_documento, x.nome, x.vinculo, x.origem, x.evidencia, x.snapshot_id
         FROM %s x WHERE x.documento_hmac = $1', t) USING p_documento_hmac;
  END IF;
  e := serving.snapshot_table(p_ibama_snapshot_id, 'ibama_embargos');
  IF e IS NULL THEN RETURN; END IF;
  FOREACH id IN ARRAY coalesce(p_car_snapshot_ids, '{}') LOOP
    t := serving.snapshot_table(id, 'car_imovel');
    IF t IS NOT NULL THEN cars := cars || format('SELECT car, geom, snapshot_id FROM %s', t); END IF;
  END LOOP;
  IF cardinality(cars) = 0 THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT o.car, em.documento, etl.documento_tipo(em.documento), em.nome_embargado, NULL::text, ''inferido''::text,
            jsonb_build_object(
              ''fonte'', ''embargo IBAMA'', ''numero_tad'', em.numero_tad, ''data_embargo'', em.data_embargo,
              ''area_sobreposta_ha'', CASE WHEN em.geom_origem = ''poligono'' THEN o.area_sobreposta_ha END,
              ''percentual'', CASE WHEN em.geom_origem = ''poligono'' THEN o.percentual END,
              ''ibama_snapshot_id'', o.layer_snapshot_id, ''car_snapshot_id'', o.car_snapshot_id,
              ''confianca'', CASE WHEN em.geom_origem <> ''poligono'' THEN ''baixa'' WHEN o.percentual >= 0.9 THEN ''alta'' ELSE ''media'' END),
            o.layer_snapshot_id
       FROM %s em
       JOIN derived.car_overlaps o ON o.feicao_id = em.numero_tad AND o.layer_snapshot_id = $2 AND o.camada = ''embargo''
       JOIN (%s) c ON c.car = o.car AND c.snapshot_id = o.car_snapshot_id
      WHERE em.documento_hmac = $1 AND o.ativo AND em.ativo AND em.documento IS NOT NULL
        AND etl.documento_tipo(em.documento) IS NOT NULL
        AND ((em.geom_origem = ''poligono'' AND o.percentual >= 0.5)
             OR (em.geom_origem <> ''poligono'' AND GeometryType(em.geom) = ''POINT''))
        AND ST_Intersects(c.geom, em.geom)', e, array_to_string(cars, ' UNION ALL '))
    USING p_documento_hmac, p_ibama_snapshot_id;
END
$$;

-- Hectares the way the loaders compute them (equal-area EPSG:10857), for request geometries.
CREATE FUNCTION serving.area_ha(g geometry) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT ST_Area(ST_Transform(g, 10857)) / 10000 $$;
