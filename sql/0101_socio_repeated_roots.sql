-- Receita's Empresas may repeat a cnpj_basico (counted as cnpj_basico_repetido, rows kept):
-- the socio reads joined companies by root, so a repeated root listed each partner link of
-- /socio/cpf twice and each /socio/search hit twice (taking a slot of the limit). Each read
-- now takes one company row per root: the first legal name (links), the best-matching one
-- (search). Otherwise the functions of 0045 and 0075, unchanged.

-- Partner links of the six visible CPF digits (0045): one company row per root.
CREATE OR REPLACE FUNCTION serving.socio_vinculos_snapshot(p_snapshot_id bigint, p_cpf_miolo text)
RETURNS TABLE (cnpj text, cnpj_basico text, razao_social text, nome_socio text, cnpj_cpf_do_socio text,
               qualificacao_socio text, qualificacao_descricao text, situacao_cadastral text, socio_chave text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  soc text := serving.snapshot_table(p_snapshot_id, 'cnpj_socios');
BEGIN
  IF soc IS NULL THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT s.cnpj, p.cnpj_basico, e.razao_social, p.nome_socio, p.cnpj_cpf_do_socio, p.qualificacao_socio, q.descricao,
            s.situacao_cadastral, p.socio_chave
       FROM %s p
       LEFT JOIN LATERAL (SELECT x.razao_social FROM %s x WHERE x.cnpj_basico = p.cnpj_basico ORDER BY x.razao_social LIMIT 1) e ON true
       LEFT JOIN %s q ON q.codigo = p.qualificacao_socio
       LEFT JOIN LATERAL (SELECT x.cnpj, x.situacao_cadastral FROM %s x WHERE x.cnpj_basico = p.cnpj_basico
                           ORDER BY x.identificador_matriz_filial, x.cnpj_ordem LIMIT 1) s ON true
      WHERE p.cpf_miolo = $1
      ORDER BY p.cnpj_basico, p.nome_socio, p.socio_chave',
    soc, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_empresas'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_qualificacoes'),
    serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_estabelecimentos'))
    USING p_cpf_miolo;
END
$$;

-- Name search (0075): one company row per root in the answer's join.
CREATE OR REPLACE FUNCTION serving.socio_busca_snapshot(
  p_snapshot_id bigint, p_q text, p_uf text, p_situacao text, p_cnae text, p_limit int)
RETURNS TABLE (cnpj text, razao_social text, nome_fantasia text, situacao_cadastral text, uf text, municipio_nome text,
               cnae_fiscal_principal text, cnae_descricao text, score double precision)
LANGUAGE plpgsql STABLE
SET pg_trgm.word_similarity_threshold = 0.5 AS $$
DECLARE
  est text := serving.snapshot_table(p_snapshot_id, 'cnpj_estabelecimentos');
  emp text := serving.snapshot_table(p_snapshot_id, 'cnpj_empresas');
  q text := etl.cnpj_busca(p_q);
  floor_score constant float8 := 0.5;
  filters constant text := '($2::text IS NULL OR s.uf = $2) AND ($3::text IS NULL OR s.situacao_cadastral = $3) AND ($4::text IS NULL OR s.cnae_fiscal_principal = $4)';
  above text; -- the trigram step: the best p_limit rows scoring ≥ the session threshold
  walk int;
  w_cnpj text[];
  w_score float8[];
  s float8;
  hits text[];
  t float8;
