// The long-running processes when PostgreSQL goes away and comes back, on a PRIVATE embedded
// cluster (its own data folder and port; the shared cluster is never stopped): `agro serve`
// (answers, the key cache's LISTEN, metering), `agro schedule` (a fire time during the outage)
// and the webhook drainer. test/private-cluster.test.ts (C.5) covers a run during normalise.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';

import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster } from '../src/db/cluster.ts';
import { createPool } from '../src/db/pool.ts';
import { createLogger } from '../src/log.ts';
import { KeyCache } from '../src/platform/key-cache.ts';
import { addEndpoint } from '../src/events/endpoints.ts';
import { sendTestEvent } from '../src/events/delivery.ts';
import { ACTIVE_KEY_SQL, createKey } from '../src/platform/keys.ts';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin/agro.mjs');
let dataDir: string;
let pool: pg.Pool;

function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'info', AGRO_WEBHOOKS_ALLOW_PRIVATE: '1', AGRO_WEBHOOKS_POLL_MS: '200', ...extra };
  delete env.DATABASE_URL; // the embedded (private) cluster, not the shared one
  delete env.DATABASE_READ_URL;
  delete env.AGRO_DB_PORT;
  return env;
}
function agro(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { env: baseEnv(), encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const cluster = () => new EmbeddedCluster(loadConfig({ AGRO_DATA_DIR: dataDir }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Children started here: a failed test must not leave one running. */
const started = new Set<ChildProcess>();
afterEach(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  started.clear();
});

/** A real `agro <args>`; `ready` resolves with the first match of `readyOn` in its stdout. */
function startAgro(args: string[], readyOn: RegExp = /$^/, extra: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { env: baseEnv(extra), stdio: ['ignore', 'pipe', 'pipe'] });
  started.add(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const ready = new Promise<RegExpMatchArray>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(readyOn);
      if (m) resolve(m);
    });
    void exited.then((code) => reject(new Error(`agro ${args.join(' ')} exited ${code}: ${err.slice(-2000)}`)));
  });
  ready.catch(() => {}); // awaited by the tests that wait for it
  return { child, ready, exited, stdout: () => out, stderr: () => err };
}

async function stopAgro(p: { child: ChildProcess; exited: Promise<number | null> }): Promise<number | null> {
  p.child.kill('SIGTERM');
  return Promise.race([p.exited, sleep(30_000).then(() => 'hung' as const)]) as Promise<number | null>;
}

