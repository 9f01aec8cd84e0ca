// The API over a real streaming replica (DATABASE_READ_URL; ARCHITECTURE "Scale beyond one
// machine"): a private primary cluster, a standby made from it with pg_basebackup, the API
// reading live data from the standby while keys, metering and history stay on the primary,
// and /v1/health reporting the standby's lag and the publishes it has not replayed yet. Replay
// is paused on the standby to hold it behind a publish, then resumed.
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { findPipeline } from '../pipelines/registry.ts';
import { buildServer, createApiPool, type ApiServer } from '../src/api/server.ts';
import { startApi } from '../src/cli/api-commands.ts';
import { runChecks } from '../src/cli/doctor.ts';
import { loadConfig, type Config } from '../src/config.ts';
import { databaseUrl } from '../src/db/cluster.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool } from '../src/db/pool.ts';
import { runPipeline } from '../src/etl/run.ts';
import { createLogger } from '../src/log.ts';
import { createKey } from '../src/platform/keys.ts';
import { call } from './helpers/api.ts';
import { HEALTH_REUSE_MS } from '../src/api/meta/routes.ts';
import { startReplicaPair, type ReplicaPair } from './helpers/replica.ts';

const ROOT = path.resolve(__dirname, '..');
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';

let pair: ReplicaPair;
let dir: string;
let cfg: Config;
let primary: ReplicaPair['primary'];
let standbyUrl: string;
let primaryPool: pg.Pool;
let standbyAdmin: pg.Pool;
let apiPool: pg.Pool;
let readPool: pg.Pool;
let app: ApiServer;
let base: string;
const log = createLogger('silent');

beforeAll(async () => {
  pair = await startReplicaPair({ prefix: 'agro-replica-', prepare: async (p) => {
    primaryPool = createPool(p.url, 4);
    await migrate(primaryPool);
  } });
  ({ dir, cfg, primary, standbyUrl } = pair);
  standbyAdmin = createPool(standbyUrl, 2);

  apiPool = createApiPool(cfg, primary.url);
  readPool = createApiPool(cfg, standbyUrl);
  app = await buildServer({ cfg, pool: apiPool, readPool, log });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}, 240_000);

afterAll(async () => {
  await app?.close();
  await Promise.all([apiPool, readPool, primaryPool, standbyAdmin].map((p) => p?.end()));
  await pair?.close();
}, 120_000);

let lastHealth = 0;
/** A fresh /v1/health answer: one answer serves every request for HEALTH_REUSE_MS. */
async function health() {
  await new Promise((r) => setTimeout(r, Math.max(0, lastHealth + HEALTH_REUSE_MS + 10 - performance.now())));
  lastHealth = performance.now();
  const r = await call(base, '/v1/health');
  expect(r.status, r.text).toBe(200);
  return r.body;
}

