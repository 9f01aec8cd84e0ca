-- IBAMA embargoes (termos de embargo): one national snapshot per release of the
-- SIFISC file (SOURCES §3, contract §2b/§3). The snapshot table is created with exactly
-- these columns (checked before publishing); serving.ibama_embargos is the stable view.
--
-- Key: id_tad = SEQ_TAD (IBAMA's internal sequence, what its own API looks terms up by)
-- when present; terms drawn up in the electronic AIe system have no SEQ_TAD (2,862 of
-- 116,332 in the 2026-09-23 file), so they fall back to 'tad:' || NUM_TAD [|| '/' || SER_TAD].
-- geom is the embargoed polygon (MultiPolygon, repaired) when the source has one, else the
-- term's point (geom_origem says which); geom_ponto is the point whenever it is usable.
-- documento is personal data (CPF): masked on output by the API, never logged;
-- documento_hmac (HMAC-SHA256, hex, keyed by configuration) is the equality lookup key.

CREATE EXTENSION IF NOT EXISTS pgcrypto;

CREATE TABLE snap.ibama_embargos__template (
  id_tad               text NOT NULL,
  numero_tad           text NOT NULL,
  serie_tad            text,
  seq_tad              text,
  data_embargo         date,
  situacao             text,
  ativo                boolean NOT NULL,
  status_formulario    text,
  cancelado            boolean NOT NULL,
  desembargado         boolean NOT NULL,
  data_desembargo      date,
  tipo_desembargo      text,
  descricao_desembargo text,
  documento            text,
  documento_tipo       text,
  documento_hmac       text,
  nome_embargado       text,
  cod_municipio_ibge   text,
  municipio            text,
  uf                   text,
  area_embargada_ha    double precision,
  area_calculada_ha    double precision,
  nome_imovel          text,
  tipo_area            text,
  descricao            text,
  localizacao          text,
  numero_processo      text,
  numero_auto_infracao text,
  deter_prodes         text,
  id_poligono          text,
  embarga_poligono     text,
  data_alteracao       timestamp,
  geom_origem          text NOT NULL,
  geom_problema        text,
  geom                 geometry(Geometry, 4326) NOT NULL,
  geom_ponto           geometry(Point, 4326),
  extra                jsonb,
  snapshot_id          bigint NOT NULL
);

CREATE VIEW "current".ibama_embargos AS SELECT * FROM snap.ibama_embargos__template;

CREATE VIEW serving.ibama_embargos AS
SELECT e.numero_tad, e.serie_tad, e.seq_tad, e.id_tad, e.data_embargo, e.situacao, e.ativo,
       e.status_formulario, e.cancelado, e.desembargado, e.data_desembargo, e.tipo_desembargo,
       e.descricao_desembargo, e.documento, e.documento_tipo, e.documento_hmac, e.nome_embargado,
       e.cod_municipio_ibge, e.municipio, e.uf, e.area_embargada_ha, e.area_calculada_ha,
       e.nome_imovel, e.tipo_area, e.descricao, e.localizacao, e.numero_processo,
       e.numero_auto_infracao, e.deter_prodes, e.id_poligono, e.embarga_poligono, e.data_alteracao,
       e.geom_origem, e.geom_problema, e.geom, e.geom_ponto, e.extra, e.snapshot_id
FROM "current".ibama_embargos e;

-- One WKT cell → its polygonal part and a state, without ever raising: state 'bad_wkt'
-- when the text does not parse (an open ring, a cut cell), 'not_polygonal' when it has no
-- polygon, 'ok'; both NULL for an empty cell or an empty geometry. Call it in FROM
-- (CROSS JOIN LATERAL) so it runs once per row. The EXCEPTION block is a subtransaction,
-- hence PARALLEL UNSAFE: subtransactions cannot start inside a parallel query.
CREATE FUNCTION etl.ibama_parse_wkt(wkt text, srid int, OUT geom geometry, OUT state text)
LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $$
DECLARE g geometry;
BEGIN
  IF nullif(btrim(wkt), '') IS NULL THEN RETURN; END IF;
  BEGIN
    g := ST_Force2D(ST_GeomFromText(btrim(wkt), srid));
  EXCEPTION WHEN OTHERS THEN
    state := 'bad_wkt';
    RETURN;
  END;
  IF g IS NULL OR ST_IsEmpty(g) THEN RETURN; END IF;
  geom := ST_CollectionExtract(g, 3);
  IF ST_IsEmpty(geom) THEN
    geom := NULL;
    state := 'not_polygonal';
    RETURN;
  END IF;
  state := 'ok';
END $$;

-- Degrees from a degrees-minutes-seconds text (legacy NUM_*_GMS_TAD, shapefile num_long_1 /
-- num_lati_1): up to three numbers (decimal comma or point) with any separators; negative
-- for a leading '-' or a S / W / O (oeste) hemisphere letter.
CREATE FUNCTION etl.ibama_dms(t text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE s text := upper(btrim(coalesce(t, '')));
        n text[];
        d double precision;
        m double precision;
        x double precision;
BEGIN
  IF s = '' THEN RETURN NULL; END IF;
  n := ARRAY(SELECT replace(r[1], ',', '.') FROM regexp_matches(s, '(\d+(?:[.,]\d+)?)', 'g') AS r);
  IF coalesce(array_length(n, 1), 0) NOT BETWEEN 1 AND 3 THEN RETURN NULL; END IF;
  d := n[1]::double precision;
  m := coalesce(n[2], '0')::double precision;
  x := coalesce(n[3], '0')::double precision;
  IF m >= 60 OR x >= 60 THEN RETURN NULL; END IF;
  d := d + m / 60 + x / 3600;
  RETURN CASE WHEN s ~ '^-' OR s ~ '^[SWO]\M' OR s ~ '[SWO]\s*$' THEN -d ELSE d END;
END $$;

-- The term's point in EPSG:4326 from decimal lon/lat (else the DMS columns) in `srid`;
-- NULL when absent, not a number, out of range, or (0, 0) (IBAMA's "not informed").
CREATE FUNCTION etl.ibama_point(lon text, lat text, lon_dms text, lat_dms text, srid int) RETURNS geometry
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE x double precision := etl.parse_number(lon);
        y double precision := etl.parse_number(lat);
BEGIN
  IF x IS NULL OR y IS NULL THEN
    x := etl.ibama_dms(lon_dms);
    y := etl.ibama_dms(lat_dms);
  END IF;
  IF x IS NULL OR y IS NULL OR (x = 0 AND y = 0) OR abs(x) > 180 OR abs(y) > 90 THEN RETURN NULL; END IF;
  RETURN ST_Transform(ST_SetSRID(ST_MakePoint(x, y), srid), 4326);
END $$;

-- 'S'/'SIM' (and boolean spellings) → true; anything else, empty included → false.
CREATE FUNCTION etl.ibama_flag(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(upper(btrim(t)) IN ('S', 'SIM', 'Y', 'T', 'TRUE', '1'), false)
$$;

-- Form status as the CSV spells it; the shapefile's status_tad code 'AL' is 'Lavrado'.
CREATE FUNCTION etl.ibama_status(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN upper(btrim(t)) = 'AL' THEN 'Lavrado' ELSE nullif(btrim(t), '') END
$$;

-- Active = drawn up ('Lavrado'), not cancelled, not lifted (SOURCES §3.5). Otherwise
-- 'cancelado', 'desembargado' or the form status lower-cased ('substituído por outro', …).
CREATE FUNCTION etl.ibama_situacao(status text, cancelado boolean, desembargado boolean) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN cancelado THEN 'cancelado'
    WHEN desembargado THEN 'desembargado'
    WHEN lower(btrim(status)) = 'lavrado' THEN 'ativo'
    ELSE nullif(lower(btrim(status)), '') END
$$;

-- A CPF or CNPJ as bare characters: punctuation removed, upper case (alphanumeric CNPJs
-- exist from July 2026; the stored form of src/documents.ts); anything else reduced to its
-- digits. NULL when nothing is left. Its type (and check digits) come from
-- etl.documento_tipo (sql/0013) at load time.
CREATE FUNCTION etl.ibama_documento(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN c ~ '^[0-9]{11}$' OR c ~ '^[0-9A-Z]{12}[0-9]{2}$' THEN c
              ELSE nullif(regexp_replace(coalesce(t, ''), '\D', '', 'g'), '') END
  FROM (SELECT upper(regexp_replace(coalesce(t, ''), '[\s./-]', '', 'g')) AS c) x
$$;

-- HMAC-SHA256 of a document, hex: the equality key for personal documents.
CREATE FUNCTION etl.ibama_hmac(doc text, key text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT encode(hmac(doc, key, 'sha256'), 'hex')
$$;

-- SEQ_TAD as text; some exports glue a '.0' to it.
CREATE FUNCTION etl.ibama_seq(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT nullif(regexp_replace(btrim(coalesce(t, '')), '[.,]0+$', ''), '')
$$;

CREATE FUNCTION etl.ibama_id_tad(seq text, numero text, serie text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(etl.ibama_seq(seq), 'tad:' || nullif(btrim(numero), '') || coalesce('/' || nullif(btrim(serie), ''), ''))
$$;

-- Date and time of a DAT_* text ('2024-05-03 10:22:11', '03/05/2024 10:22', '2024-05-03').
CREATE FUNCTION etl.ibama_timestamp(t text) RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE d date := etl.parse_date(t);
        m text[];
BEGIN
  IF d IS NULL THEN RETURN NULL; END IF;
  m := regexp_match(t, '\d[T ](\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?');
  IF m IS NULL OR m[1]::int > 23 OR m[2]::int > 59 OR coalesce(m[3], '0')::numeric >= 60 THEN RETURN d::timestamp; END IF;
  RETURN d + make_interval(hours => m[1]::int, mins => m[2]::int, secs => coalesce(m[3], '0')::double precision);
END $$;
