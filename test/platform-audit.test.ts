// Audit of the platform's billing, limits and deliveries (contract §4, §5): each test shows a
// defect found on the code before its fix, against a real PostGIS and a real receiver on loopback.
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { drainOnce } from '../src/events/delivery.ts';
import { addEndpoint, listEndpoints } from '../src/events/endpoints.ts';
import { addMonitor, listMonitors } from '../src/events/monitors.ts';
import { createKey, purgeRevokedKeys, rotateKey } from '../src/platform/keys.ts';
import { admitRequests, PLAN_LIMITS, queueQuotaThresholds, windowOf } from '../src/platform/limits.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { receiver } from './helpers/receiver.ts';

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase({ AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' });
});
afterAll(async () => {
  await db?.drop();
});

test('a key rotation keeps the webhook subscriptions and monitors: the successor\'s quota.threshold reaches the endpoint, and purging the old key deletes neither', async () => {
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
