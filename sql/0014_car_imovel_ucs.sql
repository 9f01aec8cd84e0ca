-- sobreposicao_ucs (contract §3): one element per conservation unit the property
-- overlaps, largest first, from the precomputed overlaps of the current snapshots.
CREATE OR REPLACE VIEW serving.car_imovel AS
SELECT c.car, c.uf, c.cod_municipio_ibge, c.municipio, c.situacao, c.tipo, c.condicao, c.modulos_fiscais,
       c.area_total_ha, c.area_calculada_ha, c.app_ha, c.reserva_legal_ha, c.area_consolidada_ha,
       c.data_inscricao, c.data_atualizacao,
       CASE WHEN EXISTS (SELECT 1 FROM etl.current WHERE dataset = 'ibama-embargos')
            THEN EXISTS (SELECT 1 FROM derived.current_overlaps o WHERE o.car = c.car AND o.camada = 'embargo' AND o.ativo)
       END AS embargo_ibama,
       c.centroid, c.geom, c.extra, c.snapshot_id,
       (SELECT coalesce(jsonb_agg(jsonb_build_object(
                 'cnuc', o.feicao_id, 'nome', u.nome, 'categoria', u.categoria, 'grupo', u.grupo, 'esfera', u.esfera,
                 'area_sobreposta_ha', round(o.area_sobreposta_ha::numeric, 4), 'percentual', round(o.percentual::numeric, 6))
               ORDER BY o.area_sobreposta_ha DESC, o.feicao_id), '[]'::jsonb)
          FROM derived.current_overlaps o JOIN "current".cnuc_ucs u ON u.codigo = o.feicao_id
         WHERE o.car = c.car AND o.camada = 'uc') AS sobreposicao_ucs
FROM "current".car_imovel c;
