// SICAR's typed passes run on a second connection while the next zip is read (src/etl/
// two-connections.ts `overlapOn`). A failure there fails the run cleanly: the error is the
// typed pass's, the reader stops before the next zip, no connection is left busy, the run's
// staging tables are gone and the previous snapshot is still served. The failure is a real
// one, raised by the database: an event trigger on the typed table's CREATE TABLE AS.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest';
import { GO9, buildSicarState, carNumber } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
let changed: string;
const run = (source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source });
const current = async () => (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`)).rows[0]?.snapshot_id ?? null;
const served = async () => (await db.pool.query(`SELECT count(*)::int AS n, sum(app_ha) AS app FROM serving.car_imovel WHERE uf = 'GO'`)).rows[0];

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sicar-overlap-'));
  const first = path.join(work, 'first');
  await buildSicarState('GO', first);
  expect((await run(first)).status).toBe('published');
  // The same state with one more property: a new source, so the next run loads it.
  changed = path.join(work, 'changed');
  const go10 = { ...GO9, id: 'GO10', attributes: { ...GO9.attributes, cod_imovel: carNumber('GO', '5218805', 'GO10') } };
  await buildSicarState('GO', changed, { extraAreaImovel: [go10] });
  // Counts the theme zips whose staging began (a sequence: not rolled back with the failure).
  await db.pool.query(`
    CREATE SEQUENCE public.test_theme_reads;
    CREATE FUNCTION public.test_count_reads() RETURNS event_trigger LANGUAGE plpgsql AS $$
    DECLARE r record;
    BEGIN
      FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE command_tag = 'CREATE TABLE' LOOP
        IF r.object_identity ~ '^stage\\.r\\d+_(apps|reserva_legal|area_consolidada)$' THEN PERFORM nextval('public.test_theme_reads'); END IF;
      END LOOP;
    END $$;
    CREATE EVENT TRIGGER test_count_reads ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION public.test_count_reads();`);
});
afterEach(async () => {
  await db.pool.query(`DROP EVENT TRIGGER IF EXISTS test_fail_typed; DROP FUNCTION IF EXISTS public.test_fail_typed(); DROP SEQUENCE IF EXISTS public.test_failed`);
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

/**
 * Makes the typed pass of `input` fail while the next zip (`next`) is being read: the reader's
 * CREATE TABLE of the next staging table waits (in the database) until the typed pass has
 * failed, and the typed pass fails once that CREATE TABLE is under way. A sequence carries the
 * signal across the two sessions (nextval is not rolled back).
 */
async function failTypedPass(input: string, next: string) {
  await db.pool.query(`
    CREATE SEQUENCE public.test_failed;
    CREATE FUNCTION public.test_fail_typed() RETURNS event_trigger LANGUAGE plpgsql AS $$
    DECLARE r record; waited int := 0; reading boolean := false;
    BEGIN
      FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF r.command_tag = 'CREATE TABLE AS' AND r.object_identity ~ '^stage\\.r\\d+_${input}_typed$' THEN
          WHILE NOT reading AND waited < 2000 LOOP
            PERFORM pg_stat_clear_snapshot();
            reading := EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
                                 AND query ~* 'create unlogged table \\S*_${next}\\M');
            IF NOT reading THEN PERFORM pg_sleep(0.01); waited := waited + 1; END IF;
          END LOOP;
          PERFORM nextval('public.test_failed');
          RAISE EXCEPTION 'injected failure in the typed pass of ${input} (next zip being read: %)', reading;
        ELSIF r.command_tag = 'CREATE TABLE' AND r.object_identity ~ '^stage\\.r\\d+_${next}$' THEN
          WHILE NOT (SELECT is_called FROM public.test_failed) AND waited < 2000 LOOP
            PERFORM pg_sleep(0.01); waited := waited + 1;
          END LOOP;
        END IF;
      END LOOP;
    END $$;
    CREATE EVENT TRIGGER test_fail_typed ON ddl_command_end WHEN TAG IN ('CREATE TABLE AS', 'CREATE TABLE') EXECUTE FUNCTION public.test_fail_typed();`);
}

const themeReads = async () => {
  const r = (await db.pool.query(`SELECT last_value, is_called FROM public.test_theme_reads`)).rows[0];
  return r.is_called ? Number(r.last_value) : 0;
};

async function expectCleanFailure(input: string, next: string, themesRead: number) {
  const before = { id: await current(), served: await served() };
  expect(before.id).not.toBeNull();
  const reads0 = await themeReads();
  await failTypedPass(input, next);
  const o = await run(changed);
  expect(o.status).toBe('failed');
  expect(o.error?.message).toContain(`injected failure in the typed pass of ${input} (next zip being read: t)`);
  // The read stage fails with it (the typed pass ran while reading); normalise never started.
  const stages = (await db.pool.query(`SELECT stage, status, detail->>'error' AS error FROM etl.run_stages WHERE run_id = $1 ORDER BY seq`, [o.run_id])).rows;
  expect(stages.map((s) => [s.stage, s.status])).toEqual([['download', 'done'], ['read', 'failed']]);
  expect(stages[1].error).toContain('injected failure');
  // The reader stopped after the zip it was reading: the themes after it were not read.
  expect((await themeReads()) - reads0).toBe(themesRead);
  // No connection left busy, nothing of the run left behind, the previous snapshot served.
  expect(db.pool.idleCount).toBe(db.pool.totalCount);
  const active = await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`);
  expect(active.rows[0].n).toBe(0);
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
  const snap = await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE run_id = $1`, [o.run_id]);
  for (const s of snap.rows) {
    expect(s.status).toBe('failed');
    for (const t of s.tables ?? []) expect((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r).toBeNull();
  }
  expect(await current()).toBe(before.id);
  expect(await served()).toEqual(before.served);
  expect((await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [o.run_id])).rows[0].status).toBe('failed');
}

test('a theme\'s typed pass failing while the next zip is read fails the run cleanly; the previous snapshot stays served', async () => {
  // APPS fails while RESERVA_LEGAL is read: APPS and RESERVA_LEGAL were read, AREA_CONSOLIDADA not.
  await expectCleanFailure('apps', 'reserva_legal', 2);
});

test('AREA_IMOVEL\'s typed pass failing while APPS is read fails the run cleanly', async () => {
  await expectCleanFailure('area_imovel', 'apps', 1);
});

test('the next run, without the failure, publishes the changed state', async () => {
  const before = await served();
  const o = await run(changed);
  expect([o.status, o.error]).toEqual(['published', undefined]);
  expect((await served()).n).toBe(before.n + 1);
  expect(Object.keys(o.stages)).toEqual(['download', 'read', 'normalise', 'index', 'quality', 'derive', 'publish']);
  const detail = (await db.pool.query(`SELECT detail FROM etl.run_stages WHERE run_id = $1 AND stage = 'normalise'`, [o.run_id])).rows[0].detail;
  // The ledger's timeline: each typed pass started after its zip was read, AREA_IMOVEL's before the read ended.
  const inputs: { input: string; typed_from_s: number }[] = detail.timeline.inputs;
  expect(inputs.map((i) => i.input)).toEqual(['AREA_IMOVEL', 'APPS', 'RESERVA_LEGAL', 'AREA_CONSOLIDADA']);
  expect(inputs[0].typed_from_s).toBeLessThan(detail.timeline.read_end_s);
  expect(detail.steps).toHaveProperty('typed APPS');
});
