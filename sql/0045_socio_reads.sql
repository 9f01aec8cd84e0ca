-- Reads of a receita-cnpj snapshot for the socio routes (issue 9): the published month and
-- the months kept for `as_of`. Like the functions of 0021, they are the one place that turns
-- a snapshot id into its physical tables (serving.snapshot_table: readable snapshots only).
-- Lookups are LEFT JOINed within the same snapshot: orphan codes (qualificação 36, unknown
-- CNAEs) come back with a NULL description and their code, never a dropped row.

-- A joined table of a snapshot, or its empty template when the snapshot lacks it: a joined
-- lookup that is missing yields NULL descriptions, never a failed statement.
CREATE FUNCTION serving.cnpj_lookup_table(p_snapshot_id bigint, p_relation text) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(serving.snapshot_table(p_snapshot_id, p_relation), format('snap.%I', p_relation || '__template'))
$$;

-- One establishment (14-character CNPJ) with its company and the descriptions of its codes.
CREATE FUNCTION serving.socio_empresa_snapshot(p_snapshot_id bigint, p_cnpj text)
RETURNS TABLE (cnpj text, cnpj_basico text, identificador_matriz_filial text, razao_social text, nome_fantasia text,
               situacao_cadastral text, data_inicio_atividade date, capital_social double precision,
               natureza_juridica text, natureza_descricao text, cnae_fiscal_principal text, cnae_descricao text,
               municipio text, municipio_nome text, codigo_municipio_ibge text, uf text, cep text, snapshot_id bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  est text := serving.snapshot_table(p_snapshot_id, 'cnpj_estabelecimentos');
BEGIN
  IF est IS NULL THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT s.cnpj, s.cnpj_basico, s.identificador_matriz_filial, e.razao_social, s.nome_fantasia, s.situacao_cadastral,
            s.data_inicio_atividade, e.capital_social::float8, e.natureza_juridica, n.descricao, s.cnae_fiscal_principal, c.descricao,
            s.municipio, m.descricao, m.codigo_ibge, s.uf, s.cep, s.snapshot_id
       FROM %s s
       LEFT JOIN %s e ON e.cnpj_basico = s.cnpj_basico
       LEFT JOIN %s n ON n.codigo = e.natureza_juridica
       LEFT JOIN %s c ON c.codigo = s.cnae_fiscal_principal
       LEFT JOIN %s m ON m.codigo = s.municipio
      WHERE s.cnpj = $1',
    est, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_empresas'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_naturezas'),
    serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_cnaes'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_municipios'))
    USING p_cnpj;
END
$$;

