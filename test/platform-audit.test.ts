// Audit of the platform's billing, limits and deliveries (contract §4, §5): each test shows a
// defect found on the code before its fix, against a real PostGIS and a real receiver on loopback.
import { Webhook } from 'standardwebhooks';
import { expect, test } from 'vitest';
import { drainOnce } from '../src/events/delivery.ts';
import { addEndpoint, listEndpoints } from '../src/events/endpoints.ts';
import { addMonitor, eachMonitorBatch, type Monitor } from '../src/events/monitors.ts';
import { createKey, purgeRevokedKeys, revokeKey, rotateKey } from '../src/platform/keys.ts';
import { admitRequests, PLAN_LIMITS, queueQuotaThresholds, windowOf } from '../src/platform/limits.ts';
import type { AddressInfo } from 'node:net';
import { buildServer, createApiPool } from '../src/api/server.ts';
import { usageByDay } from '../src/platform/panel-sql.ts';
import { call, expectEnvelope, fixtureApi } from './helpers/api.ts';
import { receiver } from './helpers/receiver.ts';

/** Every monitor of some keys (all keys when null), oldest first. */
async function listMonitors(pool: Parameters<typeof eachMonitorBatch>[0], keyIds: string[] | null): Promise<Monitor[]> {
  const all: Monitor[] = [];
  await eachMonitorBatch(pool, keyIds, (rows) => void all.push(...rows));
  return all;
}

const fx = fixtureApi();
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const SQUARE = (x0: number, y0: number, x1: number, y1: number) => ({ type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] });
const MONTH = () => new Date().toISOString().slice(0, 7);
const usedOf = async (meter: string) => Number((await fx.db.pool.query(`SELECT coalesce(sum(used), 0) AS n FROM platform.usage_months WHERE key_id = $1`, [meter])).rows[0].n);

test('a key rotation keeps the webhook subscriptions and monitors: the successor\'s quota.threshold reaches the endpoint, and purging the old key deletes neither', async () => {
  const db = { pool: fx.db.pool, cfg: { ...fx.db.cfg, webhooks: { ...fx.db.cfg.webhooks, allowPrivate: true } } };
  const rx = await receiver([204]);
  try {
    const old = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'rotated' });
    const ep = await addEndpoint(db.pool, { keyId: old.id, url: rx.url, events: 'quota.threshold', allowPrivate: true });
    await addMonitor(db.pool, old.id, 'car', 'MT-5107925-0123456789ABCDEF0123456789ABCDEF');
    const { key: next } = await rotateKey(db.pool, old.id, 0);

    // The successor (counting on the old key's meter) crosses 70 % the way the API does.
    const { windowStart, month } = windowOf(Date.now());
    for (let i = 0; i < Math.ceil(PLAN_LIMITS.starter.perMonth * 0.7); i++) {
      const minute = new Date(windowStart.getTime() - i * 60_000);
      const [a] = await admitRequests(db.pool, [{ keyId: old.id, plan: 'starter', windowStart: minute, month, reserve: true }]);
      await queueQuotaThresholds(db.pool, { keyId: next.id, meter: old.id, plan: 'starter', month, used: a.used });
    }
    await drainOnce({ pool: db.pool, cfg: db.cfg });
    // Before the fix: the event went to the successor's endpoints (none); the customer's was skipped.
    expect(rx.got).toHaveLength(1);
    expect(new Webhook(ep.secret).verify(rx.got[0].body, rx.got[0].headers as Record<string, string>)).toMatchObject({ type: 'quota.threshold', data: { threshold: 70 } });
    // An event about the old key (its answers in the grace period) reaches the moved endpoint too.
    await queueQuotaThresholds(db.pool, { keyId: old.id, meter: old.id, plan: 'starter', month, used: 45 });
    await drainOnce({ pool: db.pool, cfg: db.cfg });
    expect(rx.got.map((r) => JSON.parse(r.body).data)).toMatchObject([{ key_id: next.id, threshold: 70 }, { key_id: old.id, threshold: 90 }]);

    // 30 days after the rotation the old key is purged: the subscription and the monitor stay.
    await db.pool.query(`UPDATE platform.api_keys SET revoked_at = now() - interval '31 days' WHERE id = $1`, [old.id]);
    expect(await purgeRevokedKeys(db.pool)).toBeGreaterThanOrEqual(1);
    expect((await listEndpoints(db.pool, [next.id])).map((e) => e.id)).toEqual([ep.id]);
    expect((await listMonitors(db.pool, [next.id])).map((m) => m.record)).toEqual(['MT-5107925-0123456789ABCDEF0123456789ABCDEF']);
  } finally {
    await rx.close();
  }
});

test('an Idempotency-Key retried with the rotated key\'s successor replays the answer: the work is not run and billed twice', async () => {
  const k = await createKey(fx.db.pool, { env: 'live', plan: 'growth', name: 'idem-rotation' });
  const body = { geometry: SQUARE(-49.34, -16.59, -49.30, -16.55) };
  const first = await call(fx.api.base, '/v1/car/by-geometry', { key: k.key, body, headers: { 'idempotency-key': 'order-77' } });
  expect(first.status).toBe(200);
  const { key: next } = await rotateKey(fx.db.pool, k.id, 1);
  // The client's retry of a request whose answer it lost, after switching to the new key.
  const retry = await call(fx.api.base, '/v1/car/by-geometry', { key: next.key, body, headers: { 'idempotency-key': 'order-77' } });
  expect([retry.status, retry.headers.get('idempotent-replayed'), retry.text]).toEqual([200, 'true', first.text]);
  expect(await usedOf(k.id)).toBe(1); // before the fix: 2
});

