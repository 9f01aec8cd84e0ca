// Rate limit, monthly quota, threshold events and query history (issue 10) on a real API over
// a PostGIS loaded with the fixtures: exact counts under concurrency, in one process and in
// two `agro serve` processes sharing the database.
import { describe, expect, test } from 'vitest';
import { Cursors } from '../src/api/cursor.ts';
import { createKey, rotateKey, type Plan } from '../src/platform/keys.ts';
import { purgeHistory } from '../src/platform/limits.ts';
import { usageByDay } from '../src/platform/panel-sql.ts';
import { call, expectEnvelope, fixtureApi, startApi, type Reply } from './helpers/api.ts';
import { testDatabase } from './helpers/db.ts';
import { serveProcess } from './helpers/serve.ts';

const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const JOSE_CPF = '529.982.247-25'; // owns GO1 and GO8
const MONTH = () => new Date().toISOString().slice(0, 7);

// Bursts from one key test the counts, not the per-key limit of requests in flight (test/api-key-concurrency.test.ts).
const BURSTS = { AGRO_API_KEY_MAX_IN_FLIGHT: '1000' };
const fx = fixtureApi(BURSTS);

const keyOf = async (plan: Plan, env: 'live' | 'test' = 'live') => createKey(fx.db.pool, { env, plan, name: 'limits' });

async function q<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return (await fx.db.pool.query(sql, params)).rows as T[];
}

/** Waits until at least `margin` ms remain in the current UTC minute (a burst must not straddle two windows). */
async function awayFromMinuteEnd(margin = 8_000) {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < margin) await new Promise((r) => setTimeout(r, left + 50));
}

const setUsed = (keyId: string, used: number) =>
  q(`INSERT INTO platform.usage_months (key_id, month, used) VALUES ($1, ($2 || '-01')::date, $3)
     ON CONFLICT (key_id, month) DO UPDATE SET used = EXCLUDED.used`, [keyId, MONTH(), used]);
const usedOf = async (keyId: string) => Number((await q<{ used: number }>(`SELECT used FROM platform.usage_months WHERE key_id = $1`, [keyId]))[0]?.used ?? 0);
const thresholdEvents = (keyId: string) =>
  q<{ id: string; type: string; body: Record<string, unknown> }>(`SELECT id, type, body FROM events.outbox WHERE body->'data'->>'key_id' = $1 ORDER BY (body->'data'->>'threshold')::int`, [keyId]);

function tally(rs: Reply[]) {
  const by = new Map<number, number>();
  for (const r of rs) by.set(r.status, (by.get(r.status) ?? 0) + 1);
  return Object.fromEntries(by);
}