/** A GET that must answer within 15 s (a hang fails the test). */
async function get(base: string, p: string, key?: string) {
  const r = await fetch(base + p, { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(15_000) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, body: (() => { try { return JSON.parse(text); } catch { return null; } })() };
}

async function until<T>(what: string, fn: () => Promise<T | null | undefined | false>, ms = 20_000, every = 100): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms${last ? ` (${(last as Error).message})` : ''}`);
    await sleep(every);
  }
}

beforeAll(async () => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-db-away-'));
  const s = agro(['db', 'start', '--json']);
  expect(s.code, s.stderr).toBe(0);
  const m = agro(['migrate', '--json']);
  expect(m.code, m.stderr).toBe(0);
  pool = createPool(cluster().url, 4);
}, 240_000);
afterAll(async () => {
  await pool?.end().catch(() => {});
  if (dataDir) {
    await cluster().stop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

/** Stops the private cluster, runs `meanwhile`, starts it again. */
async function outage(meanwhile: () => Promise<void> = async () => {}): Promise<void> {
  expect((await cluster().stop()).running).toBe(false);
  try {
    await meanwhile();
  } finally {
    expect((await cluster().start()).running).toBe(true);
  }
}

describe('agro serve across a database restart', () => {
  test('while the database is down: 503 upstream_unavailable envelopes, never a hang or a crash; the same process answers 200 after', async () => {
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const s = startAgro(['serve', '--port', '0', '--json'], /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
    const base = (await s.ready)[1];
    expect((await get(base, '/v1/sources', k.key)).status).toBe(200);
    await outage(async () => {
      for (const [p, key] of [['/v1/health', undefined], ['/v1/sources', k.key], ['/v1/car/MT-5107925-0123456789ABCDEF0123456789ABCDEF', k.key], ['/v1/car/history', k.key]] as const) {
        const r = await get(base, p, key);
        expect(r.status, `${p}: ${r.text}`).toBe(503);
        expect(r.headers.get('content-type')).toMatch(/^application\/json/);
        expect(r.headers.get('retry-after')).toBe('5');
        expect(r.body.error).toMatchObject({ code: 'upstream_unavailable', request_id: r.headers.get('x-request-id') });
      }
      expect(s.child.exitCode).toBeNull();
    });
    await until('200 again', async () => (await get(base, '/v1/sources', k.key)).status === 200);
    // /v1/health reuses one answer for a second (HEALTH_REUSE_MS): the outage's may still be served.
    await until('health 200 again', async () => (await get(base, '/v1/health')).status === 200, 5_000);
    // Refused during the outage: nothing counted, nothing billed (admission is before any work).
    await s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    const used = await pool.query(`SELECT coalesce(sum(used), 0)::int AS n FROM platform.usage_months WHERE key_id = $1`, [k.id]);
    expect(used.rows[0].n).toBe(0);
    expect(s.stderr()).not.toMatch(/\n\s+at |Unhandled|uncaught/i);
  }, 90_000);

  test('the key cache listens again after the restart: a key revoked by plain SQL is refused within a second', async () => {
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const s = startAgro(['serve', '--port', '0', '--json'], /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
    const base = (await s.ready)[1];
    const listening = async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'agro-api-keys' AND query ILIKE 'LISTEN%'`)).rowCount === 1;
    await until('the key cache listens', listening);
    await outage(async () => {
      // Longer than the first retry: the listener reconnects over an outage of several attempts.
      await sleep(6_000);
    });
    await until('200 again', async () => (await get(base, '/v1/sources', k.key)).status === 200);
    await until('the key cache listens again', listening, 20_000);
    // Cached now (a second hit of the same key), then revoked by SQL: refused at once.
    expect((await get(base, '/v1/sources', k.key)).status).toBe(200);
    expect((await get(base, '/v1/sources', k.key)).status).toBe(200);
    await pool.query(`UPDATE platform.api_keys SET revoked_at = now() WHERE id = $1`, [k.id]);
    const t0 = Date.now();
    await until('refused', async () => (await get(base, '/v1/sources', k.key)).status === 401, 5_000, 50);
    expect(Date.now() - t0).toBeLessThan(1_000);
    await stopAgro(s);
  }, 90_000);
});

/**
 * A TCP proxy to the cluster whose server-to-client bytes wait while it is held: a connection
 * being opened, or a query's answer, is held back until release().
 */
async function holdingProxy(target: number) {
  let held = false;
  const upstreams = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const up = net.connect(target, '127.0.0.1');
    upstreams.add(up);
    client.pipe(up);
    up.pipe(client);
    if (held) up.pause(); // after pipe(), which resumes its source
    const close = () => {
      upstreams.delete(up);
      client.destroy();
      up.destroy();
    };
    client.on('error', close).on('close', close);
    up.on('error', close).on('close', close);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `postgres://agro@127.0.0.1:${(server.address() as net.AddressInfo).port}/agro`,
    hold: () => {
      held = true;
      for (const u of upstreams) u.pause();
    },
    release: () => {
      held = false;
      for (const u of upstreams) u.resume();
    },
    close: () => new Promise((r) => {
      for (const u of upstreams) u.destroy();
      server.close(r);
    }),
  };
}

