-- CAR status and type codes as SICAR's WFS may spell them (SOURCES §2.4: whether it returns
-- 'AT'/'IRU' or labels is UNVERIFIED; "normalise both"): compared without case, accents,
-- underscores or repeated blanks, so 'Ativo', 'ATIVO', 'Imóvel Rural', 'imovel_rural',
-- 'Assentamento de Reforma Agrária' and 'Povos e Comunidades Tradicionais' map to the codes
-- of §2.5 as 'AT', 'IRU', 'AST' and 'PCT' do. Anything else stays NULL, counted
-- (facts.codes) and kept in `extra` (sicar_typed_imovel.sql).
CREATE OR REPLACE FUNCTION etl.car_situacao(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE etl.normalize_nome(replace(code, '_', ' '))
    WHEN 'AT' THEN 'ativo' WHEN 'ATIVO' THEN 'ativo'
    WHEN 'PE' THEN 'pendente' WHEN 'PENDENTE' THEN 'pendente'
    WHEN 'CA' THEN 'cancelado' WHEN 'CANCELADO' THEN 'cancelado'
    WHEN 'SU' THEN 'suspenso' WHEN 'SUSPENSO' THEN 'suspenso' END
$$;

CREATE OR REPLACE FUNCTION etl.car_tipo(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN n IN ('PCT', 'TERRITORIO TRADICIONAL') OR n LIKE '%POVOS E COMUNIDADES TRADICIONAIS' THEN 'territorio_tradicional'
    WHEN n IN ('IRU', 'IMOVEL RURAL') THEN 'imovel_rural'
    WHEN n IN ('AST', 'ASSENTAMENTO', 'ASSENTAMENTO DE REFORMA AGRARIA') THEN 'assentamento' END
  FROM (SELECT etl.normalize_nome(replace(code, '_', ' ')) AS n) x
$$;
