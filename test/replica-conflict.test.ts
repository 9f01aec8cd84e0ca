// A query on a hot standby that conflicts with what the standby replays (a publish's
// CREATE OR REPLACE VIEW or retention's DROP TABLE take an ACCESS EXCLUSIVE lock; vacuum
// removes rows an old snapshot still sees) is cancelled by the standby with SQLSTATE 40001
// "canceling statement due to conflict with recovery", immediately once replay is more than
// max_standby_streaming_delay behind (a nightly load's WAL). With DATABASE_READ_URL the API's
// data queries run there: that cancellation is transient, a 503 upstream_unavailable with
// Retry-After (contract §4), not a 500 internal_error logged as a bug.
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { toFailure } from '../src/api/errors.ts';
import { createPool } from '../src/db/pool.ts';
import { startReplicaPair, type ReplicaPair } from './helpers/replica.ts';

let pair: ReplicaPair;
let primaryPool: pg.Pool;
let standbyPool: pg.Pool;

beforeAll(async () => {
  // delay 0: the standby cancels a conflicting query at once (as it does when replay is already behind)
  pair = await startReplicaPair({ prefix: 'agro-conflict-', standbySettings: ['max_standby_streaming_delay=0'] });
  primaryPool = createPool(pair.primary.url, 2);
  standbyPool = createPool(pair.standbyUrl, 3);
}, 240_000);

afterAll(async () => {
  await Promise.all([primaryPool, standbyPool].map((p) => p?.end()));
  await pair?.close();
}, 120_000);

test('a standby query cancelled by a conflict with recovery is a 503 upstream_unavailable with Retry-After, not a 500', async () => {
  await primaryPool.query('CREATE TABLE public.conflict_probe (x int); INSERT INTO public.conflict_probe VALUES (1)');
  for (let i = 0; ; i++) {
    if ((await standbyPool.query(`SELECT to_regclass('public.conflict_probe') AS t`)).rows[0].t) break;
    if (i === 300) throw new Error('the standby did not replay the table in 30 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  // a reader on the standby holds its ACCESS SHARE lock for a while (a slow API query)
  const reader = standbyPool.query('SELECT pg_sleep(30) FROM public.conflict_probe').then(() => null, (e: unknown) => e);
  for (let i = 0; ; i++) {
    const held = await standbyPool.query(`SELECT 1 FROM pg_locks WHERE relation = 'public.conflict_probe'::regclass AND granted AND pid <> pg_backend_pid()`);
    if (held.rowCount) break;
    if (i === 100) throw new Error('the reader did not take its lock');
    await new Promise((r) => setTimeout(r, 50));
  }
  // what a publish or retention does on the primary: an ACCESS EXCLUSIVE lock, replayed on the standby
  await primaryPool.query('DROP TABLE public.conflict_probe');
  const err = (await reader) as { code?: string; message?: string } | null;
  expect(err, 'the standby should have cancelled the reader').not.toBeNull();
  expect(err!.code).toBe('40001');
  expect(err!.message).toMatch(/conflict with recovery/);

  const f = toFailure(err);
  expect(f).toMatchObject({ status: 503, code: 'upstream_unavailable', unexpected: false });
  expect(f.headers['retry-after']).toBeDefined();
}, 120_000);
