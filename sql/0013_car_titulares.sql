-- car-titulares: links between CAR properties and the documents (CPF/CNPJ) of their
-- holders. Public CAR data names no owner (SOURCES §12.1), so every link says where it
-- comes from (contract §3):
--   origem 'declarado': the operator-supplied extract (`car;documento;nome;vinculo`),
--     loaded as a national snapshot (snap.car_titulares__s<id>, current.car_titulares);
--   origem 'inferido': computed on read from the current data (derived.car_titulares_inferidos):
--     an active IBAMA embargo on the property that names a valid document. Never stored, so
--     it cannot go stale when IBAMA or CAR publish.
-- serving.car_titulares is the union of both. Documents are personal data: CPFs are masked
-- by the API, never logged; documento_hmac (HMAC-SHA256 hex, keyed by configuration) is the
-- equality lookup key, computed exactly as ibama_embargos.documento_hmac so that the two
-- datasets match on it.
--
-- Runs after 0008_ibama_embargos (current.ibama_embargos) and 0012_overlaps
-- (derived.current_overlaps), which the inferred view reads.

CREATE EXTENSION IF NOT EXISTS pgcrypto;

-- ---------------------------------------------------------------------------------
-- Documents. Mirrors src/documents.ts (test/documents.test.ts checks that both agree).

-- Stored form: '.', '/', '-', ASCII blanks and the no-break space removed, ASCII letters
-- upper-cased (translate, not upper(): the same result in every locale and in TS).
CREATE FUNCTION etl.documento_normalizado(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT translate(regexp_replace(t, '[ \t\n\r\f\v\u00a0./-]', '', 'g'),
                   'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')
$$;

-- One mod-11 check digit: each character's value is its ASCII code − 48 ('0'..'9' → 0..9,
-- 'A' → 17 … 'Z' → 42), weighted; 0 when the remainder is below 2, else 11 − remainder.
CREATE FUNCTION etl.documento_dv(s text, w int[]) RETURNS int
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE total int := 0;
BEGIN
  FOR i IN 1 .. length(s) LOOP
    total := total + (ascii(substr(s, i, 1)) - 48) * w[i];
  END LOOP;
  RETURN CASE WHEN total % 11 < 2 THEN 0 ELSE 11 - total % 11 END;
END $$;

