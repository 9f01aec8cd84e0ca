-- One line per property for `agro demo`: status, area, embargoes (IBAMA, ICMBio) and territorial overlaps.
SELECT c.car, c.uf, c.municipio, c.situacao, round(c.area_calculada_ha::numeric, 1) AS area_ha, c.embargo_ibama,
       count(*) FILTER (WHERE o.camada = 'embargo_icmbio') AS embargos_icmbio,
       count(*) FILTER (WHERE o.camada = 'uc') AS ucs,
       count(*) FILTER (WHERE o.camada = 'ti') AS tis,
       count(*) FILTER (WHERE o.camada = 'quilombo') AS quilombos,
       (SELECT round(r.distancia_km::numeric, 1) FROM serving.car_rodovias r WHERE r.car = c.car) AS rodovia_km
FROM serving.car_imovel c
LEFT JOIN serving.car_sobreposicoes o ON o.car = c.car
GROUP BY c.car, c.uf, c.municipio, c.situacao, c.area_calculada_ha, c.embargo_ibama
ORDER BY c.uf, c.car