test('a plan change that leaves the month at or over the new limit announces quota.threshold 100 % with the first 402', async () => {
  const k = await createKey(fx.db.pool, { env: 'live', plan: 'growth', name: 'downgraded' }); // 100 a month
  await fx.db.pool.query(`INSERT INTO platform.usage_months (key_id, month, used) VALUES ($1, ($2 || '-01')::date, 60)`, [k.id, MONTH()]);
  expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('61');
  await fx.db.pool.query(`UPDATE platform.api_keys SET plan = 'starter' WHERE id = $1`, [k.id]); // 50 a month
  let over;
  for (let i = 0; i < 50; i++) {
    over = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
    if (over.headers.get('x-quota-limit') === '50') break; // the key cache has heard of the change
    await new Promise((r) => setTimeout(r, 100));
  }
  expectEnvelope(over!, 402, 'quota_exceeded');
  await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
  const ev = (await fx.db.pool.query(`SELECT body FROM events.outbox WHERE key_id = $1 AND type = 'quota.threshold' ORDER BY (body->'data'->>'threshold')::int`, [k.id])).rows;
  // Before the fix: none (only a counted answer announced, and none can count any more).
  // (the loop's requests answered on the growth plan until the key cache heard of the change count)
  const used = Number(over!.headers.get('x-quota-used'));
  expect(used).toBeGreaterThanOrEqual(61);
  expect(ev.map((e) => e.body.data)).toEqual([70, 90, 100].map((threshold) => ({ key_id: k.id, plan: 'starter', threshold, used, limit: 50, month: MONTH() })));
});

test('a CPF written with underscores (which the API refuses, 400) is masked in the query history all the same', async () => {
  const k = await createKey(fx.db.pool, { env: 'live', plan: 'growth', name: 'cpf-history' });
  const r = await call(fx.api.base, '/v1/car/by-document/529_982_247_25', { key: k.key });
  expect(r.status).toBe(400);
  await fx.api.app.flushHistory();
  const paths = (await fx.db.pool.query(`SELECT path FROM platform.requests WHERE key_id = $1`, [k.id])).rows.map((x) => x.path);
  // Before the fix: '/v1/car/by-document/529_982_247_25', a valid CPF's eleven digits in clear.
  expect(paths).toEqual(['/v1/car/by-document/***.982.247-**']);
});

test('a request admitted in a month\'s last instant is billed to that month, and its history row (the panel\'s days) says that month too', async () => {
  const now = new Date();
  const lastInstant = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) - 100; // 23:59:59.900 on the previous month's last day
  const prev = new Date(lastInstant).toISOString().slice(0, 7);
  const pool = createApiPool(fx.db.cfg, fx.db.url);
  const app = await buildServer({ cfg: fx.db.cfg, pool, log: fx.db.log, meteringClock: () => lastInstant });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'growth', name: 'month-end' });
    const r = await call(fx.api.base.replace(/:\d+$/, `:${(app.server.address() as AddressInfo).port}`), `/v1/car/${GO1}`, { key: k.key });
    expect([r.status, r.headers.get('x-quota-used'), r.headers.get('x-ratelimit-reset')]).toEqual([200, '1', String(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) / 1000)]);
    await app.flushHistory();
    const u = await usageByDay(fx.db.pool, k.id, prev);
    // Before the fix: used 1 in the previous month, but the history row dated now (this month).
    expect([u.used, [...u.days.entries()]]).toEqual([1, [[new Date(lastInstant).getUTCDate(), 1]]]);
  } finally {
    await app.close();
    await pool.end();
  }
});

test('a subscription or monitor added with a rotated key in its grace period goes to its successor: purging the old key keeps it', async () => {
  const old = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'late-subscriber' });
  const { key: next } = await rotateKey(fx.db.pool, old.id, 24);
  const { key: last } = await rotateKey(fx.db.pool, next.id, 24);
  // The customer's integration still runs on the first key (the panel session, `--key`).
  const ep = await addEndpoint(fx.db.pool, { keyId: old.id, url: 'https://hooks.example.com/agro', events: '*', allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 }] });
  const mon = await addMonitor(fx.db.pool, next.id, 'cnpj', '11.222.333/0001-81');
  // Before the fix: both stayed on the key they were added with.
  expect([ep.key_id, mon.key_id]).toEqual([last.id, last.id]);
  expect((await addMonitor(fx.db.pool, old.id, 'cnpj', '11222333000181')).created).toBe(false);
  await fx.db.pool.query(`UPDATE platform.api_keys SET revoked_at = now() - interval '40 days' WHERE id = ANY ($1)`, [[old.id, next.id]]);
  expect(await purgeRevokedKeys(fx.db.pool)).toBeGreaterThanOrEqual(2);
  expect((await listEndpoints(fx.db.pool, [last.id])).map((e) => e.id)).toEqual([ep.id]);
  expect((await listMonitors(fx.db.pool, [last.id])).map((m) => m.id)).toEqual([mon.id]);
  await expect(addMonitor(fx.db.pool, old.id, 'car', GO1)).rejects.toMatchObject({ code: 'key_not_found' });
  // A chain whose newest key is revoked takes no subscription (it would never hear an event).
  const a = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'revoked-successor' });
  const { key: b } = await rotateKey(fx.db.pool, a.id, 24);
  await revokeKey(fx.db.pool, b.id);
  await expect(addMonitor(fx.db.pool, a.id, 'car', GO1)).rejects.toMatchObject({ code: 'key_not_found', message: expect.stringContaining('revoked') });
  await revokeKey(fx.db.pool, a.id);
  await expect(addEndpoint(fx.db.pool, { keyId: a.id, url: 'https://hooks.example.com/x', events: '*', allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 }] }))
    .rejects.toMatchObject({ code: 'key_not_found' });
});

