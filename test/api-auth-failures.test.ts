// Failed authentications are limited per client address before any database work (security
// audit): an unknown well-formed key, a panel sign-in or session that matches nothing and an
// open GET /metrics each cost a query. Over the limit the answer is a 429 rate_limited with
// Retry-After, even while a second connection holds platform.api_keys locked (the lookup would
// wait on it: the refusal reads nothing). Successful requests never count; a key already
// checked and cached keeps working from a refused address.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { addressBucket, FailureLimiter } from '../src/platform/auth-failures.ts';
import { generateKey } from '../src/platform/keys.ts';
import { call, expectEnvelope, newKey, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const LIMIT = 5;
let db: TestDb;
let api: Running;

beforeAll(async () => {
  db = await testDatabase();
  const cfg = loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_API_AUTH_FAILURES_PER_MINUTE: String(LIMIT) });
  api = await startApi(cfg, db.url, db);
}, 120_000);

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

/** Runs `fn` while a second connection holds platform.api_keys and platform.panel_sessions in ACCESS EXCLUSIVE mode. */
async function withKeysLocked<T>(fn: () => Promise<T>): Promise<T> {
  const holder = new pg.Client({ connectionString: db.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE platform.api_keys, platform.panel_sessions IN ACCESS EXCLUSIVE MODE');
    return await fn();
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
}

const within = <T>(p: Promise<T>, ms = 3_000): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms (waiting on the database?)`)), ms))]);

/** The panel's refusal: the sign-in page (a browser is there), with the same status, message and Retry-After. */
function expectRefusedPage(r: Awaited<ReturnType<typeof call>>) {
  expect(r.status).toBe(429);
  expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(r.text).toMatch(/failed authentications/);
  expect(r.text).toContain('name="api_key"');
  const retry = Number(r.headers.get('retry-after'));
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
}

function expectRefused(r: Awaited<ReturnType<typeof call>>) {
  const e = expectEnvelope(r, 429, 'rate_limited');
  expect(e.message).toMatch(/failed authentications/);
  const retry = Number(r.headers.get('retry-after'));
  expect(retry).toBeGreaterThanOrEqual(1);
  expect(retry).toBeLessThanOrEqual(60);
}

describe('API keys', () => {
  test('unknown well-formed keys: 401 up to the limit, then 429 with Retry-After before the key lookup; a cached valid key still passes', async () => {
    const good = await newKey(db);
    // Successes never count, however many.
    for (let i = 0; i < LIMIT * 3; i++) expect((await call(api.base, '/v1/car/history?limit=1', { key: good })).status).toBe(200);
    for (let i = 0; i < LIMIT; i++) expectEnvelope(await call(api.base, '/v1/car/history', { key: generateKey('live') }), 401, 'unauthorized');
    await withKeysLocked(async () => {
      expectRefused(await within(call(api.base, '/v1/car/history', { key: generateKey('live') })));
      // The cached key needs no read: a customer sharing the address keeps working.
      expect((await within(call(api.base, '/v1/car/history?limit=1', { key: good }))).status).toBe(200);
    });
    // A key this server has not checked yet is refused too while the address is over (it would cost a read).
    expectRefused(await call(api.base, '/v1/car/history', { key: await newKey(db) }));
  });
});

describe('panel and /metrics (each on its own server: one address, one count)', () => {
  let other: Running;
  afterAll(async () => other?.close());

  test('failed panel sign-ins and unknown session cookies: 401 up to the limit, then 429 before the lookup', async () => {
    other = await startApi(loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_API_AUTH_FAILURES_PER_MINUTE: String(LIMIT) }), db.url, db);
    const login = (key: string) => fetch(`${other.base}/panel/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `api_key=${key}`, redirect: 'manual' });
    const good = await newKey(db);
    expect((await login(good)).status).toBe(303); // a success does not count
    for (let i = 0; i < LIMIT - 1; i++) expect((await login(generateKey('live'))).status).toBe(401);
    expect((await fetch(`${other.base}/panel`, { headers: { cookie: 'agro_panel=nosuchsession' } })).status).toBe(200); // the sign-in page: the 5th failure
    await withKeysLocked(async () => {
      const r = await within(login(generateKey('live')));
      expectRefusedPage({ status: r.status, headers: r.headers, body: null, text: await r.text() });
      expectRefusedPage(await within(call(other.base, '/panel', { headers: { cookie: 'agro_panel=nosuchsession' } })));
    });
  });

  test('an open GET /metrics counts every scrape; a wrong token counts when one is set', async () => {
    const open = await startApi(loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_API_AUTH_FAILURES_PER_MINUTE: String(LIMIT) }), db.url, db);
    const closed = await startApi(loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_API_AUTH_FAILURES_PER_MINUTE: String(LIMIT), AGRO_METRICS_TOKEN: 'secret' }), db.url, db);
    try {
      for (let i = 0; i < LIMIT; i++) expect((await call(open.base, '/metrics')).status).toBe(200);
      expectRefused(await call(open.base, '/metrics'));
      for (let i = 0; i < LIMIT * 2; i++) expect((await call(closed.base, '/metrics', { headers: { authorization: 'Bearer secret' } })).status).toBe(200);
      for (let i = 0; i < LIMIT; i++) expectEnvelope(await call(closed.base, '/metrics', { headers: { authorization: 'Bearer guess' } }), 401, 'unauthorized');
      expectRefused(await call(closed.base, '/metrics', { headers: { authorization: 'Bearer guess' } }));
    } finally {
      await open.close();
      await closed.close();
    }
  });
});

describe('the table', () => {
  test('bounded under a flood of distinct addresses; expired windows make room first', () => {
    let now = 0;
    const l = new FailureLimiter(3, 100, () => now);
    for (let i = 0; i < 100_000; i++) l.fail(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(l.size).toBe(100);
    // The newest addresses are kept (the oldest evicted): one still over its limit is refused.
    for (let i = 0; i < 3; i++) l.fail('192.0.2.1');
    expect(l.retryAfter('192.0.2.1')).toBe(60);
    now += 30_000;
    expect(l.retryAfter('192.0.2.1')).toBe(30);
    now += 30_000;
    expect(l.retryAfter('192.0.2.1')).toBe(0); // its minute is over
    l.fail('192.0.2.2');
    expect(l.size).toBe(1); // every expired window went
  });

  test('an IPv6 client is counted by its /64; an IPv4-mapped address as the IPv4 one', () => {
    expect(addressBucket('2001:db8:0:1::1')).toBe(addressBucket('2001:0db8:0000:0001:ffff:ffff:ffff:ffff'));
    expect(addressBucket('2001:db8:0:1::1')).not.toBe(addressBucket('2001:db8:0:2::1'));
    expect(addressBucket('::1')).toBe('0:0:0:0::/64');
    expect(addressBucket('::ffff:127.0.0.1')).toBe('127.0.0.1');
    const l = new FailureLimiter(2, 100);
    l.fail('2001:db8::1');
    l.fail('2001:db8::2');
    expect(l.retryAfter('2001:db8::3')).toBeGreaterThan(0);
    expect(l.retryAfter('2001:db9::1')).toBe(0);
  });
});
