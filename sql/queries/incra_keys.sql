-- Stable keys for INCRA territories without a usable cd_quilomb. In the real layer most rows
-- carry '**********' (a DBF numeric overflow: GDAL reads it as NULL), which rejected 267 of
-- 427 areas. Such a row gets, in this order, the first candidate that no other row needing a
-- fallback in the same load shares (so two territories never merge into one key):
--   'processo:<nr_process>'                 the titling process number, INCRA's own identifier
--                                            of the territory's process (spaces removed, upper case)
--   'comunidade:<UF>/<municipio>/<nome>'     community, municipality and UF (trimmed, lower case,
--                                            whitespace collapsed)
--   'geometria:<md5 of the source WKB>'      last resort: changes whenever INCRA edits the polygon
-- Prefixes keep these apart from real codes (digits). origem says which candidate was used.
CREATE UNLOGGED TABLE {{keys}} WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false) AS
WITH c AS (
  SELECT s.src_seq,
         CASE WHEN btrim(s.numero_processo) <> '' AND NOT etl.is_overflow(s.numero_processo)
              THEN 'processo:' || upper(regexp_replace(btrim(s.numero_processo), '\s+', '', 'g')) END AS k1,
         CASE WHEN btrim(s.comunidade) <> ''
              THEN 'comunidade:' || upper(coalesce(btrim(s.uf), '')) || '/' || lower(regexp_replace(btrim(coalesce(s.municipio, '')), '\s+', ' ', 'g'))
                   || '/' || lower(regexp_replace(btrim(s.comunidade), '\s+', ' ', 'g')) END AS k2,
         CASE WHEN s.geom IS NOT NULL THEN 'geometria:' || md5(ST_AsBinary(s.geom)) END AS k3
  FROM {{stage}} s
  WHERE etl.code_text(s.codigo) IS NULL
), n AS (
  SELECT c.*, count(*) OVER (PARTITION BY k1) AS n1, count(*) OVER (PARTITION BY k2) AS n2 FROM c
)
SELECT src_seq,
       CASE WHEN k1 IS NOT NULL AND n1 = 1 THEN k1 WHEN k2 IS NOT NULL AND n2 = 1 THEN k2 ELSE k3 END AS codigo,
       CASE WHEN k1 IS NOT NULL AND n1 = 1 THEN 'processo' WHEN k2 IS NOT NULL AND n2 = 1 THEN 'comunidade'
            WHEN k3 IS NOT NULL THEN 'geometria' END AS origem
FROM n