-- The two check digits of a CPF body (9 digits); NULL for anything else.
CREATE FUNCTION etl.cpf_dv(body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE d1 int;
BEGIN
  IF body !~ '^[0-9]{9}$' THEN RETURN NULL; END IF;
  d1 := etl.documento_dv(body, ARRAY[10, 9, 8, 7, 6, 5, 4, 3, 2]);
  RETURN d1::text || etl.documento_dv(body || d1::text, ARRAY[11, 10, 9, 8, 7, 6, 5, 4, 3, 2])::text;
END $$;

-- The two check digits of a CNPJ body (12 characters [0-9A-Z], SOURCES §1.5); NULL otherwise.
-- '112223330001' → '81'; '12ABC34501DE' → '35'.
CREATE FUNCTION etl.cnpj_dv(body text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE d1 int;
BEGIN
  IF body !~ '^[0-9A-Z]{12}$' THEN RETURN NULL; END IF;
  d1 := etl.documento_dv(body, ARRAY[5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]);
  RETURN d1::text || etl.documento_dv(body || d1::text, ARRAY[6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2])::text;
END $$;

-- A valid CPF, with or without punctuation; a string of one repeated digit is not one.
CREATE FUNCTION etl.cpf_ok(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(d ~ '^[0-9]{11}$' AND d !~ '^(.)\1*$' AND right(d, 2) = etl.cpf_dv(left(d, 9)), false)
  FROM (SELECT etl.documento_normalizado(t) AS d) x
$$;

-- A valid CNPJ, numeric or alphanumeric, with or without punctuation.
CREATE FUNCTION etl.cnpj_ok(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(d ~ '^[0-9A-Z]{12}[0-9]{2}$' AND d !~ '^(.)\1*$' AND right(d, 2) = etl.cnpj_dv(left(d, 12)), false)
  FROM (SELECT etl.documento_normalizado(t) AS d) x
$$;

-- 'cpf' or 'cnpj' for a valid document, NULL otherwise.
CREATE FUNCTION etl.documento_tipo(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN etl.cpf_ok(t) THEN 'cpf' WHEN etl.cnpj_ok(t) THEN 'cnpj' END
$$;

-- HMAC-SHA256 (hex) of a document in stored form; the same value as etl.ibama_hmac and
-- src/documents.ts documentHmac for the same key.
CREATE FUNCTION etl.documento_hmac(doc text, key text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT encode(hmac(doc, key, 'sha256'), 'hex')
$$;

-- vinculo of the extract: 'proprietario' or 'possuidor' (case, blanks and the accented
-- spelling 'proprietário' tolerated); NULL for anything else.
CREATE FUNCTION etl.titular_vinculo(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN v IN ('proprietario', 'possuidor') THEN v END
  FROM (SELECT translate(lower(btrim(t)), 'á', 'a') AS v) x
$$;

-- ---------------------------------------------------------------------------------
-- Declared links: one national snapshot per extract.

CREATE TABLE snap.car_titulares__template (
  car            text NOT NULL,
  documento      text NOT NULL,
  tipo_documento text NOT NULL,
  nome           text,
  vinculo        text NOT NULL,
  origem         text NOT NULL,
  evidencia      jsonb,
  documento_hmac text NOT NULL,
  snapshot_id    bigint NOT NULL
);

CREATE VIEW "current".car_titulares AS SELECT * FROM snap.car_titulares__template;

-- ---------------------------------------------------------------------------------
-- Inferred links, from whatever is current: an active IBAMA embargo (camada 'embargo')
-- that names a valid CPF/CNPJ and
--   - whose polygon covers at least half of the property (percentual ≥ 0.5: confianca
--     'alta' from 0.9, else 'media'), or
--   - that has only a point, lying inside the property (confianca 'baixa').
-- The overlap figures are derived.current_overlaps' (one row per car and numero_tad, so
-- terms sharing a NUM_TAD share them); the term's own geometry must still touch the
-- property. The embargoed person may be a tenant, a former owner or a neighbour
-- (SOURCES §12.1): vinculo stays NULL and the evidence travels with the link.
-- snapshot_id is the IBAMA snapshot the document comes from.
CREATE VIEW derived.car_titulares_inferidos AS
SELECT o.car,
       e.documento,
       etl.documento_tipo(e.documento) AS tipo_documento,
       e.nome_embargado AS nome,
       NULL::text AS vinculo,
       'inferido'::text AS origem,
       jsonb_build_object(
         'fonte', 'embargo IBAMA',
         'numero_tad', e.numero_tad,
         'data_embargo', e.data_embargo,
         'area_sobreposta_ha', CASE WHEN e.geom_origem = 'poligono' THEN o.area_sobreposta_ha END,
         'percentual', CASE WHEN e.geom_origem = 'poligono' THEN o.percentual END,
         'ibama_snapshot_id', o.layer_snapshot_id,
         'car_snapshot_id', o.car_snapshot_id,
         'confianca', CASE WHEN e.geom_origem <> 'poligono' THEN 'baixa'
                           WHEN o.percentual >= 0.9 THEN 'alta'
                           ELSE 'media' END) AS evidencia,
       e.documento_hmac,
       o.layer_snapshot_id AS snapshot_id
FROM derived.current_overlaps o
JOIN "current".ibama_embargos e ON e.numero_tad = o.feicao_id AND e.snapshot_id = o.layer_snapshot_id
JOIN "current".car_imovel c ON c.car = o.car AND c.snapshot_id = o.car_snapshot_id
WHERE o.camada = 'embargo'
  AND o.ativo
  AND e.ativo
  AND e.documento IS NOT NULL
  AND etl.documento_tipo(e.documento) IS NOT NULL
  AND ((e.geom_origem = 'poligono' AND o.percentual >= 0.5)
       OR (e.geom_origem <> 'poligono' AND GeometryType(e.geom) = 'POINT'))
  AND ST_Intersects(c.geom, e.geom);

-- ---------------------------------------------------------------------------------
-- The read interface (contract §2b): declared links of the current extract, then the
-- inferred ones (shown even before any extract is loaded).
CREATE VIEW serving.car_titulares AS
SELECT t.car, t.documento, t.tipo_documento, t.nome, t.vinculo, t.origem, t.evidencia, t.documento_hmac, t.snapshot_id
FROM "current".car_titulares t
UNION ALL
SELECT i.car, i.documento, i.tipo_documento, i.nome, i.vinculo, i.origem, i.evidencia, i.documento_hmac, i.snapshot_id
FROM derived.car_titulares_inferidos i;