/** Waits until the standby has replayed everything the primary wrote; that health answer. */
// (the primary's own background work, autovacuum, writes WAL now and then: a later answer may lag again)
async function caughtUp() {
  for (let i = 0; i < 300; i++) {
    const h = await health();
    if (h.replica.lag_bytes === 0 && h.replica.pending_publishes.length === 0) return h;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the standby did not catch up in 30 s');
}

test('live data is read from the standby; keys and history from the primary; /v1/health reports the lag and the publishes not yet replayed', async () => {
  const h0 = await caughtUp();
  expect(h0.replica).toEqual({ reachable: true, in_recovery: true, lag_bytes: 0, lag_seconds: 0, pending_publishes: [] });
  expect(h0.datasets).toEqual([]);
  // the OpenAPI document describes the replica's block
  const doc = (await call(base, '/v1/openapi.json')).body;
  expect(Object.keys(doc.paths['/v1/health'].get.responses['200'].content['application/json'].schema.properties.replica.properties).sort())
    .toEqual(['in_recovery', 'lag_bytes', 'lag_seconds', 'pending_publishes', 'reachable']);

  // Replay held: what the primary writes from now on is not on the standby.
  await standbyAdmin.query('SELECT pg_wal_replay_pause()');
  // A key made now exists only on the primary, and it works: keys are read there.
  const { key } = await createKey(primaryPool, { env: 'live', plan: 'enterprise', name: 'replica' });
  const o = await runPipeline({ cfg, pool: primaryPool, log }, findPipeline('sicar')!, { source: path.join(ROOT, 'fixtures/sicar/GO'), uf: 'GO' });
  expect(o.status).toBe('published');

  // Published on the primary, not yet replayed: the API serves the standby's state (no GO yet).
  const behind = await call(base, `/v1/car/${GO1}`, { key });
  expect(behind.status, behind.text).toBe(503);
  expect(behind.body.error).toMatchObject({ code: 'upstream_unavailable', message: 'no published SICAR snapshot for GO' });
  const h1 = await health();
  expect(h1.replica.in_recovery).toBe(true);
  expect(h1.replica.lag_bytes).toBeGreaterThan(0);
  // how long that publish has waited to be visible: from its publication on the primary
  const publishedAt = (await primaryPool.query(`SELECT published_at FROM serving.snapshots WHERE snapshot_id = $1`, [o.snapshot_id])).rows[0].published_at as Date;
  const before = Date.now();
  await new Promise((r) => setTimeout(r, 300));
  const h1b = await health();
  expect(h1b.replica.lag_seconds).toBeGreaterThanOrEqual(Math.floor((before - publishedAt.getTime()) / 100) / 10);
  expect(h1b.replica.lag_seconds).toBeLessThanOrEqual((Date.now() - publishedAt.getTime()) / 1000 + 0.1);
  expect(h1.replica.pending_publishes).toEqual([{ dataset: 'sicar', uf: 'GO', snapshot_id: o.snapshot_id }]);
  expect(h1.datasets.some((d: { dataset: string }) => d.dataset === 'sicar')).toBe(false);

  // Replayed: the publish is visible, the lag gone.
  await standbyAdmin.query('SELECT pg_wal_replay_resume()');
  const h2 = await caughtUp();
  expect(h2.replica.lag_seconds).toBe(0);
  expect(h2.datasets).toEqual([expect.objectContaining({ dataset: 'sicar', uf: 'GO', snapshot_id: o.snapshot_id })]);
  const served = await call(base, `/v1/car/${GO1}`, { key });
  expect(served.status, served.text).toBe(200);
  expect(served.body.car).toBe(GO1);
  // the history is written on the primary (the standby is read-only) and read there
  for (let i = 0; ; i++) {
    const hist = await call(base, '/v1/car/history', { key });
    expect(hist.status, hist.text).toBe(200);
    if (JSON.stringify(hist.body.results).includes(GO1)) break;
    if (i === 100) throw new Error(`no history entry for ${GO1}: ${hist.text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 240_000);

test('agro serve reads DATABASE_READ_URL once, at start-up: its API reads the data from that standby', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dir, DATABASE_URL: primary.url, DATABASE_READ_URL: standbyUrl };
  const served = await startApi(loadConfig(env, ROOT), { port: 0, host: '127.0.0.1' });
  try {
    const h = await call(served.url, '/v1/health');
    expect(h.status, h.text).toBe(200);
    expect(h.body.replica).toMatchObject({ reachable: true, in_recovery: true });
  } finally {
    await served.stop();
  }
  // without it, no replica block: the primary serves everything
  const plain = await startApi(loadConfig({ ...env, DATABASE_READ_URL: '' }, ROOT), { port: 0, host: '127.0.0.1' });
  try {
    expect((await call(plain.url, '/v1/health')).body.replica).toBeUndefined();
  } finally {
    await plain.stop();
  }
}, 60_000);

test('agro doctor checks DATABASE_READ_URL: a standby of the primary, the primary itself (not a standby), another server', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dir, DATABASE_URL: primary.url };
  const replicaCheck = async (readUrl: string) => (await runChecks(loadConfig({ ...env, DATABASE_READ_URL: readUrl }, ROOT))).find((c) => c.name === 'read replica');
  expect(await replicaCheck(standbyUrl)).toMatchObject({ status: 'ok' });
  expect(await replicaCheck(primary.url)).toMatchObject({ status: 'warn', detail: expect.stringMatching(/not a standby/) });
  // the shared test cluster: another server altogether
  expect(await replicaCheck(databaseUrl(loadConfig()))).toMatchObject({ status: 'fail', detail: expect.stringMatching(/not a replica of the DATABASE_URL server/) });
  expect((await runChecks(loadConfig({ ...env, DATABASE_READ_URL: '' }, ROOT))).some((c) => c.name === 'read replica')).toBe(false);
}, 60_000);

test("a run alive on the primary is running on the standby too: advisory locks are not replicated, so the standby cannot tell a dead run (serving.source_runs)", async () => {
  // The alive lock (src/etl/run-locks.ts) is held by a session of the primary; the standby's
  // pg_locks never shows it. The view said `dead` there for every run under way.
  const holder = await primaryPool.connect();
  try {
    const runId = Number((await holder.query(`INSERT INTO etl.runs (pipeline, scope) VALUES ('ibama-embargos', '') RETURNING run_id`)).rows[0].run_id);
    await holder.query('SELECT pg_advisory_lock(727001, $1)', [runId]);
    const lastStatus = async (db: pg.Pool) =>
      (await db.query(`SELECT last_status FROM serving.source_runs WHERE dataset = 'ibama-embargos'`)).rows[0]?.last_status;
    expect(await lastStatus(primaryPool)).toBe('running');
    await caughtUp();
    for (let i = 0; (await lastStatus(standbyAdmin)) === undefined; i++) {
      if (i === 100) throw new Error('the run row never reached the standby');
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await lastStatus(standbyAdmin)).toBe('running');
    await holder.query('SELECT pg_advisory_unlock(727001, $1)', [runId]);
    expect(await lastStatus(primaryPool)).toBe('dead');
    await holder.query(`DELETE FROM etl.runs WHERE run_id = $1`, [runId]);
  } finally {
    holder.release();
  }
}, 120_000);

test('a standby that stops answering: /v1/health and data requests answer a 503 envelope, keys still work on the primary', async () => {
  const { key } = await createKey(primaryPool, { env: 'live', plan: 'enterprise', name: 'replica-down' });
  pair.stopStandby();
  await new Promise((r) => setTimeout(r, HEALTH_REUSE_MS + 10)); // an earlier answer no longer serves
  const h = await call(base, '/v1/health');
  expect(h.status, h.text).toBe(503);
  expect(h.body.error).toMatchObject({ code: 'upstream_unavailable', message: 'the database is unreachable; retry later' });
  const r = await call(base, `/v1/car/${GO1}`, { key });
  expect(r.status, r.text).toBe(503);
  expect(r.body.error).toMatchObject({ code: 'upstream_unavailable', message: 'the database is unreachable; retry later' });
  const doctor = (await runChecks(loadConfig({ ...process.env, AGRO_DATA_DIR: dir, DATABASE_URL: primary.url, DATABASE_READ_URL: standbyUrl }, ROOT))).find((c) => c.name === 'read replica');
  expect(doctor).toMatchObject({ status: 'fail', detail: expect.stringMatching(/DATABASE_READ_URL is unreachable/) });
  // a bad key is still refused by the primary, not a 503
  expect((await call(base, `/v1/car/${GO1}`, { key: key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a') })).status).toBe(401);
}, 120_000);

