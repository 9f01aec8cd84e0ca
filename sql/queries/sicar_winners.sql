-- One row per CAR number: the most recently updated copy wins, then the last one read.
CREATE UNLOGGED TABLE {{winners}} AS
SELECT DISTINCT ON (c.car) c.src_seq, c.car
FROM {{classified}} c JOIN {{stage}} s ON s.src_seq = c.src_seq
WHERE c.verdict = 'ok'
ORDER BY c.car, etl.parse_date(s.dat_atuali) DESC NULLS LAST, c.src_seq DESC
