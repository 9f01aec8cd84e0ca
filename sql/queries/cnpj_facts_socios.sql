-- Quality facts of a loaded cnpj_socios table: rows, companies with partners, empty names,
-- roots that are not 8 characters (leading zeros lost: they match no company),
-- repeated partner keys (identical rows), orphan codes (qualificação, país). Distinct values
-- are counted in byte order (COLLATE "C": same values, a much cheaper sort than C.UTF-8).
SELECT count(*)::bigint AS linhas,
       count(DISTINCT s.cnpj_basico COLLATE "C")::bigint AS empresas_com_socios,
       count(*) FILTER (WHERE s.nome_socio IS NULL)::bigint AS nome_vazio,
       count(*) FILTER (WHERE s.cnpj_basico !~ '^[0-9A-Z]{8}$')::bigint AS cnpj_basico_invalido,
       (count(*) - count(DISTINCT (coalesce(s.cnpj_basico, '') || ' ' || s.socio_chave) COLLATE "C"))::bigint AS chave_repetida,
       count(*) FILTER (WHERE s.qualificacao_socio IS NOT NULL AND q.codigo IS NULL)::bigint AS qualificacao_orfa,
       coalesce((array_agg(DISTINCT s.qualificacao_socio) FILTER (WHERE s.qualificacao_socio IS NOT NULL AND q.codigo IS NULL))[1:20], '{}') AS qualificacao_orfa_codigos,
       count(*) FILTER (WHERE s.pais IS NOT NULL AND p.codigo IS NULL)::bigint AS pais_orfao,
       coalesce((array_agg(DISTINCT s.pais) FILTER (WHERE s.pais IS NOT NULL AND p.codigo IS NULL))[1:20], '{}') AS pais_orfao_codigos
FROM {{target}} s
LEFT JOIN {{qualificacoes}} q ON q.codigo = s.qualificacao_socio
LEFT JOIN {{paises}} p ON p.codigo = s.pais;