BEGIN
  IF est IS NULL OR emp IS NULL OR q IS NULL THEN RETURN; END IF;
  above := format(
    'WITH by_razao AS (
       SELECT s.cnpj, c.ws FROM (
         SELECT e.cnpj_basico, word_similarity($1, etl.cnpj_busca(e.razao_social)) AS ws
           FROM %1$s e WHERE $1 <%% etl.cnpj_busca(e.razao_social)
          ORDER BY ws DESC, e.cnpj_basico OFFSET 0) c
       CROSS JOIN LATERAL (SELECT s.cnpj FROM %2$s s WHERE s.cnpj_basico = c.cnpj_basico AND %3$s ORDER BY s.cnpj LIMIT $5) s
       LIMIT $5),
     by_fantasia AS (
       SELECT s.cnpj, word_similarity($1, etl.cnpj_busca(s.nome_fantasia)) AS ws
         FROM %2$s s
        WHERE $1 <%% etl.cnpj_busca(s.nome_fantasia) AND %3$s
        ORDER BY ws DESC, s.cnpj LIMIT $5)
     SELECT array_agg(DISTINCT u.cnpj) FROM (SELECT * FROM by_razao UNION ALL SELECT * FROM by_fantasia) u',
    emp, est, filters);

  SELECT greatest(1000, ceil(sqrt(p_limit * greatest(c.reltuples, 0))))::int INTO walk FROM pg_class c WHERE c.oid = est::regclass;
  -- 0. A frequent exact word: the first p_limit rows scoring 1 (the highest score) among the
  --    first walk/4, read in CNPJ order and stopping as soon as they are found.
  EXECUTE format(
    'SELECT array_agg(x.cnpj ORDER BY x.cnpj) FROM (
       SELECT s.cnpj FROM (SELECT * FROM %2$s ORDER BY cnpj LIMIT $6) s
        WHERE %3$s
          AND (word_similarity($1, etl.cnpj_busca(s.nome_fantasia)) >= 1
               OR EXISTS (SELECT FROM %1$s e WHERE e.cnpj_basico = s.cnpj_basico AND word_similarity($1, etl.cnpj_busca(e.razao_social)) >= 1))
        ORDER BY s.cnpj LIMIT $5) x', emp, est, filters)
    INTO hits USING q, p_uf, p_situacao, p_cnae, p_limit, walk / 4;
  IF coalesce(cardinality(hits), 0) < p_limit THEN
    hits := NULL;
    -- 1. The walk: the first `walk` establishments by CNPJ, filtered, scoring ≥ 0.5, best first.
    EXECUTE format(
    'SELECT array_agg(w.cnpj ORDER BY w.score DESC, w.cnpj), array_agg(w.score ORDER BY w.score DESC, w.cnpj) FROM (
       SELECT s.cnpj, greatest(coalesce(e.ws, 0), coalesce(word_similarity($1, etl.cnpj_busca(s.nome_fantasia)), 0))::float8 AS score
         FROM (SELECT * FROM %2$s ORDER BY cnpj LIMIT $5) s
         -- one index probe per establishment (a hash join would read every company)
         CROSS JOIN LATERAL (SELECT max(word_similarity($1, etl.cnpj_busca(e.razao_social))) AS ws FROM %1$s e WHERE e.cnpj_basico = s.cnpj_basico) e
        WHERE %3$s) w
      WHERE w.score >= $6', emp, est, filters)
      INTO w_cnpj, w_score USING q, p_uf, p_situacao, p_cnae, walk, floor_score;
  END IF;

  IF coalesce(cardinality(hits), 0) >= p_limit THEN
    NULL; -- the walk's first rows scoring 1 (step 0)
  ELSIF coalesce(cardinality(w_cnpj), 0) >= p_limit THEN
    -- 2. Every row scoring more than s (s: the walk's p_limit-th score), then ties at s from the walk.
    s := w_score[p_limit];
    IF s < 1 THEN
      -- word_similarity is a ratio of small trigram counts: distinct scores differ by far more than 1e-6.
      PERFORM set_config('pg_trgm.word_similarity_threshold', (s + 1e-6)::text, true);
      EXECUTE above INTO hits USING q, p_uf, p_situacao, p_cnae, p_limit;
    END IF;
    IF coalesce(cardinality(hits), 0) < p_limit THEN
      hits := coalesce(hits, '{}') || (SELECT array_agg(x.c ORDER BY x.c) FROM (
        SELECT w.c FROM unnest(w_cnpj, w_score) AS w(c, sc) WHERE w.sc = s ORDER BY w.c LIMIT p_limit - coalesce(cardinality(hits), 0)) x);
    END IF;
  ELSE
    -- 3. Few matches near the start of the CNPJ order: the trigram indexes, threshold descending.
    FOREACH t IN ARRAY ARRAY[1, 0.8, 0.65, floor_score]::float8[] LOOP
      PERFORM set_config('pg_trgm.word_similarity_threshold', t::text, true);
      EXECUTE above INTO hits USING q, p_uf, p_situacao, p_cnae, p_limit;
      EXIT WHEN coalesce(cardinality(hits), 0) >= p_limit;
    END LOOP;
  END IF;

  RETURN QUERY EXECUTE format(
    'SELECT s.cnpj, e.razao_social, s.nome_fantasia, s.situacao_cadastral, s.uf, m.descricao, s.cnae_fiscal_principal, c.descricao,
            greatest(coalesce(word_similarity($1, etl.cnpj_busca(e.razao_social)), 0),
                     coalesce(word_similarity($1, etl.cnpj_busca(s.nome_fantasia)), 0))::float8 AS score
       FROM %2$s s
       -- one company row per root (a repeated root would list the establishment twice): its best-matching legal name
       LEFT JOIN LATERAL (SELECT x.razao_social FROM %1$s x WHERE x.cnpj_basico = s.cnpj_basico
                           ORDER BY word_similarity($1, etl.cnpj_busca(x.razao_social)) DESC NULLS LAST, x.razao_social LIMIT 1) e ON true
       LEFT JOIN %3$s m ON m.codigo = s.municipio
       LEFT JOIN %4$s c ON c.codigo = s.cnae_fiscal_principal
      WHERE s.cnpj = ANY ($2)
      ORDER BY score DESC, s.cnpj
      LIMIT $3',
    emp, est, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_municipios'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_cnaes'))
    USING q, coalesce(hits, '{}'::text[]), p_limit;
END
$$;