describe('the key cache while it is not listening', () => {
  test('a key read before the listener came back, revoked before it listened, is not cached once it listens', async () => {
    const port = cluster().port;
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const listenerProxy = await holdingProxy(port);
    const readProxy = await holdingProxy(port);
    listenerProxy.hold(); // the listener's connection cannot open yet (the database coming back)
    const cache = new KeyCache({ connectionString: listenerProxy.url, application_name: 'agro-api-keys-race' }, createLogger('silent'));
    const reads = createPool(readProxy.url, 1);
    try {
      cache.start();
      await reads.query('SELECT 1');
      readProxy.hold();
      // A request's key check: its SELECT runs (the key active), its answer held back.
      const found = cache.find(reads, k.key);
      await until('the key read ran', async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE state = 'idle' AND query = $1`, [ACTIVE_KEY_SQL])).rowCount === 1, 10_000);
      // Revoked now: no listener, no notification reaches this cache.
      await pool.query(`UPDATE platform.api_keys SET revoked_at = now() WHERE id = $1`, [k.id]);
      listenerProxy.release();
      await until('the cache listens', async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'agro-api-keys-race' AND query ILIKE 'LISTEN%'`)).rowCount === 1, 10_000);
      await sleep(300); // the LISTEN's answer reaches the cache: it is live
      readProxy.release();
      expect(await found).not.toBeNull(); // read before the revocation
      // Before: the read's answer was cached as it came after the cache went live, and the revoked
      // key was served from the cache for its TTL (60 s).
      expect(cache.cached(k.key)).toBeNull();
      expect(await cache.find(pool, k.key)).toBeNull();
    } finally {
      await cache.stop();
      await reads.end().catch(() => {});
      await listenerProxy.close();
      await readProxy.close();
    }
  }, 30_000);
});