describe('rate limit', () => {
  test('headers on every authenticated answer, errors included; none on public routes', async () => {
    const k = await keyOf('growth');
    await awayFromMinuteEnd();
    const r = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
    expect(r.status).toBe(200);
    const reset = Number(r.headers.get('x-ratelimit-reset'));
    expect(reset % 60).toBe(0);
    expect(reset - Date.now() / 1000).toBeGreaterThan(0);
    expect(reset - Date.now() / 1000).toBeLessThanOrEqual(60);
    expect(r.headers.get('x-ratelimit-limit')).toBe('60');
    expect(r.headers.get('x-ratelimit-remaining')).toBe('59');
    expect(r.headers.get('x-quota-used')).toBe('1');
    expect(r.headers.get('x-quota-limit')).toBe('100');
    expect(r.headers.get('ratelimit-policy')).toBe('"minute";q=60;w=60');
    expect(r.headers.get('ratelimit')).toMatch(/^"minute";r=59;t=([1-9]|[1-5]\d|60)$/);

    const bad = await call(fx.api.base, `/v1/car/not-a-car`, { key: k.key });
    expectEnvelope(bad, 400, 'invalid_request');
    expect(bad.headers.get('x-ratelimit-remaining')).toBe('58');
    expect(bad.headers.get('x-quota-used')).toBe('1'); // 4xx never counts

    const health = await call(fx.api.base, '/v1/health');
    expect(health.headers.get('x-ratelimit-limit')).toBeNull();
    const unauth = await call(fx.api.base, `/v1/car/${GO1}`);
    expectEnvelope(unauth, 401, 'unauthorized');
    expect(unauth.headers.get('x-ratelimit-limit')).toBeNull();
  });

  test('50 concurrent requests with a starter key: exactly 30 answer, 20 get 429 with Retry-After', async () => {
    const k = await keyOf('starter');
    await awayFromMinuteEnd();
    const rs = await Promise.all(Array.from({ length: 50 }, () => call(fx.api.base, `/v1/car/history?limit=1`, { key: k.key })));
    expect(tally(rs)).toEqual({ 200: 30, 429: 20 });
    for (const r of rs.filter((x) => x.status === 429)) {
      const e = expectEnvelope(r, 429, 'rate_limited');
      expect(e.message).toMatch(/30 requests per minute/);
      const after = r.headers.get('retry-after')!;
      expect(after).toMatch(/^\d+$/);
      expect(Number(after)).toBeGreaterThanOrEqual(1);
      expect(Number(after)).toBeLessThanOrEqual(60);
      expect(r.headers.get('x-ratelimit-remaining')).toBe('0');
    }
    const remaining = rs.filter((x) => x.status === 200).map((x) => Number(x.headers.get('x-ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 30 }, (_, i) => i)); // each count seen exactly once
  });

  test('two `agro serve` processes sharing the database enforce one limit', async () => {
    const [a, b] = await Promise.all([serveProcess(fx.db.url, fx.db.dataDir, BURSTS), serveProcess(fx.db.url, fx.db.dataDir, BURSTS)]);
    try {
      const k = await keyOf('starter');
      await awayFromMinuteEnd();
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => call(i % 2 ? a.base : b.base, `/v1/car/${GO1}`, { key: k.key })));
      expect(tally(rs)).toEqual({ 200: 30, 429: 20 });
      expect(await usedOf(k.id)).toBe(30); // the 30 answers were billed, the 429s not

      // Both processes answer and refuse against the one count. Which process wins a concurrent
      // race depends on the machine's load, so this part runs in phases: 20 answers from a,
      // then b sees them (10 more answers, 20 refusals), then a refuses too.
      const k2 = await keyOf('starter');
      await awayFromMinuteEnd(25_000);
      const burst = (base: string, n: number) => Promise.all(Array.from({ length: n }, () => call(base, `/v1/car/${GO1}`, { key: k2.key })));
      expect(tally(await burst(a.base, 20))).toEqual({ 200: 20 });
      expect(tally(await burst(b.base, 30))).toEqual({ 200: 10, 429: 20 });
      expect((await call(a.base, `/v1/car/${GO1}`, { key: k2.key })).status).toBe(429);
    } finally {
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    }
  }, 120_000);
});

describe('monthly quota', () => {
  test('counting rules: 2xx data answers count, 4xx do not, following pages free, history free, test keys never', async () => {
    const k = await keyOf('starter');
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('1');
    expect((await call(fx.api.base, `/v1/car/GO-5208707-${'0'.repeat(32)}`, { key: k.key })).status).toBe(404);
    expect((await call(fx.api.base, `/v1/car/by-document/52998224724`, { key: k.key })).status).toBe(400);
    expect(await usedOf(k.id)).toBe(1);

    const page1 = await call(fx.api.base, `/v1/car/by-document/${JOSE_CPF}?limit=1`, { key: k.key });
    expect(page1.status).toBe(200);
    expect(page1.body.next_cursor).toBeTruthy();
    expect(page1.headers.get('x-quota-used')).toBe('2');
    const page2 = await call(fx.api.base, `/v1/car/by-document/${JOSE_CPF}?limit=1&cursor=${page1.body.next_cursor}`, { key: k.key });
    expect(page2.status).toBe(200);
    expect(page2.headers.get('x-quota-used')).toBe('2');
    expect((await call(fx.api.base, `/v1/car/history`, { key: k.key })).status).toBe(200);
    expect(await usedOf(k.id)).toBe(2);

    const t = await keyOf('starter', 'test');
    const tr = await call(fx.api.base, `/v1/car/${GO1}`, { key: t.key });
    expect(tr.headers.get('x-quota-used')).toBe('0');
    expect(await usedOf(t.id)).toBe(0);
    await fx.api.app.flushHistory(); // history rows are written in batches (src/platform/history-writer.ts)
    const hist = await q<{ billable: boolean; status: number }>(`SELECT billable, status FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id]);
    expect(hist.map((h) => [h.status, h.billable])).toEqual([[200, true], [404, false], [400, false], [200, true], [200, false], [200, false]]);
  });

  test('GET /v1/sources (freshness of the datasets) is not a data endpoint: never billed, like the history', async () => {
    const k = await keyOf('starter');
    const r = await call(fx.api.base, `/v1/sources`, { key: k.key });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-quota-used')).toBe('0');
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('1');
    expect(await usedOf(k.id)).toBe(1);
    await fx.api.app.flushHistory();
    const hist = await q<{ billable: boolean; status: number }>(`SELECT billable, status FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id]);
    expect(hist.map((h) => [h.status, h.billable])).toEqual([[200, false], [200, true]]);
  });

  test('a cursor is a following page only on a route that pages: on any other data route it is ignored and the answer is billed', async () => {
    const k = await keyOf('starter');
    const geometry = { type: 'Polygon', coordinates: [[[-49.34, -16.59], [-49.3, -16.59], [-49.3, -16.55], [-49.34, -16.55], [-49.34, -16.59]]] };
    const rs = [
      await call(fx.api.base, `/v1/car/${GO1}?cursor=free`, { key: k.key }),
      await call(fx.api.base, `/v1/socio/search?q=agro&cursor=free`, { key: k.key }),
      await call(fx.api.base, `/v1/car/by-geometry?cursor=free`, { key: k.key, body: { geometry } }),
      await call(fx.api.base, `/v1/enriquecimento/territorial?cursor=free`, { key: k.key, body: { geometry, layers: ['uc'] } }),
    ];
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(rs.map((r) => r.headers.get('x-quota-used'))).toEqual(['1', '2', '3', '4']);
    expect(await usedOf(k.id)).toBe(4);
    await fx.api.app.flushHistory();
    const hist = await q<{ billable: boolean }>(`SELECT billable FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id]);
    expect(hist.map((h) => h.billable)).toEqual([true, true, true, true]);
  });

  test('a following page is free only to the key its lookup was billed to ("quota per API key"): another key\'s cursor, a shared or a leaked one, is billed; a rotated key goes on free', async () => {
    const a = await keyOf('starter');
    const b = await keyOf('starter');
    const page1 = await call(fx.api.base, `/v1/car/by-document/${JOSE_CPF}?limit=1`, { key: a.key });
    expect([page1.status, page1.headers.get('x-quota-used')]).toEqual([200, '1']);
    const next = `/v1/car/by-document/${JOSE_CPF}?limit=1&cursor=${page1.body.next_cursor}`;
    const borrowed = await call(fx.api.base, next, { key: b.key });
    expect(borrowed.status).toBe(200);
    expect(borrowed.body.results).toHaveLength(1); // the page itself is served (a valid cursor of the same query)
    expect(borrowed.headers.get('x-quota-used')).toBe('1');
    expect(await usedOf(b.id)).toBe(1);
    // the key that was billed for the lookup pages on free, and so does its rotated successor
    expect((await call(fx.api.base, next, { key: a.key })).headers.get('x-quota-used')).toBe('1');
    const successor = await rotateKey(fx.db.pool, a.id, 1);
    expect((await call(fx.api.base, next, { key: successor.key.key })).headers.get('x-quota-used')).toBe('1');
    expect(await usedOf(a.id)).toBe(1);
    // a cursor issued before cursors named their meter (no `m`) still pages on free
    const { m, ...legacy } = JSON.parse(Buffer.from(page1.body.next_cursor.split('.')[0], 'base64url').toString());
    expect(m).toMatch(/^[A-Za-z0-9_-]{16}$/); // a digest of the meter, not the key's id
    const old = new Cursors(fx.db.cfg.hmacKey).encode(legacy);
    const oldPage = await call(fx.api.base, `/v1/car/by-document/${JOSE_CPF}?limit=1&cursor=${old}`, { key: b.key });
    expect([oldPage.status, oldPage.headers.get('x-quota-used')]).toEqual([200, '1']);
    await fx.api.app.flushHistory();
    const hist = await q<{ billable: boolean }>(`SELECT billable FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [b.id]);
    expect(hist.map((h) => h.billable)).toEqual([true, false]);
  });

  test('402 quota_exceeded at the limit before any work; thresholds 70/90/100 % queued once each', async () => {
    const k = await keyOf('starter'); // 50 a month: thresholds at 35, 45, 50
    await setUsed(k.id, 34);
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('35');
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('36');
    let ev = await thresholdEvents(k.id);
    expect(ev.map((e) => e.body.data)).toEqual([{ key_id: k.id, plan: 'starter', threshold: 70, used: 35, limit: 50, month: MONTH() }]);
    expect(ev[0].id).toMatch(/^evt_[0-9a-f]{24}$/);
    expect(ev[0].body).toMatchObject({ id: ev[0].id, type: 'quota.threshold', api_version: 'v1' });
    expect(ev[0].body.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);

    // 10 concurrent billable lookups from 40 → 50: exactly 10 counted, 90 % and 100 % once each.
    await setUsed(k.id, 40);
    const rs = await Promise.all(Array.from({ length: 10 }, () => call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })));
    expect(tally(rs)).toEqual({ 200: 10 });
    expect(await usedOf(k.id)).toBe(50);
    ev = await thresholdEvents(k.id);
    expect(ev.map((e) => e.body.data as { threshold: number }).map((d) => d.threshold)).toEqual([70, 90, 100]);

    await fx.api.app.flushHistory();
    const before = await q(`SELECT count(*)::int AS n FROM platform.requests WHERE key_id = $1`, [k.id]);
    const over = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
    const e = expectEnvelope(over, 402, 'quota_exceeded');
    expect(e.message).toMatch(/50 of 50/);
    expect(over.headers.get('x-quota-used')).toBe('50');
    expect(await usedOf(k.id)).toBe(50);
    // Still served at the limit: the history (not a data endpoint).
    expect((await call(fx.api.base, `/v1/car/history`, { key: k.key })).status).toBe(200);
    await fx.api.app.flushHistory();
    const after = await q(`SELECT count(*)::int AS n FROM platform.requests WHERE key_id = $1`, [k.id]);
    expect((after[0] as { n: number }).n).toBe((before[0] as { n: number }).n + 2); // the 402 and the history call are in the history
    expect((await thresholdEvents(k.id)).length).toBe(3);
  });
});

