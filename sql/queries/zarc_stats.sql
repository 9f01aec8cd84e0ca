-- Counts over every typed row (before deduplication) that only ZARC reports.
SELECT count(*) FILTER (WHERE t.replacement_char)::integer AS replacement_char,
       count(*) FILTER (WHERE t.uf_mismatch)::integer AS uf_mismatch
FROM {{classified}} t
