// A query on a hot standby that conflicts with what the standby replays (a publish's
// CREATE OR REPLACE VIEW or retention's DROP TABLE take an ACCESS EXCLUSIVE lock; vacuum
// removes rows an old snapshot still sees) is cancelled by the standby with SQLSTATE 40001
// "canceling statement due to conflict with recovery", immediately once replay is more than
// max_standby_streaming_delay behind (a nightly load's WAL). With DATABASE_READ_URL the API's
// data queries run there: that cancellation is transient, a 503 upstream_unavailable with
// Retry-After (contract §4), not a 500 internal_error logged as a bug.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { toFailure } from '../src/api/errors.ts';
import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster, freePort } from '../src/db/cluster.ts';
import { createPool } from '../src/db/pool.ts';

const BIN = '/usr/lib/postgresql/15/bin';
const ROOT = path.resolve(__dirname, '..');
const asServer = (bin: string, args: string[]) =>
  process.getuid?.() === 0 ? execFileSync('runuser', ['-u', 'postgres', '--', path.join(BIN, bin), ...args], { cwd: '/', stdio: 'pipe' }) : execFileSync(path.join(BIN, bin), args, { stdio: 'pipe' });

let dir: string;
let primary: EmbeddedCluster;
let standbyDir: string;
let primaryPool: pg.Pool;
let standbyPool: pg.Pool;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-conflict-'));
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dir, AGRO_DB_PORT: String(await freePort()) };
  delete env.DATABASE_URL;
  primary = new EmbeddedCluster(loadConfig(env, ROOT));
  await primary.start();
  primaryPool = createPool(primary.url, 2);
  standbyDir = path.join(dir, 'standby');
  fs.mkdirSync(standbyDir, { mode: 0o700 });
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:postgres', standbyDir]);
  asServer('pg_basebackup', ['-D', standbyDir, '-R', '-X', 'stream', '-c', 'fast', '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'agro']);
  const port = await freePort();
  // delay 0: the standby cancels a conflicting query at once (as it does when replay is already behind)
  asServer('pg_ctl', ['-D', standbyDir, '-l', path.join(standbyDir, 'standby.log'), '-w', '-t', '120', '-o', `-p ${port} -k ${standbyDir} -c listen_addresses=127.0.0.1 -c max_standby_streaming_delay=0`, 'start']);
  standbyPool = createPool(`postgres://agro@127.0.0.1:${port}/agro`, 3);
}, 240_000);

afterAll(async () => {
  await Promise.all([primaryPool, standbyPool].map((p) => p?.end()));
  try {
    asServer('pg_ctl', ['-D', standbyDir, '-w', '-m', 'immediate', 'stop']);
  } catch {
    /* not started */
  }
  await primary?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
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
