// Upgrading in place (sql/0121). A single `agro backfill` made by a release before be17508 left
// its snapshot under retention (kept false), so the new release's next run dropped that past
// date first, while a backfill made after the upgrade is kept. The migration keeps the
// snapshots backfill runs loaded, as the backfill command now does; other snapshots (one an
// unchanged backfill named too) stay under retention. The old state: a backfill run in process (runPipeline, which does not keep) and
// the migration applied again. And an SNV snapshot whose road pieces 0108 dropped but left
// listed in its tables: unreadable (serving.snapshots_legiveis), its as-of date gone from
// /v1/sources; no longer listed, it is readable, and the pieces are cut again on demand.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { findPipeline } from '../pipelines/registry.ts';
import { readableHistory } from '../src/api/meta/sql.ts';
import { migrate } from '../src/db/migrate.ts';
import { qualifiedSnapshotTable } from '../src/etl/names.ts';
import { runPipeline } from '../src/etl/run.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
let n = 0;

beforeAll(async () => {
  db = await testDatabase({ AGRO_RETENTION: '1' });
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-backfills-kept-'));
}, 300_000);

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** IBAMA's fixture with n more blank lines: other bytes each run. */
function csv(): string {
  const f = path.join(work, `termo_embargo_${++n}.csv`);
  fs.writeFileSync(f, fs.readFileSync(path.join(ROOT_DIR, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8') + '\n'.repeat(n));
  return f;
}
const ibama = (asOf: string, backfill = false, source = csv()) =>
  runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('ibama-embargos')!, { source, asOf, backfill });
const status = async (id: number | null) => (await db.pool.query(`SELECT status, kept FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0];

test("an older release's backfill is kept by the migration and survives the next run's retention; other snapshots are not kept", async () => {
  const firstCsv = csv();
  const first = await ibama('2026-11-10', false, firstCsv);
  expect(first.status).toBe('published');
  // A backfill that found its bytes in a snapshot of another run keeps nothing of its own.
  expect(await ibama('2026-11-11', true, firstCsv)).toMatchObject({ status: 'unchanged', snapshot_id: first.snapshot_id });
  const old = await ibama('2026-11-01', true);
  expect(old.status).toBe('loaded');
  expect(await status(old.snapshot_id)).toEqual({ status: 'loaded', kept: false }); // as the older release left it

  await db.pool.query(`DELETE FROM agro_meta.migrations WHERE id = 121`);
  expect((await migrate(db.pool)).applied).toEqual(['0121_upgrade_leftovers']);
  expect(await status(old.snapshot_id)).toEqual({ status: 'loaded', kept: true });
  expect(await status(first.snapshot_id)).toEqual({ status: 'published', kept: false });

  for (const asOf of ['2026-11-12', '2026-11-13']) expect((await ibama(asOf)).status).toBe('published');
  expect(await status(old.snapshot_id)).toEqual({ status: 'loaded', kept: true }); // retention 1: only kept ones besides the current
  expect(await status(first.snapshot_id)).toEqual({ status: 'dropped', kept: false });
}, 120_000);

test("an SNV snapshot whose road pieces 0108 dropped is readable again, its date listed; the next derive cuts them again", async () => {
  const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
  const snv = await runPipeline(deps, findPipeline('dnit-snv')!, { source: path.join(ROOT_DIR, 'fixtures/dnit-snv') });
  expect(snv.status).toBe('published');
  expect((await runPipeline(deps, findPipeline('sicar')!, { source: path.join(ROOT_DIR, 'fixtures/sicar/DF'), uf: 'DF' })).status).toBe('published');
  const pieces = qualifiedSnapshotTable('dnit_snv_sub', snv.snapshot_id!);
  const listed = async () => (await db.pool.query(`SELECT $2 = ANY (tables) AS listed FROM etl.snapshots WHERE snapshot_id = $1`, [snv.snapshot_id, pieces])).rows[0].listed;
  expect(await listed()).toBe(true);
  // As 0108 left it: the pieces dropped, still listed.
  await db.pool.query(`DROP TABLE ${pieces}`);
  const dates = async () => (await readableHistory(db.pool)).filter((h) => h.dataset === 'dnit-snv').map((h) => h.as_of);
  expect(await dates()).toEqual([]);

  await db.pool.query(`DELETE FROM agro_meta.migrations WHERE id = 121`);
  expect((await migrate(db.pool)).applied).toEqual(['0121_upgrade_leftovers']);
  expect(await listed()).toBe(false);
  expect(await dates()).toEqual([snv.as_of]);
  // The next state's derive measures to the roads again, cutting the pieces (listed again).
  expect((await runPipeline(deps, findPipeline('sicar')!, { source: path.join(ROOT_DIR, 'fixtures/sicar/MT'), uf: 'MT' })).status).toBe('published');
  expect(await listed()).toBe(true);
  expect(await dates()).toEqual([snv.as_of]);
}, 120_000);
