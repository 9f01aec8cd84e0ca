// Idempotency-Key on POST (issue 10, contract §4) on a real API over a PostGIS loaded with the
// fixtures. A request is held "running" by locking the serving view its work reads, from
// another connection: the claim is taken before the work, so the lock decides who waits.
import { describe, expect, test } from 'vitest';
import pg from 'pg';
import { createKey } from '../src/platform/keys.ts';
import { call, expectEnvelope, fixtureApi, startApi, type Reply } from './helpers/api.ts';
import { serveProcess } from './helpers/serve.ts';

const SQUARE = (x0: number, y0: number, x1: number, y1: number) => ({ type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] });
const G = SQUARE(-49.34, -16.59, -49.30, -16.55);
const G2 = SQUARE(-49.35, -16.60, -49.30, -16.55);

const fx = fixtureApi();

const newKey = async () => createKey(fx.db.pool, { env: 'live', plan: 'enterprise', name: 'idem' });
const post = (base: string, key: string, idem: string | null, body: unknown) =>
  call(base, '/v1/car/by-geometry', { key, body, headers: idem === null ? {} : { 'idempotency-key': idem } });
const billed = async (keyId: string) => Number((await fx.db.pool.query(`SELECT coalesce(sum(used), 0) AS n FROM platform.usage_months WHERE key_id = $1`, [keyId])).rows[0].n);
/** Requests of the key whose work ran (a fresh, non-replayed 2xx is billed once). */
const ran = (rs: Reply[]) => rs.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === null).length;

/** Holds the work of by-geometry (it reads serving.car_imovel) until release() is called. */
async function holdWork(): Promise<{ release(): Promise<void> }> {
  const c = new pg.Client({ connectionString: fx.db.url });
  await c.connect();
  await c.query('BEGIN');
  await c.query('LOCK TABLE serving.car_imovel IN ACCESS EXCLUSIVE MODE');
  return {
    async release() {
      await c.query('COMMIT');
      await c.end();
    },
  };
}

