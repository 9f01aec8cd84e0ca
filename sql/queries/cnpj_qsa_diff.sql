-- Partner-list changes of each company between two months' partner tables, by the
-- synthesised partner key: who entered, who left (contract §5 socio.qsa.alterado). One row per
-- company whose list changed. {{socios}} and {{previous}} are tables or subqueries: the whole
-- month for derived.cnpj_qsa_changes (cnpj_qsa_changes.sql), the monitored companies of the
-- two snapshots a publish moves between for the events (src/events/change-events.ts).
SELECT coalesce(n.cnpj_basico, o.cnpj_basico) AS cnpj_basico,
       coalesce(jsonb_agg(jsonb_build_object(
         'socio_chave', n.socio_chave, 'nome_socio', n.nome_socio, 'cnpj_cpf_do_socio', n.cnpj_cpf_do_socio,
         'identificador_de_socio', n.identificador_de_socio, 'qualificacao_socio', n.qualificacao_socio,
         'data_entrada_sociedade', n.data_entrada_sociedade) ORDER BY n.socio_chave) FILTER (WHERE o.socio_chave IS NULL), '[]') AS entraram,
       coalesce(jsonb_agg(jsonb_build_object(
         'socio_chave', o.socio_chave, 'nome_socio', o.nome_socio, 'cnpj_cpf_do_socio', o.cnpj_cpf_do_socio,
         'identificador_de_socio', o.identificador_de_socio, 'qualificacao_socio', o.qualificacao_socio,
         'data_entrada_sociedade', o.data_entrada_sociedade) ORDER BY o.socio_chave) FILTER (WHERE n.socio_chave IS NULL), '[]') AS sairam
FROM {{socios}} n
FULL JOIN {{previous}} o
  ON o.cnpj_basico = n.cnpj_basico AND o.socio_chave = n.socio_chave
WHERE n.socio_chave IS NULL OR o.socio_chave IS NULL
GROUP BY coalesce(n.cnpj_basico, o.cnpj_basico)
