-- Counts over every typed row (before deduplication) that only ZARC reports.
SELECT coalesce(sum(t.invalid_cells), 0)::integer AS invalid_cells,
       count(*) FILTER (WHERE t.invalid_cells > 0)::integer AS invalid_rows,
       count(*) FILTER (WHERE t.bad_code)::integer AS bad_code,
       count(*) FILTER (WHERE t.replacement_char)::integer AS replacement_char,
       count(*) FILTER (WHERE t.uf_mismatch)::integer AS uf_mismatch
FROM {{classified}} t