async function waitForRunning(keyId: string) {
  for (let i = 0; i < 200; i++) {
    const r = await fx.db.pool.query(`SELECT 1 FROM platform.idempotency WHERE key_id = $1 AND state = 'running'`, [keyId]);
    if (r.rowCount) return;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error('the first request never claimed its key');
}

describe('Idempotency-Key on POST', () => {
  test('replay: the stored answer with Idempotent-Replayed: true, not billed again; another body → 422', async () => {
    const k = await newKey();
    const first = await post(fx.api.base, k.key, 'order-1', { geometry: G });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.body.count).toBeGreaterThan(0);
    const again = await post(fx.api.base, k.key, 'order-1', { geometry: G });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text); // byte for byte, consultado_em included
    expect(again.headers.get('content-type')).toBe(first.headers.get('content-type'));
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    expect(await billed(k.id)).toBe(1);
    await fx.api.app.flushHistory(); // history rows are written in batches
    const hist = await fx.db.pool.query(`SELECT status, billable FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id]);
    expect(hist.rows).toEqual([{ status: 200, billable: true }, { status: 200, billable: false }]);

    const other = expectEnvelope(await post(fx.api.base, k.key, 'order-1', { geometry: G2 }), 422, 'idempotency_key_reused');
    expect(other.message).toMatch(/another body/);
    // Scope is (key, method, path): the same Idempotency-Key of another API key is its own.
    const k2 = await newKey();
    const fresh = await post(fx.api.base, k2.key, 'order-1', { geometry: G2 });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get('idempotent-replayed')).toBeNull();
    // Without the header, every POST runs.
    expect(ran([await post(fx.api.base, k.key, null, { geometry: G }), await post(fx.api.base, k.key, null, { geometry: G })])).toBe(2);
  });

  test('"same body" is the same JSON value: members in another order (a client that serialises its map anew on retry) replay; another value is still 422', async () => {
    const k = await newKey();
    const send = (raw: string) => call(fx.api.base, '/v1/car/by-geometry', { key: k.key, raw, headers: { 'content-type': 'application/json', 'idempotency-key': 'order-2' } });
    const first = await send(JSON.stringify({ geometry: G, min_overlap: 0.1 }));
    expect(first.status).toBe(200);
    // the body's members, and the geometry's, written in another order, with other spacing
    const retry = await send(`{ "min_overlap": 0.1, "geometry": {"coordinates": ${JSON.stringify(G.coordinates)}, "type": "Polygon"} }`);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    // omitting a member that has a default is the same request as sending the default
    const k2 = await newKey();
    const first2 = await call(fx.api.base, '/v1/car/by-geometry', { key: k2.key, body: { limit: 100, geometry: G }, headers: { 'idempotency-key': 'order-3' } });
    const retry2 = await call(fx.api.base, '/v1/car/by-geometry', { key: k2.key, body: { geometry: G }, headers: { 'idempotency-key': 'order-3' } });
    expect([first2.status, retry2.status, retry2.headers.get('idempotent-replayed')]).toEqual([200, 200, 'true']);
    expect(await billed(k.id)).toBe(1);
    expectEnvelope(await send(JSON.stringify({ min_overlap: 0.2, geometry: G })), 422, 'idempotency_key_reused');
  });

  test('a replay is free, so the quota does not refuse it: the request that used the last unit, retried, gets its stored answer; a new request is 402', async () => {
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'idem-quota' }); // 50 a month
    await fx.db.pool.query(`INSERT INTO platform.usage_months (key_id, month, used) VALUES ($1, date_trunc('month', now() AT TIME ZONE 'UTC')::date, 49)`, [k.id]);
    const first = await post(fx.api.base, k.key, 'last-unit', { geometry: G });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-quota-used')).toBe('50');
    const again = await post(fx.api.base, k.key, 'last-unit', { geometry: G });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(again.headers.get('x-quota-used')).toBe('50');
    expect(await billed(k.id)).toBe(50);
    // Not a replay: another body under the key, another key, no key at all → 402 as before.
    expect(expectEnvelope(await post(fx.api.base, k.key, 'last-unit', { geometry: G2 }), 402, 'quota_exceeded').message).toMatch(/50 of 50/);
    expectEnvelope(await post(fx.api.base, k.key, 'other', { geometry: G }), 402, 'quota_exceeded');
    expectEnvelope(await post(fx.api.base, k.key, null, { geometry: G }), 402, 'quota_exceeded');
    // The refused Idempotency-Key was not claimed: it is still free once quota is available.
    expect((await fx.db.pool.query(`SELECT 1 FROM platform.idempotency WHERE key_id = $1 AND idem_key = 'other'`, [k.id])).rowCount).toBe(0);
    expect(await billed(k.id)).toBe(50);
    await fx.api.app.flushHistory();
    const hist = await fx.db.pool.query(`SELECT status, billable FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id]);
    expect(hist.rows.map((r) => [r.status, r.billable])).toEqual([[200, true], [200, false], [402, false], [402, false], [402, false]]);
  });

  test('validation failures and 5xx are not stored: the key stays free for a correct request', async () => {
    const k = await newKey();
    expectEnvelope(await post(fx.api.base, k.key, 'v-1', { geometry: { type: 'Point', coordinates: [0, 0] } }), 422, 'geometry_invalid');
    expectEnvelope(await post(fx.api.base, k.key, 'v-1', { geometry: G, min_overlap: 2 }), 400, 'invalid_request');
    const ok = await post(fx.api.base, k.key, 'v-1', { geometry: G });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
    expectEnvelope(await post(fx.api.base, k.key, 'x'.repeat(256), { geometry: G }), 400, 'invalid_request');

    // A 503 (the statement times out while the view is locked) releases the claim.
    const slow = await startApi({ ...fx.db.cfg, api: { ...fx.db.cfg.api, statementTimeoutMs: 300 } }, fx.db.url, fx.db);
    const hold = await holdWork();
    try {
      expectEnvelope(await post(slow.base, k.key, 'v-2', { geometry: G }), 503, 'upstream_unavailable');
    } finally {
      await hold.release();
      await slow.close();
    }
    const retried = await post(fx.api.base, k.key, 'v-2', { geometry: G });
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
  });

  test('conflict: the same key while the first is running → 409; after it, the replay', async () => {
    const k = await newKey();
    const hold = await holdWork();
    let first: Promise<Reply>;
    try {
      first = post(fx.api.base, k.key, 'c-1', { geometry: G });
      await waitForRunning(k.id);
      const second = await post(fx.api.base, k.key, 'c-1', { geometry: G });
      expectEnvelope(second, 409, 'idempotency_conflict');
    } finally {
      await hold.release();
    }
    const r1 = await first!;
    expect(r1.status).toBe(200);
    const r3 = await post(fx.api.base, k.key, 'c-1', { geometry: G });
    expect(r3.headers.get('idempotent-replayed')).toBe('true');
    expect(r3.text).toBe(r1.text);
    expect(await billed(k.id)).toBe(1);
  });

  test('two identical POSTs at the same instant in two server processes run the work once', async () => {
    const other = await serveProcess(fx.db.url, fx.db.dataDir);
    try {
      for (let round = 0; round < 3; round++) {
        const k = await newKey();
        const rs = await Promise.all([post(fx.api.base, k.key, `same-${round}`, { geometry: G }), post(other.base, k.key, `same-${round}`, { geometry: G })]);
        expect(ran(rs)).toBe(1);
        for (const r of rs) {
          if (r.status === 200) continue;
          expectEnvelope(r, 409, 'idempotency_conflict');
        }
        expect(await billed(k.id)).toBe(1);
      }
      // Held: both arrive while the work cannot finish; exactly one waits, the other is refused.
      const k = await newKey();
      const hold = await holdWork();
      const both = Promise.all([post(fx.api.base, k.key, 'held', { geometry: G }), post(other.base, k.key, 'held', { geometry: G })]);
      await waitForRunning(k.id);
      await new Promise((r) => setTimeout(r, 300));
      await hold.release();
      const rs = await both;
      expect(rs.map((r) => r.status).sort()).toEqual([200, 409]);
      expect(await billed(k.id)).toBe(1);
    } finally {
      expect(await other.stop()).toBe(0);
    }
  }, 120_000);

  test('expiry: after 24 h the key is free again (a new run, another body allowed)', async () => {
    const k = await newKey();
    expect((await post(fx.api.base, k.key, 'e-1', { geometry: G })).status).toBe(200);
    const row = await fx.db.pool.query(`SELECT extract(epoch FROM expires_at - created_at)::int AS ttl FROM platform.idempotency WHERE key_id = $1`, [k.id]);
    expect(row.rows[0].ttl).toBe(24 * 3600);
    await fx.db.pool.query(`UPDATE platform.idempotency SET expires_at = now() - interval '1 second' WHERE key_id = $1`, [k.id]);
    const r = await post(fx.api.base, k.key, 'e-1', { geometry: G2 });
    expect(r.status).toBe(200);
    expect(r.headers.get('idempotent-replayed')).toBeNull();
    expect(await billed(k.id)).toBe(2);
  });
});