test('a rotated key goes on with its month and its minute: the successor counts on its predecessor\'s meter; thresholds are announced once', async () => {
  await awayFromMinuteEnd();
  const old = await keyOf('starter'); // 50 a month, 30 a minute
  await setUsed(old.id, 44);
  expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: old.key })).headers.get('x-quota-used')).toBe('45'); // 90 %: 70 and 90 announced
  const { key: next } = await rotateKey(fx.db.pool, old.id, 1);
  const r = await call(fx.api.base, `/v1/car/${GO1}`, { key: next.key });
  expect([r.status, r.headers.get('x-quota-used'), r.headers.get('x-ratelimit-remaining')]).toEqual([200, '46', '28']);
  // The old key, in its grace period, counts on the same meter.
  expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: old.key })).headers.get('x-quota-used')).toBe('47');
  expect([await usedOf(old.id), await usedOf(next.id)]).toEqual([47, 0]);
  // 70 and 90 % were announced about the old key, and not again for its successor; the
  // successor's answer that reaches 100 % is announced about the successor (its endpoints get it).
  expect((await thresholdEvents(old.id)).map((e) => (e.body.data as { threshold: number }).threshold)).toEqual([70, 90]);
  expect(await thresholdEvents(next.id)).toEqual([]);
  await setUsed(old.id, 49);
  expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: next.key })).headers.get('x-quota-used')).toBe('50');
  expect((await thresholdEvents(next.id)).map((e) => e.body.data)).toEqual([{ key_id: next.id, plan: 'starter', threshold: 100, used: 50, limit: 50, month: MONTH() }]);
  expect((await thresholdEvents(old.id)).length).toBe(2);
  // At the limit, a second rotation does not start a new month either.
  expectEnvelope(await call(fx.api.base, `/v1/car/${GO1}`, { key: next.key }), 402, 'quota_exceeded');
  const { key: third } = await rotateKey(fx.db.pool, next.id, 1);
  const over = await call(fx.api.base, `/v1/car/${GO1}`, { key: third.key });
  expectEnvelope(over, 402, 'quota_exceeded');
  expect(over.headers.get('x-quota-used')).toBe('50');
  // The panel shows the meter's month, the successors' billable answers included.
  await fx.api.app.flushHistory();
  const u = await usageByDay(fx.db.pool, third.id, MONTH());
  expect(u.used).toBe(50);
  expect([...u.days.values()].reduce((a, b) => a + b, 0)).toBe(4);
});

