-- /socio/search at national scale (issue 9): the same answer as 0045's search — establishments
-- ranked by score = the better word similarity (pg_trgm, on etl.cnpj_busca) of the company's
-- legal name and the establishment's trade name, ties by CNPJ, at most p_limit, nothing below
-- 0.5 — found without rechecking every row a common word matches.
--
-- 0045 asked the trigram indexes for every name with a similarity ≥ 0.5 and ranked them all:
-- a frequent word ("jose silva", "agropecuaria") matches a tenth of a month, each match is
-- read and scored, and thousands tie at one score (0.9–1.4 s at 1 M companies). Now:
--   0. the first p_limit establishments in CNPJ order scoring 1 (the highest a score can be)
--      among the first W/4 (W below): if there are p_limit, they are the answer. A frequent
--      exact word ("agropecuaria") is answered after reading a few hundred rows.
--   1. walk: the first W establishments in CNPJ order (W = √(p_limit · establishments), at
--      least 1,000), filtered and scored. If p_limit of them score ≥ 0.5, let s be the
--      p_limit-th best score among them: the answer's last score is at least s.
--   2. the trigram indexes with the threshold just above s give every row scoring more than
--      s (few: at most about p_limit · N / W of them are expected). If there are p_limit of
--      them, the answer is their best p_limit. Otherwise the answer's last score is exactly
--      s, and the rest of the answer is the rows scoring s with the smallest CNPJs — the
--      first ones of the walk, since the walk is a prefix of the CNPJ order.
--   3. when the walk holds fewer than p_limit rows scoring ≥ 0.5 (rare words, selective
--      filters), the trigram indexes with the threshold at 1, then 0.8, 0.65 and 0.5, stopping
--      at the first that yields p_limit rows (the rows scoring ≥ t hold the answer as soon as
--      there are p_limit of them); a rare word costs little at every step.
-- Every step is exact, so the answer is 0045's. A trigram step is 0045's query (two arms, each
-- keeping its best p_limit by (similarity, CNPJ), the union ranked by the better of the two);
-- the legal-name arm ranks companies by (similarity, cnpj_basico) and only then reads their
-- establishments (a CNPJ begins with its cnpj_basico: same order), instead of joining every
-- company of a tie. Its cost is bounded by the rows above the threshold, the walk's by W.
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
       LEFT JOIN %1$s e ON e.cnpj_basico = s.cnpj_basico
       LEFT JOIN %3$s m ON m.codigo = s.municipio
       LEFT JOIN %4$s c ON c.codigo = s.cnae_fiscal_principal
      WHERE s.cnpj = ANY ($2)
      ORDER BY score DESC, s.cnpj
      LIMIT $3',
    emp, est, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_municipios'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_cnaes'))
    USING q, coalesce(hits, '{}'::text[]), p_limit;
END
$$;
