-- The properties a theme without cod_imovel can be linked to: the winning AREA_IMOVEL rows
-- of this snapshot (as car_imovel will hold them: the most recently updated copy, then the
-- last read), from the typed pass, in EPSG:4326, indexed by the caller.
CREATE UNLOGGED TABLE {{properties}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
SELECT DISTINCT ON (car) car, geom
FROM {{typed}}
WHERE verdict = 'ok'
ORDER BY car, updated DESC NULLS LAST, src_seq DESC
