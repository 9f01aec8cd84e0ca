-- Whether a document cell holds something written: a letter or a digit. A cell of spaces of
-- any kind or of marks only ('-', '.': a hand-written "none") is blank, counted `ausente`;
-- 'n/d' is written, no document, counted `outro`. One rule for IBAMA's and ICMBio's typed
-- passes, beside etl.ibama_documento_completado (each had its own copy of the expression).
CREATE FUNCTION etl.ibama_documento_escrito(t text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT coalesce(t ~ '[[:alnum:]]', false) $$;