describe('quota reserved at admission', () => {
  const UNKNOWN = `GO-5208707-${'0'.repeat(32)}`;

  test('a burst of 25 with 10 units left: exactly 10 answers, 15 × 402, each count seen once', async () => {
    const k = await keyOf('starter'); // 30 a minute (the burst stays under it), 50 a month
    await setUsed(k.id, 40);
    await awayFromMinuteEnd();
    const rs = await Promise.all(Array.from({ length: 25 }, () => call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })));
    expect(tally(rs)).toEqual({ 200: 10, 402: 15 });
    expect(rs.filter((r) => r.status === 200).map((r) => Number(r.headers.get('x-quota-used'))).sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, i) => 41 + i));
    for (const r of rs.filter((x) => x.status === 402)) {
      expect(expectEnvelope(r, 402, 'quota_exceeded').message).toMatch(/50 of 50/);
      expect(r.headers.get('x-quota-used')).toBe('50');
    }
    expect(await usedOf(k.id)).toBe(50);
  });

  test('two `agro serve` processes: a burst of 24 with 7 units left gives exactly 7 answers; many keys at once stay exact', async () => {
    const [a, b] = await Promise.all([serveProcess(fx.db.url, fx.db.dataDir, BURSTS), serveProcess(fx.db.url, fx.db.dataDir, BURSTS)]);
    const k = await keyOf('starter');
    const ks = await Promise.all(Array.from({ length: 6 }, () => keyOf('scale')));
    try {
      await setUsed(k.id, 43);
      await awayFromMinuteEnd();
      const rs = await Promise.all(Array.from({ length: 24 }, (_, i) => call(i % 2 ? a.base : b.base, `/v1/car/${GO1}`, { key: k.key })));
      expect(tally(rs)).toEqual({ 200: 7, 402: 17 });
      expect(rs.filter((r) => r.status === 200).map((r) => Number(r.headers.get('x-quota-used'))).sort((x, y) => x - y)).toEqual([44, 45, 46, 47, 48, 49, 50]);
      expect(await usedOf(k.id)).toBe(50);

      // Many keys at once through both processes: admissions batched per process lock the
      // keys' rows in one order (no deadlock), and every key's counts stay exact.
      await awayFromMinuteEnd();
      const many = await Promise.all(Array.from({ length: 72 }, (_, i) => call(i % 2 ? a.base : b.base, `/v1/car/${GO1}`, { key: ks[(i * 5) % 6].key })));
      expect(tally(many)).toEqual({ 200: 72 });
      for (const key of ks) {
        expect(await usedOf(key.id)).toBe(12);
        const mine = many.filter((_, i) => ks[(i * 5) % 6] === key);
        expect(mine.map((r) => Number(r.headers.get('x-ratelimit-remaining'))).sort((x, y) => x - y)).toEqual(Array.from({ length: 12 }, (_, j) => 288 + j));
      }
    } finally {
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    }
    // Both processes wrote every answer's history row by the time they stopped (SIGTERM flushes).
    const rows = await q<{ n: number }>(`SELECT count(*)::int AS n FROM platform.requests WHERE key_id = ANY($1)`, [[k.id, ...ks.map((x) => x.id)]]);
    expect(rows[0].n).toBe(24 + 72);
  }, 120_000);

  test('answers that do not count give their unit back: 4xx at the last unit, then a 2xx takes it', async () => {
    const k = await keyOf('starter');
    await setUsed(k.id, 49);
    const miss = await call(fx.api.base, `/v1/car/${UNKNOWN}`, { key: k.key });
    expectEnvelope(miss, 404, 'car_not_found');
    expect(miss.headers.get('x-quota-used')).toBe('49'); // reserved (50) at admission, refunded before the answer left
    expect(await usedOf(k.id)).toBe(49);
    const bad = await call(fx.api.base, `/v1/car/not-a-car`, { key: k.key });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('x-quota-used')).toBe('49');
    const hit = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
    expect(hit.status).toBe(200);
    expect(hit.headers.get('x-quota-used')).toBe('50');
    expectEnvelope(await call(fx.api.base, `/v1/car/${UNKNOWN}`, { key: k.key }), 402, 'quota_exceeded');
    expect(await usedOf(k.id)).toBe(50);
  });

  test('a reservation that is refunded announces no threshold; the counted answer that reaches it does', async () => {
    const k = await keyOf('starter'); // the 70 % threshold is the 35th unit
    await setUsed(k.id, 34);
    expectEnvelope(await call(fx.api.base, `/v1/car/${UNKNOWN}`, { key: k.key }), 404, 'car_not_found'); // reserved the 35th, refunded
    expect(await thresholdEvents(k.id)).toEqual([]);
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('35');
    expect((await thresholdEvents(k.id)).map((e) => e.body.data)).toEqual([{ key_id: k.id, plan: 'starter', threshold: 70, used: 35, limit: 50, month: MONTH() }]);
  });

  test('concurrent misses and hits: only the 2xx answers stay counted', async () => {
    const k = await keyOf('scale');
    await awayFromMinuteEnd();
    const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => call(fx.api.base, `/v1/car/${i % 3 ? GO1 : UNKNOWN}`, { key: k.key })));
    expect(tally(rs)).toEqual({ 200: 20, 404: 10 });
    expect(await usedOf(k.id)).toBe(20);
    await fx.api.app.flushHistory();
    const billable = await q<{ n: number }>(`SELECT count(*)::int AS n FROM platform.requests WHERE key_id = $1 AND billable`, [k.id]);
    expect(billable[0].n).toBe(20);
  });

  test('a 5xx gives its unit back (a server with no data loaded answers 503); closing the server writes the buffered history', async () => {
    const db = await testDatabase();
    let api: Awaited<ReturnType<typeof startApi>> | null = await startApi(db.cfg, db.url, db);
    try {
      const k = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'empty' });
      const r = await call(api.base, `/v1/car/by-document/${JOSE_CPF}`, { key: k.key });
      expectEnvelope(r, 503, 'upstream_unavailable');
      expect(r.headers.get('x-quota-used')).toBe('0');
      expect(Number((await db.pool.query(`SELECT coalesce(sum(used), 0) AS n FROM platform.usage_months WHERE key_id = $1`, [k.id])).rows[0].n)).toBe(0);
      // Closed at once (well within the 200 ms flush interval): the close writes the buffer.
      await api.close();
      api = null;
      expect((await db.pool.query(`SELECT status, billable FROM platform.requests WHERE key_id = $1`, [k.id])).rows).toEqual([{ status: 503, billable: false }]);
    } finally {
      await api?.close();
      await db.drop();
    }
  });
});

