-- The CAR status and type codes of migration 0082, with the codes SICAR writes ('AT', 'IRU',
-- any case, padded) settled by a plain CASE and only other spellings normalised: 0082's
-- functions normalised every value (translate + regexp_replace), and car_tipo could not be
-- inlined, ~6 µs a call: 2,000,000 calls took 12.0 s (car_situacao 1.6 s against 0.55 s
-- before 0082), which the SICAR typed passes paid once or twice a row. Same answers.
CREATE FUNCTION etl.car_situacao_spelled(code text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE etl.normalize_nome(replace(code, '_', ' '))
    WHEN 'AT' THEN 'ativo' WHEN 'ATIVO' THEN 'ativo'
    WHEN 'PE' THEN 'pendente' WHEN 'PENDENTE' THEN 'pendente'
    WHEN 'CA' THEN 'cancelado' WHEN 'CANCELADO' THEN 'cancelado'
    WHEN 'SU' THEN 'suspenso' WHEN 'SUSPENSO' THEN 'suspenso' END
$$;

CREATE OR REPLACE FUNCTION etl.car_situacao(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE upper(btrim(code))
    WHEN 'AT' THEN 'ativo' WHEN 'ATIVO' THEN 'ativo'
    WHEN 'PE' THEN 'pendente' WHEN 'PENDENTE' THEN 'pendente'
    WHEN 'CA' THEN 'cancelado' WHEN 'CANCELADO' THEN 'cancelado'
    WHEN 'SU' THEN 'suspenso' WHEN 'SUSPENSO' THEN 'suspenso'
    ELSE etl.car_situacao_spelled(code) END
$$;

CREATE FUNCTION etl.car_tipo_spelled(code text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE
    WHEN n IN ('PCT', 'TERRITORIO TRADICIONAL') OR n LIKE '%POVOS E COMUNIDADES TRADICIONAIS' THEN 'territorio_tradicional'
    WHEN n IN ('IRU', 'IMOVEL RURAL') THEN 'imovel_rural'
    WHEN n IN ('AST', 'ASSENTAMENTO', 'ASSENTAMENTO DE REFORMA AGRARIA') THEN 'assentamento' END
  FROM (SELECT etl.normalize_nome(replace(code, '_', ' ')) AS n) x
$$;

CREATE OR REPLACE FUNCTION etl.car_tipo(code text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE upper(btrim(code))
    WHEN 'IRU' THEN 'imovel_rural' WHEN 'AST' THEN 'assentamento' WHEN 'PCT' THEN 'territorio_tradicional'
    ELSE etl.car_tipo_spelled(code) END
$$;
