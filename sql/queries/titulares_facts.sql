-- Quality facts of a car_titulares snapshot ({{target}}) and its classified rows: links
-- per vinculo and document type, and the links whose CAR number is in no current CAR
-- snapshot (reported, not rejected: the extract may cover states that are not loaded).
-- No document ever leaves this query.
WITH absent AS (
  SELECT t.car FROM {{target}} t
  WHERE NOT EXISTS (SELECT 1 FROM "current".car_imovel c WHERE c.car = t.car)
)
SELECT
  (SELECT count(*) FILTER (WHERE vinculo = 'proprietario') FROM {{target}})::int AS proprietario,
  (SELECT count(*) FILTER (WHERE vinculo = 'possuidor') FROM {{target}})::int AS possuidor,
  (SELECT count(*) FILTER (WHERE tipo_documento = 'cpf') FROM {{target}})::int AS cpf,
  (SELECT count(*) FILTER (WHERE tipo_documento = 'cnpj') FROM {{target}})::int AS cnpj,
  (SELECT count(*) FILTER (WHERE tipo_documento = 'cnpj' AND documento ~ '[A-Z]') FROM {{target}})::int AS cnpj_alfanumerico,
  (SELECT count(*) FILTER (WHERE nome IS NULL) FROM {{target}})::int AS sem_nome,
  (SELECT count(DISTINCT car) FROM {{target}})::int AS cars,
  (SELECT count(DISTINCT documento) FROM {{target}})::int AS documentos,
  (SELECT count(*) FROM absent)::int AS ausentes_vinculos,
  (SELECT count(DISTINCT car) FROM absent)::int AS ausentes_cars,
  (SELECT coalesce(array_agg(DISTINCT left(car, 2) ORDER BY left(car, 2)), '{}') FROM absent) AS ausentes_ufs,
  (SELECT coalesce(array_agg(scope ORDER BY scope), '{}') FROM etl.current WHERE dataset = 'sicar') AS ufs_car,
  (SELECT count(*) FROM {{classified}} WHERE fffd)::int AS fffd
