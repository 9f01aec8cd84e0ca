-- Quality facts of a loaded cnpj_estabelecimentos table: rows, orphan codes (motivo, país,
-- CNAE principal; counted, never failing), establishments whose company is missing.
SELECT count(*)::bigint AS linhas,
       count(*) FILTER (WHERE e.motivo_situacao_cadastral IS NOT NULL AND m.codigo IS NULL)::bigint AS motivo_orfao,
       coalesce((array_agg(DISTINCT e.motivo_situacao_cadastral) FILTER (WHERE e.motivo_situacao_cadastral IS NOT NULL AND m.codigo IS NULL))[1:20], '{}') AS motivo_orfao_codigos,
       count(*) FILTER (WHERE e.pais IS NOT NULL AND p.codigo IS NULL)::bigint AS pais_orfao,
       coalesce((array_agg(DISTINCT e.pais) FILTER (WHERE e.pais IS NOT NULL AND p.codigo IS NULL))[1:20], '{}') AS pais_orfao_codigos,
       count(*) FILTER (WHERE e.cnae_fiscal_principal IS NOT NULL AND c.codigo IS NULL)::bigint AS cnae_orfao,
       coalesce((array_agg(DISTINCT e.cnae_fiscal_principal) FILTER (WHERE e.cnae_fiscal_principal IS NOT NULL AND c.codigo IS NULL))[1:20], '{}') AS cnae_orfao_codigos,
       count(*) FILTER (WHERE e.situacao_cadastral IS NULL OR e.situacao_cadastral NOT IN ('01', '02', '03', '04', '05', '08'))::bigint AS situacao_desconhecida
FROM {{target}} e
LEFT JOIN {{motivos}} m ON m.codigo = e.motivo_situacao_cadastral
LEFT JOIN {{paises}} p ON p.codigo = e.pais
LEFT JOIN {{cnaes}} c ON c.codigo = e.cnae_fiscal_principal;
