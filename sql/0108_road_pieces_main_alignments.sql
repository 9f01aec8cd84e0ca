-- The road distance now measures to main alignments that exist (pipelines/dnit-snv: tipo_trecho
-- 'B', no planned segment; migration 0103). Road pieces are cut once per SNV snapshot with the
-- overlay's filter (src/etl/overlaps.ts linePieces) and reused, and a pair once computed is
-- never computed again: on a database loaded before, every CAR state would go on measuring to
-- variants and planned roads until the next SNV version. So the pieces go (cut again on
-- demand) and the road pairs are forgotten: the next derive computes them again, and the rows
-- computed before stay served until it replaces them (finishPair). A change of an overlay's
-- filter needs the same.
DO $$
DECLARE t record;
BEGIN
  FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'snap' AND tablename LIKE 'dnit\_snv\_sub\_\_s%' LOOP
    EXECUTE format('DROP TABLE IF EXISTS snap.%I', t.tablename);
  END LOOP;
END
$$;
DELETE FROM derived.overlap_pairs WHERE camada = 'rodovia';
