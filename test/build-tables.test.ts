// Every table a load builds keeps autovacuum away until the build is done (sql.ts BUILD_TABLE):
// an insert-triggered vacuum on a fresh staging table held the lock of the load's next DDL for
// deadlock_timeout (1 s) once or twice a SICAR load. An event trigger in the test database
// records each table as it is created, with its storage options, while every pipeline loads
// its fixtures (and derives the overlaps); the published tables must have autovacuum back.
import { beforeAll, expect, test } from 'vitest';
import { loadFixtures } from './helpers/api.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
usesTestDatabase((d) => (db = d));

beforeAll(async () => {
  await db.pool.query(`
    CREATE TABLE public.created_tables (name text, reloptions text[], has_toast boolean, toast_reloptions text[]);
    CREATE FUNCTION public.note_created() RETURNS event_trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO public.created_tables
      SELECT d.object_identity, c.reloptions, c.reltoastrelid <> 0, (SELECT t.reloptions FROM pg_class t WHERE t.oid = c.reltoastrelid)
        FROM pg_event_trigger_ddl_commands() d JOIN pg_class c ON c.oid = d.objid
       WHERE d.object_type = 'table' AND d.command_tag IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO')
         AND d.schema_name IN ('stage', 'snap', 'derived');
    END $$;
    CREATE EVENT TRIGGER note_created ON ddl_command_end EXECUTE FUNCTION public.note_created();`);
  await loadFixtures(db);
  await db.pool.query('DROP EVENT TRIGGER note_created');
}, 180_000);

test('every staging, typed and snapshot table is created with autovacuum off', async () => {
  const rows = (await db.pool.query<{ name: string; reloptions: string[] | null; has_toast: boolean; toast_reloptions: string[] | null }>('SELECT * FROM public.created_tables')).rows;
  // the loads went through every kind of build: staged rows, typed passes, snapshots, overlap parts
  for (const kind of [/^stage\..*_typed"?$/, /^stage\."?ov_/, /^snap\."?car_imovel__s\d+/, /^snap\."?car_tema__s\d+/, /^snap\."?cnpj_estabelecimentos__s\d+/, /^snap\."?zarc_risco__s\d+/, /^snap\."?funai_tis__s\d+/])
    expect(rows.some((r) => kind.test(r.name)), String(kind)).toBe(true);
  // the road pieces (a derive's one CREATE TABLE AS, read at once) keep the server's default
  const built = rows.filter((r) => !/^snap\."?dnit_snv_sub__s\d+/.test(r.name));
  const without = built.filter((r) => !(r.reloptions ?? []).includes('autovacuum_enabled=false')).map((r) => r.name);
  expect(without).toEqual([]);
  // and their TOAST tables (the geometries and long texts are there)
  expect(built.filter((r) => r.has_toast).length).toBeGreaterThan(10);
  expect(built.filter((r) => r.has_toast && !(r.toast_reloptions ?? []).includes('autovacuum_enabled=false')).map((r) => r.name)).toEqual([]);
});

test('a loaded snapshot has autovacuum back on every one of its tables', async () => {
  const tables = (await db.pool.query<{ t: string }>(`SELECT unnest(tables) AS t FROM etl.snapshots WHERE status IN ('published', 'loaded')`)).rows.map((r) => r.t);
  expect(tables.length).toBeGreaterThan(8);
  const options = (await db.pool.query<{ t: string; heap: string[] | null; toast: string[] | null }>(
    `SELECT t, c.reloptions AS heap, (SELECT x.reloptions FROM pg_class x WHERE x.oid = c.reltoastrelid) AS toast
       FROM unnest($1::text[]) t JOIN pg_class c ON c.oid = to_regclass(t)`,
    [tables],
  )).rows;
  expect(options.length).toBe(new Set(tables).size);
  expect(options.filter((r) => [...(r.heap ?? []), ...(r.toast ?? [])].some((o) => o.startsWith('autovacuum_enabled'))).map((r) => r.t)).toEqual([]);
});