describe('GET /v1/car/history', () => {
  test("newest first, only the caller's, documents masked, legal basis, paging, dates", async () => {
    const k = await keyOf('scale');
    const other = await keyOf('scale');
    await call(fx.api.base, `/v1/car/${GO1}`, { key: other.key });
    const a = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
    const b = await call(fx.api.base, `/v1/car/by-document/52998224725?limit=1`, { key: k.key, headers: { 'x-lgpd-base-legal': 'protecao_credito' } });
    const c = await call(fx.api.base, `/v1/car/by-document/${encodeURIComponent(JOSE_CPF)}`, { key: k.key });
    const h = await call(fx.api.base, `/v1/car/history`, { key: k.key });
    expect(h.status).toBe(200);
    expect(h.body.results.map((x: { id: string }) => x.id)).toEqual([c, b, a].map((r) => r.headers.get('x-request-id')));
    expect(h.body.results[0]).toMatchObject({ method: 'GET', path: '/v1/car/by-document/***.982.247-**', status: 200, billable: true });
    expect(h.body.results[1]).toEqual({
      id: b.headers.get('x-request-id'), method: 'GET', path: '/v1/car/by-document/***.982.247-**?limit=1', status: 200, billable: true,
      created_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/), base_legal: 'protecao_credito',
    });
    expect(h.body.results[2]).not.toHaveProperty('base_legal');
    expect(h.text).not.toContain('52998224725');
    expect(h.text).not.toContain('529.982.247-25');
    expect(h.body.next_cursor).toBeNull();

    // Paging: 4 entries now (the history call itself was recorded after its answer).
    const p1 = await call(fx.api.base, `/v1/car/history?limit=3`, { key: k.key });
    expect(p1.body.count).toBe(3);
    const p2 = await call(fx.api.base, `/v1/car/history?limit=3&cursor=${p1.body.next_cursor}`, { key: k.key });
    expect([...p1.body.results, ...p2.body.results].map((x: { id: string }) => x.id)).toEqual(
      [h, c, b, a].map((r) => r.headers.get('x-request-id')).slice(0, 3).concat([a.headers.get('x-request-id')]),
    );
    expect(p2.body.next_cursor).toBeNull();
    expectEnvelope(await call(fx.api.base, `/v1/car/history?limit=3&cursor=${p1.body.next_cursor}`, { key: other.key }), 400, 'invalid_request');
    expectEnvelope(await call(fx.api.base, `/v1/car/history?limit=101`, { key: k.key }), 400, 'invalid_request');

    // Dates: inclusive UTC days.
    await q(
      `INSERT INTO platform.requests (id, key_id, method, path, status, billable, created_at) VALUES
       ('req_old_jan_first', $1, 'GET', '/v1/car/x', 200, true, '2026-01-01T00:00:00Z'),
       ('req_old_jan_last', $1, 'GET', '/v1/car/x', 200, true, '2026-01-31T23:59:59Z'),
       ('req_old_feb', $1, 'GET', '/v1/car/x', 200, true, '2026-02-01T00:00:00Z'),
       ('req_old_dec', $1, 'GET', '/v1/car/x', 200, true, '2025-12-31T23:59:59Z')`,
      [k.id],
    );
    const jan = await call(fx.api.base, `/v1/car/history?from=2026-01-01&to=2026-01-31`, { key: k.key });
    expect(jan.body.results.map((x: { id: string }) => x.id).sort()).toEqual(['req_old_jan_first', 'req_old_jan_last']);
    const since = await call(fx.api.base, `/v1/car/history?from=2026-02-01&limit=100`, { key: k.key });
    expect(since.body.results.map((x: { id: string }) => x.id)).toContain('req_old_feb');
    expect(since.body.results.map((x: { id: string }) => x.id)).not.toContain('req_old_jan_last');
    expectEnvelope(await call(fx.api.base, `/v1/car/history?from=2026-02-30`, { key: k.key }), 400, 'invalid_request');
    expectEnvelope(await call(fx.api.base, `/v1/car/history?from=2026-02-02&to=2026-02-01`, { key: k.key }), 400, 'invalid_request');
  });

  test('retention: purge drops history older than the configured months', async () => {
    const k = await keyOf('scale');
    await q(
      `INSERT INTO platform.requests (id, key_id, method, path, status, billable, created_at) VALUES
       ('req_14_months', $1, 'GET', '/v1/car/x', 200, true, now() - interval '14 months'),
       ('req_12_months', $1, 'GET', '/v1/car/x', 200, true, now() - interval '12 months')`,
      [k.id],
    );
    expect(fx.db.cfg.api.historyRetentionMonths).toBe(13);
    const r = await purgeHistory(fx.db.pool, fx.db.cfg.api.historyRetentionMonths);
    expect(r.requests).toBeGreaterThanOrEqual(1);
    expect((await q<{ id: string }>(`SELECT id FROM platform.requests WHERE key_id = $1`, [k.id])).map((x) => x.id)).toEqual(['req_12_months']);
  });
});