-- The partner list (QSA) of a company (8-character root), one row per synthesised partner key.
CREATE FUNCTION serving.socio_qsa_snapshot(p_snapshot_id bigint, p_cnpj_basico text)
RETURNS TABLE (socio_chave text, identificador_de_socio text, nome_socio text, cnpj_cpf_do_socio text,
               qualificacao_socio text, qualificacao_descricao text, data_entrada_sociedade date, faixa_etaria smallint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  soc text := serving.snapshot_table(p_snapshot_id, 'cnpj_socios');
BEGIN
  IF soc IS NULL THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'SELECT p.socio_chave, p.identificador_de_socio, p.nome_socio, p.cnpj_cpf_do_socio, p.qualificacao_socio, q.descricao,
            p.data_entrada_sociedade, p.faixa_etaria
       FROM %s p LEFT JOIN %s q ON q.codigo = p.qualificacao_socio
      WHERE p.cnpj_basico = $1
      ORDER BY p.nome_socio, p.socio_chave',
    soc, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_qualificacoes'))
    USING p_cnpj_basico;
END
$$;

-- Partner links of the six visible CPF digits: each company (its head office's CNPJ, else its
-- first establishment) with the partner's name and qualification.
CREATE FUNCTION serving.socio_vinculos_snapshot(p_snapshot_id bigint, p_cpf_miolo text)
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
       LEFT JOIN %s e ON e.cnpj_basico = p.cnpj_basico
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

-- Name search: establishments whose company's legal name or own trade name contains the
-- query's words (pg_trgm word similarity `<%` on etl.cnpj_busca, the expression the
-- pipeline's GIN indexes are built on, so both arms are index scans), filtered by state,
-- Receita situação code and CNAE, ranked by the better of the two word similarities, then
-- CNPJ. Each arm keeps only its own best p_limit rows by (similarity, CNPJ) before the
-- descriptions are joined: a common word matching a tenth of a month costs one pass over its
-- matches, not joins and a full sort of all of them. Exact: a row of the overall top p_limit
-- is in the top p_limit of the arm its score comes from (same order, ties by CNPJ). Threshold 0.5: a
-- typo or a missing word still matches.
CREATE FUNCTION serving.socio_busca_snapshot(
  p_snapshot_id bigint, p_q text, p_uf text, p_situacao text, p_cnae text, p_limit int)
RETURNS TABLE (cnpj text, razao_social text, nome_fantasia text, situacao_cadastral text, uf text, municipio_nome text,
               cnae_fiscal_principal text, cnae_descricao text, score double precision)
LANGUAGE plpgsql STABLE
SET pg_trgm.word_similarity_threshold = 0.5 AS $$
DECLARE
  est text := serving.snapshot_table(p_snapshot_id, 'cnpj_estabelecimentos');
  emp text := serving.snapshot_table(p_snapshot_id, 'cnpj_empresas');
  q text := etl.cnpj_busca(p_q);
BEGIN
  IF est IS NULL OR emp IS NULL OR q IS NULL THEN RETURN; END IF;
  RETURN QUERY EXECUTE format(
    'WITH by_razao AS (
       SELECT s.cnpj, word_similarity($1, etl.cnpj_busca(e.razao_social)) AS ws
         FROM %1$s e JOIN %2$s s ON s.cnpj_basico = e.cnpj_basico
        WHERE $1 <%% etl.cnpj_busca(e.razao_social)
          AND ($2::text IS NULL OR s.uf = $2) AND ($3::text IS NULL OR s.situacao_cadastral = $3) AND ($4::text IS NULL OR s.cnae_fiscal_principal = $4)
        ORDER BY ws DESC, s.cnpj LIMIT $5),
     by_fantasia AS (
       SELECT s.cnpj, word_similarity($1, etl.cnpj_busca(s.nome_fantasia)) AS ws
         FROM %2$s s
        WHERE $1 <%% etl.cnpj_busca(s.nome_fantasia)
          AND ($2::text IS NULL OR s.uf = $2) AND ($3::text IS NULL OR s.situacao_cadastral = $3) AND ($4::text IS NULL OR s.cnae_fiscal_principal = $4)
        ORDER BY ws DESC, s.cnpj LIMIT $5),
     hits AS (
       SELECT DISTINCT h.cnpj FROM (SELECT by_razao.cnpj FROM by_razao UNION ALL SELECT by_fantasia.cnpj FROM by_fantasia) h)
     SELECT s.cnpj, e.razao_social, s.nome_fantasia, s.situacao_cadastral, s.uf, m.descricao, s.cnae_fiscal_principal, c.descricao,
            greatest(coalesce(word_similarity($1, etl.cnpj_busca(e.razao_social)), 0),
                     coalesce(word_similarity($1, etl.cnpj_busca(s.nome_fantasia)), 0))::float8 AS score
       FROM hits h
       JOIN %2$s s ON s.cnpj = h.cnpj
       LEFT JOIN %1$s e ON e.cnpj_basico = s.cnpj_basico
       LEFT JOIN %3$s m ON m.codigo = s.municipio
       LEFT JOIN %4$s c ON c.codigo = s.cnae_fiscal_principal
      ORDER BY score DESC, s.cnpj
      LIMIT $5',
    emp, est, serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_municipios'), serving.cnpj_lookup_table(p_snapshot_id, 'cnpj_cnaes'))
    USING q, p_uf, p_situacao, p_cnae, p_limit;
END
$$;
