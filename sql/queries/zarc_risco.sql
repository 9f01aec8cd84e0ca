-- The zarc_risco snapshot: valid rows, one per chave. Column order and types match
-- snap.zarc_risco__template (checked before publishing). Several rows with one chave:
-- the last one read wins (files in name order, then rows in file order). Portaria is part
-- of the chave, so rows of different ordinances never compete. The search name is computed
-- once per distinct crop name, not once per row.
CREATE TABLE {{target}} AS
SELECT DISTINCT ON (t.chave)
       t.geocodigo, t.safra, t.cultura, b.cultura_busca, t.cod_cultura, t.ciclo, t.solo,
       t.manejo, t.nome_manejo, t.cod_clima, t.clima, t.portaria, t.uf, t.municipio, t.cod_municipio_bacen,
       {{dec_names}},
       t.safra_ini, t.safra_fim, t.produtividade, t.cod_nm, t.cod_meso, t.cod_micro, t.chave, t.extra,
       {{snapshot_id}}::bigint AS snapshot_id
FROM {{typed}} t
JOIN (SELECT c.cultura, etl.zarc_busca(c.cultura) AS cultura_busca
        FROM (SELECT DISTINCT cultura FROM {{typed}} WHERE verdict = 'ok') c) b ON b.cultura = t.cultura
WHERE t.verdict = 'ok'
ORDER BY t.chave, t.file_no DESC, t.src_seq DESC