describe('the key cache on a connection cut without a word', () => {
  test('a listening connection that stops answering (an idle connection a load balancer dropped) is found by the heartbeat: the cache goes off, a revoked key is refused', async () => {
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const proxy = await holdingProxy(cluster().port);
    const cache = new KeyCache({ connectionString: proxy.url, application_name: 'agro-api-keys-cut' }, createLogger('silent'), 60_000, 1_000);
    try {
      cache.start();
      await until('the cache listens', async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE application_name = 'agro-api-keys-cut' AND query ILIKE 'LISTEN%'`)).rowCount === 1, 10_000);
      await sleep(300);
      expect(await cache.find(pool, k.key)).not.toBeNull();
      expect(cache.cached(k.key)).not.toBeNull(); // cached
      proxy.hold(); // nothing comes back on the listening connection any more, and it does not close
      await pool.query(`UPDATE platform.api_keys SET revoked_at = now() WHERE id = $1`, [k.id]);
      // Before: no notification, no error: the revoked key served from the cache for its TTL (60 s).
      await until('the cache is off', async () => cache.cached(k.key) === null, 5_000, 100);
      expect(await cache.find(pool, k.key)).toBeNull();
    } finally {
      await cache.stop();
      await proxy.close();
    }
  }, 30_000);
});

describe('metering across a database restart', () => {
  test('a request admitted before the database went away and answered 503: its quota unit comes back once the database does (a 5xx is never billed)', async () => {
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const s = startAgro(['serve', '--port', '0', '--json'], /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
    const base = (await s.ready)[1];
    try {
      // The request is admitted (a unit reserved), then waits on a lock while the database stops.
      const locker = await pool.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE serving.snapshots IN ACCESS EXCLUSIVE MODE');
      const answer = get(base, '/v1/car/MT-5107925-0123456789ABCDEF0123456789ABCDEF', k.key);
      await until('the request waits on the lock', async () => (await locker.query(`SELECT 1 FROM pg_locks WHERE relation = 'serving.snapshots'::regclass AND NOT granted`)).rowCount === 1, 10_000);
      const used = async () => (await pool.query(`SELECT coalesce(sum(used), 0)::int AS n FROM platform.usage_months WHERE key_id = $1`, [k.id])).rows[0].n;
      expect(await used()).toBe(1);
      let r!: Awaited<typeof answer>;
      await outage(async () => {
        r = await answer;
      });
      locker.release(true);
      expect(r.status, r.text).toBe(503);
      expect(r.body.error.code).toBe('upstream_unavailable');
      // Before: the refund failed with the database and the unit stayed used: a 503 billed.
      await until('the unit refunded', async () => (await used()) === 0, 15_000, 200);
      expect(s.child.exitCode).toBeNull();
    } finally {
      await stopAgro(s);
    }
  }, 60_000);
});

describe('agro schedule across a database restart', () => {
  test('a fire time that comes while the database is down runs once it is back; the scheduler stays up', async () => {
    const file = path.join(dataDir, 'every-minute.json');
    fs.writeFileSync(file, JSON.stringify({
      timezone: 'UTC', retries: 0,
      jobs: { minutely: { cron: '* * * * *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': path.join(ROOT, 'fixtures/ibge-municipios') } } },
    }));
    const s = startAgro(['schedule'], undefined, { AGRO_SCHEDULE_FILE: file });
    await until('the scheduler started', async () => /scheduler started/.test(s.stderr()), 20_000);
    // The database goes down a few seconds before a minute's fire time and comes back after it.
    const sec = () => new Date().getUTCSeconds();
    await until('second 52 of a minute', async () => sec() >= 52 && sec() < 56, 65_000, 200);
    const slot = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
    await outage(async () => {
      await sleep(slot.getTime() + 2_000 - Date.now());
    });
    expect(s.child.exitCode).toBeNull();
    // Before: the claim failed (connection refused), was logged, and the slot was lost until the next fire time.
    const row = await until('the slot of the outage ran', async () => {
      const r = await pool.query(`SELECT status, catch_up, cardinality(run_ids) AS runs FROM etl.schedule_slots WHERE schedule = 'minutely' AND slot = $1 AND status <> 'running'`, [slot]);
      return r.rows[0];
    }, 25_000, 250);
    expect(row).toEqual({ status: 'done', catch_up: true, runs: 1 });
    expect(await stopAgro(s)).toBe(0);
    expect(s.stderr()).toMatch(/database is unreachable at a fire time: claiming it when it answers/);
  }, 120_000);
});

describe('webhook delivery across a database restart', () => {
  test('a POST under way when the database goes down is not lost (sent again, same id, once its lease ends); the drainer delivers what comes after', async () => {
    const received: { id: string; at: number }[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let arrived!: () => void;
    const first = new Promise<void>((r) => (arrived = r));
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        received.push({ id: JSON.parse(body).id, at: Date.now() });
        const answer = () => res.writeHead(200).end('ok');
        if (received.length === 1) {
          arrived();
          void held.then(answer);
        } else answer();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
    const k = await createKey(pool, { env: 'live', plan: 'scale' });
    const ep = await addEndpoint(pool, { keyId: k.id, url, events: '*', allowPrivate: true });
    const s = startAgro(['serve', '--port', '0', '--json'], /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
    try {
      await s.ready;
      const e1 = await sendTestEvent(pool, ep);
      await first;
      // The receiver holds the POST; the database goes down; the receiver then answers 200, and
      // the drainer cannot record it.
      await outage(async () => {
        release();
        await sleep(1_500);
      });
      expect(s.child.exitCode).toBeNull();
      const e2 = await sendTestEvent(pool, ep);
      await until('the event queued after the restart is delivered', async () => received.some((r) => r.id === e2), 15_000);
      const d1 = (await pool.query(`SELECT status, lease_until > now() AS leased FROM events.deliveries WHERE event_id = $1`, [e1])).rows[0];
      expect(d1).toEqual({ status: 'pending', leased: true }); // not lost: leased, tried again when the lease ends
      await pool.query(`UPDATE events.deliveries SET lease_until = now() WHERE event_id = $1`, [e1]); // the lease's end, without waiting LEASE_MS
      await until('delivered again, with the same id', async () => received.filter((r) => r.id === e1).length === 2, 15_000);
      await until('recorded delivered', async () => (await pool.query(`SELECT 1 FROM events.deliveries WHERE status = 'delivered' AND event_id = ANY ($1)`, [[e1, e2]])).rowCount === 2, 10_000);
      expect(received.filter((r) => r.id === e2)).toHaveLength(1);
    } finally {
      release();
      await stopAgro(s);
      await new Promise((r) => receiver.close(r));
    }
  }, 90_000);
});
