// Webhook delivery (contract §5) against real receivers: node http servers on 127.0.0.1 with a
// scripted answer per request, a real PostGIS, the outbox filled by the platform's own quota
// accounting. The retry clock and jitter are injected: three days of retries run at once.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { isAgroError } from '../src/errors.ts';
import { Drainer, drainOnce, replayEvent, RETRY, retryDelayMs, sendTestEvent, type DrainDeps } from '../src/events/delivery.ts';
import { addEndpoint, deliveryLog, getEndpoint, rotateSecret } from '../src/events/endpoints.ts';
import { addMonitor, removeMonitor } from '../src/events/monitors.ts';
import { isNonPublicAddress, vetTarget } from '../src/events/targets.ts';
import { createKey, revokeKey } from '../src/platform/keys.ts';
import { admitRequests, PLAN_LIMITS, queueQuotaThresholds, windowOf } from '../src/platform/limits.ts';
import { createPool } from '../src/db/pool.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { receiver, type Received } from './helpers/receiver.ts';
import { serveProcess } from './helpers/serve.ts';

let db: TestDb;
let clock = 0;
const deps = (extra: Partial<DrainDeps> = {}): DrainDeps => ({ pool: db.pool, cfg: db.cfg, now: () => clock, random: () => 0.5, ...extra });
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;

/** Crosses 70 % of a starter key's quota the way the API does: units reserved at admission, thresholds queued by counted answers. */
async function quotaEvent(keyId: string): Promise<string> {
  const { windowStart, month } = windowOf(Date.now());
  const n = Math.ceil(PLAN_LIMITS.starter.perMonth * 0.7);
  for (let i = 0; i < n; i++) {
    // One request per minute window: the starter rate limit (30 a minute) is under 70 % of its quota (35).
    const minute = new Date(windowStart.getTime() - i * 60_000);
    const [a] = await admitRequests(db.pool, [{ keyId, plan: 'starter', windowStart: minute, month, reserve: true }]);
    await queueQuotaThresholds(db.pool, { keyId, meter: keyId, plan: 'starter', month, used: a.used });
  }
  const r = await q(`SELECT id FROM events.outbox WHERE key_id = $1 AND type = 'quota.threshold'`, [keyId]);
  expect(r).toHaveLength(1);
  return r[0].id;
}

async function liveKey() {
  return createKey(db.pool, { env: 'live', plan: 'starter', name: 'hooks' });
}

/** A live key with an endpoint at `url` for quota.threshold, and its first quota event queued. */
async function keyWithQuotaEvent(url: string): Promise<{ keyId: string; eventId: string }> {
  const key = await liveKey();
  await addEndpoint(db.pool, { keyId: key.id, url, events: 'quota.threshold', allowPrivate: true });
  return { keyId: key.id, eventId: await quotaEvent(key.id) };
}

/** The hand-written check of X-Service-Signature: t=<s>,v1=<hex HMAC-SHA256(key, "<id>.<t>.<body>")>. */
function serviceSignatureValid(r: Received, secret: string): boolean {
  const header = String(r.headers['x-service-signature']);
  const parts = header.split(',').map((p) => p.split('='));
  const t = parts.find(([k]) => k === 't')?.[1];
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = crypto.createHmac('sha256', key).update(`${r.headers['webhook-id']}.${t}.${r.body}`).digest();
  return parts.filter(([k]) => k === 'v1').some(([, v]) => {
    const got = Buffer.from(v, 'hex');
    return got.length === expected.length && crypto.timingSafeEqual(got, expected);
  });
}

beforeAll(async () => {
  db = await testDatabase({ AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' });
});
afterAll(async () => {
  await db?.drop();
});
beforeEach(async () => {
  clock = Date.now();
  // each test starts with nothing due from the ones before it
  await db.pool.query(`UPDATE events.deliveries SET status = 'failed' WHERE status = 'pending'`);
  await db.pool.query(`UPDATE events.outbox SET dispatched_at = now() WHERE dispatched_at IS NULL`);
});

describe('delivery with retries', () => {
  test('a receiver that fails twice then succeeds gets the same event three times, on the backoff schedule', async () => {
    const rx = await receiver([500, 503, 204]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: 'quota.threshold', allowPrivate: true });
      const eventId = await quotaEvent(key.id);

      const first = await drainOnce(deps());
      expect(first).toMatchObject({ events: 1, attempted: 1, delivered: 0, retrying: 1 });
      // Not due yet: nothing is attempted at the same instant.
      expect((await drainOnce(deps())).attempted).toBe(0);
      clock += retryDelayMs(1, 0.5) - 1;
      expect((await drainOnce(deps())).attempted).toBe(0);
      clock += 1;
      expect(await drainOnce(deps())).toMatchObject({ attempted: 1, retrying: 1 });
      clock += retryDelayMs(2, 0.5);
      expect(await drainOnce(deps())).toMatchObject({ attempted: 1, delivered: 1 });
      clock += 10 * 24 * 3_600_000;
      expect((await drainOnce(deps())).attempted).toBe(0);

      expect(rx.got).toHaveLength(3);
      expect(new Set(rx.got.map((r) => r.headers['webhook-id']))).toEqual(new Set([eventId]));
      expect(new Set(rx.got.map((r) => r.body)).size).toBe(1);
      const body = JSON.parse(rx.got[0].body);
      expect(body).toMatchObject({ id: eventId, type: 'quota.threshold', api_version: 'v1', data: { key_id: key.id, plan: 'starter', threshold: 70, limit: 50, used: 35 } });
      expect(body.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(Object.keys(body)).toEqual(['id', 'type', 'created_at', 'api_version', 'data']);
      for (const r of rx.got) expect(serviceSignatureValid(r, ep.secret)).toBe(true);

      const log = await deliveryLog(db.pool, ep.id);
      expect(log.map((a) => [a.attempt, a.status_code])).toEqual([[3, 204], [2, 503], [1, 500]]);
      expect(log[0].delivery_status).toBe('delivered');
      const at = log.map((a) => a.at.getTime()).reverse();
      expect(at[1] - at[0]).toBe(RETRY.firstDelayMs);
      expect(at[2] - at[1]).toBe(RETRY.firstDelayMs * RETRY.factor);
      // each attempt is signed at its own time, not the event's: receivers reject timestamps
      // older than 5 minutes (contract §5), and a retry comes minutes to days later
      const signedAt = at.map((ms) => String(Math.floor(ms / 1000)));
      expect(rx.got.map((r) => r.headers['webhook-timestamp'])).toEqual(signedAt);
      expect(rx.got.map((r) => /^t=(\d+),/.exec(String(r.headers['x-service-signature']))?.[1])).toEqual(signedAt);
    } finally {
      await rx.close();
    }
  });

  test('a receiver that never succeeds is given up after 9 attempts over about 3 days', async () => {
    const rx = await receiver([500]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
      await quotaEvent(key.id);
      const start = clock;
      // the clock jumps to each due time: the span is the sum of the jittered delays
      for (let i = 0; i < 20; i++) {
        await drainOnce(deps({ random: Math.random }));
        const [d] = await q(`SELECT status, next_attempt_at FROM events.deliveries WHERE endpoint_id = $1`, [ep.id]);
        if (d.status !== 'pending') break;
        clock = d.next_attempt_at.getTime();
      }
      expect(rx.got).toHaveLength(RETRY.maxAttempts);
      const log = await deliveryLog(db.pool, ep.id);
      expect(log[0].delivery_status).toBe('failed');
      const span = (log[0].at.getTime() - start) / 3_600_000;
      // nominal 1+4+16+64+256+1024+1440+1440 min = 70.75 h, ±20 % jitter
      expect(span).toBeGreaterThan(0.8 * 70.75);
      expect(span).toBeLessThan(1.2 * 70.75);
      for (let n = 1; n <= RETRY.maxAttempts; n++) {
        expect(retryDelayMs(n, 0)).toBeGreaterThanOrEqual(0.8 * Math.min(RETRY.firstDelayMs * RETRY.factor ** (n - 1), RETRY.maxDelayMs) - 1);
        expect(retryDelayMs(n, 0.999999)).toBeLessThanOrEqual(1.2 * Math.min(RETRY.firstDelayMs * RETRY.factor ** (n - 1), RETRY.maxDelayMs) + 1);
      }
    } finally {
      await rx.close();
    }
  });

  test('410 Gone disables the endpoint: nothing more is sent to it', async () => {
    const rx = await receiver([410]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: 'quota.threshold', allowPrivate: true });
      await quotaEvent(key.id);
      expect(await drainOnce(deps())).toMatchObject({ attempted: 1, failed: 1, retrying: 0 });
      const e = await getEndpoint(db.pool, ep.id);
      expect(e?.disabled_at).not.toBeNull();
      expect(e?.disabled_reason).toMatch(/410/);
      // a later event for the key, and the retry clock running, reach nobody
      await sendTestEvent(db.pool, { id: ep.id, key_id: key.id });
      clock += 4 * 24 * 3_600_000;
      expect((await drainOnce(deps())).attempted).toBe(0);
      expect(rx.got).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });

  test('a redirect is not followed (a failed attempt), and a receiver that hangs times out', async () => {
    const target = await receiver([204]);
    const redirect = await receiver([302], { location: 'http://10.0.0.1/hooks' });
    const hang = await receiver(['hang']);
    try {
      const key = await liveKey();
      const a = await addEndpoint(db.pool, { keyId: key.id, url: redirect.url, events: 'quota.threshold', allowPrivate: true });
      const b = await addEndpoint(db.pool, { keyId: key.id, url: hang.url, events: 'quota.threshold', allowPrivate: true });
      await quotaEvent(key.id);
      const r = await drainOnce(deps({ timeoutMs: 300 }));
      expect(r).toMatchObject({ attempted: 2, retrying: 2, delivered: 0 });
      const [la] = await deliveryLog(db.pool, a.id);
      expect(la).toMatchObject({ status_code: 302, delivery_status: 'pending' });
      expect(la.error).toMatch(/redirect to http:\/\/10\.0\.0\.1\/hooks not followed/);
      const [lb] = await deliveryLog(db.pool, b.id);
      expect(lb.status_code).toBeNull();
      expect(lb.error).toMatch(/within 300 ms/);
      expect(target.got).toHaveLength(0);
    } finally {
      await Promise.all([target.close(), redirect.close(), hang.close()]);
    }
  });

  test('replay delivers an event again with the same id', async () => {
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: 'quota.threshold', allowPrivate: true });
      const id = await quotaEvent(key.id);
      await drainOnce(deps());
      expect(await replayEvent(db.pool, id, { now: new Date(clock) })).toBe(1);
      expect(await drainOnce(deps())).toMatchObject({ attempted: 1, delivered: 1 });
      expect(rx.got.map((r) => r.headers['webhook-id'])).toEqual([id, id]);
      await expect(replayEvent(db.pool, 'evt_nope')).rejects.toSatisfy((e) => isAgroError(e, 'event_not_found'));
    } finally {
      await rx.close();
    }
  });

  test('a revoked key\'s endpoints get nothing more: not its queued events, not the retries under way, not a replay', async () => {
    const rx = await receiver([500]);
    try {
      // An event queued before the revocation (fanned out after it).
      const a = await keyWithQuotaEvent(rx.url);
      await revokeKey(db.pool, a.keyId);
      expect((await drainOnce(deps())).attempted).toBe(0);

      // A delivery retrying when its key is revoked.
      const b = await keyWithQuotaEvent(rx.url);
      expect(await drainOnce(deps())).toMatchObject({ attempted: 1, retrying: 1 });
      await revokeKey(db.pool, b.keyId);
      clock += 10 * 24 * 3_600_000;
      expect((await drainOnce(deps())).attempted).toBe(0);

      for (const { eventId } of [a, b]) expect(await replayEvent(db.pool, eventId, { now: new Date(clock) })).toBe(0);
      expect((await drainOnce(deps())).attempted).toBe(0);
      expect(rx.got.map((r) => r.headers['webhook-id'])).toEqual([b.eventId]);
      // The retry under way is not left pending for the claim to pass over on every drain, nor a
      // next attempt shown in the log (the event queued before was never fanned out to it).
      const left = await db.pool.query(
        `SELECT d.event_id, d.status, d.last_error FROM events.deliveries d JOIN events.endpoints e ON e.id = d.endpoint_id WHERE e.key_id = ANY ($1)`,
        [[a.keyId, b.keyId]],
      );
      expect(left.rows).toEqual([{ event_id: b.eventId, status: 'failed', last_error: 'key revoked' }]);
      const endpointOfB = (await db.pool.query(`SELECT id FROM events.endpoints WHERE key_id = $1`, [b.keyId])).rows[0].id;
      expect((await deliveryLog(db.pool, endpointOfB)).map((l) => [l.delivery_status, l.next_attempt_at])).toEqual([['failed', null]]);
    } finally {
      await rx.close();
    }
  });

  test('several drainers share the outbox: every event is delivered once', async () => {
    const rx = await receiver([200]);
    const other = createPool(db.url, 4);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
      for (let i = 0; i < 24; i++) await sendTestEvent(db.pool, { id: ep.id, key_id: key.id });
      const runs = [];
      for (let i = 0; i < 4; i++) runs.push(drainOnce(deps()), drainOnce(deps({ pool: other })));
      await Promise.all(runs);
      while ((await drainOnce(deps())).attempted > 0);
      const ids = rx.got.map((r) => String(r.headers['webhook-id']));
      expect(ids).toHaveLength(24);
      expect(new Set(ids).size).toBe(24);
    } finally {
      await other.end();
      await rx.close();
    }
  });

  test('the continuous drainer delivers a new event and stops cleanly', async () => {
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
      const drainer = new Drainer({ pool: db.pool, cfg: { ...db.cfg, webhooks: { allowPrivate: true, pollMs: 50 } } }).start();
      const id = await sendTestEvent(db.pool, ep);
      const deadline = Date.now() + 10_000;
      while (rx.got.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      await drainer.stop();
      expect(rx.got.map((r) => r.headers['webhook-id'])).toEqual([id]);
      expect(JSON.parse(rx.got[0].body)).toMatchObject({ id, type: 'webhook.test', data: { endpoint_id: ep.id } });
    } finally {
      await rx.close();
    }
  });
});

describe('agro serve and agro schedule drain the outbox', () => {
  const until = async (cond: () => boolean) => {
    const deadline = Date.now() + 20_000;
    while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    return cond();
  };
  const env = { AGRO_WEBHOOKS_ALLOW_PRIVATE: '1', AGRO_WEBHOOKS_POLL_MS: '100' };
  /** A test event queued here reaches the receiver through the other process's drainer. */
  const expectTestEventDelivered = async (rx: Awaited<ReturnType<typeof receiver>>) => {
    const key = await liveKey();
    const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
    const id = await sendTestEvent(db.pool, ep);
    expect(await until(() => rx.got.length > 0)).toBe(true);
    expect(rx.got.map((r) => r.headers['webhook-id'])).toEqual([id]);
  };

  test('agro serve delivers a new event while serving and stops cleanly on SIGTERM', async () => {
    const rx = await receiver([200]);
    const server = await serveProcess(db.url, db.dataDir, env);
    try {
      await expectTestEventDelivered(rx);
    } finally {
      expect(await server.stop()).toBe(0);
      await rx.close();
    }
  });

  test('agro schedule delivers a new event while waiting for its jobs and stops cleanly on SIGTERM', async () => {
    const rx = await receiver([200]);
    const file = path.join(db.dataDir, 'schedule.json');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { yearly: { cron: '0 0 1 1 *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': path.join(db.dataDir, 'none.zip') } } } }));
    const child = spawn(process.execPath, [path.resolve(__dirname, '../bin/agro.mjs'), 'schedule'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      expect(await until(() => /scheduler started/.test(stderr))).toBe(true);
      await expectTestEventDelivered(rx);
    } finally {
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      await rx.close();
    }
  });
});

describe('signatures', () => {
  test('verified by the standardwebhooks package and by a hand-written HMAC check', async () => {
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: 'quota.threshold', allowPrivate: true });
      expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      await quotaEvent(key.id);
      clock = Date.now();
      await drainOnce(deps());
      const [r] = rx.got;
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-timestamp']).toBe(String(Math.floor(clock / 1000)));
      expect(String(r.headers['x-service-signature'])).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      const verified = new Webhook(ep.secret).verify(r.body, r.headers as Record<string, string>);
      expect(verified).toEqual(JSON.parse(r.body));
      expect(serviceSignatureValid(r, ep.secret)).toBe(true);
      // a tampered body or another secret fails both checks
      const tampered = { ...r, body: r.body.replace('quota', 'quotb') };
      expect(() => new Webhook(ep.secret).verify(tampered.body, r.headers as Record<string, string>)).toThrow();
      expect(serviceSignatureValid(tampered, ep.secret)).toBe(false);
      const other = 'whsec_' + crypto.randomBytes(32).toString('base64');
      expect(() => new Webhook(other).verify(r.body, r.headers as Record<string, string>)).toThrow();
      expect(serviceSignatureValid(r, other)).toBe(false);
    } finally {
      await rx.close();
    }
  });

  test('secret rotation: both secrets sign for 24 h, then only the new one', async () => {
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true, secret: 'whsec_' + Buffer.alloc(32, 7).toString('base64') });
      const rotated = await rotateSecret(db.pool, ep.id, 24, new Date(clock));
      expect(rotated.secret).not.toBe(ep.secret);
      expect(rotated.previous_secret_until.getTime()).toBe(clock + 24 * 3_600_000);

      await sendTestEvent(db.pool, ep);
      await drainOnce(deps());
      const during = rx.got[0];
      expect(String(during.headers['x-service-signature']).match(/v1=/g)).toHaveLength(2);
      expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
      for (const s of [ep.secret, rotated.secret]) {
        expect(serviceSignatureValid(during, s)).toBe(true);
        expect(new Webhook(s).verify(during.body, during.headers as Record<string, string>)).toBeTruthy();
      }

      clock += 25 * 3_600_000;
      await sendTestEvent(db.pool, ep);
      await drainOnce(deps());
      const after = rx.got[1];
      expect(String(after.headers['x-service-signature']).match(/v1=/g)).toHaveLength(1);
      expect(serviceSignatureValid(after, rotated.secret)).toBe(true);
      expect(serviceSignatureValid(after, ep.secret)).toBe(false);
    } finally {
      await rx.close();
    }
  });
});

describe('private targets', () => {
  test('addresses that are not public are recognised', () => {
    for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', '224.0.0.1']) {
      expect(isNonPublicAddress(ip), ip).toBe(true);
    }
    // every other reserved range the list names: IETF protocol assignments, documentation,
    // benchmarking, reserved, NAT64 (64:ff9b::7f00:1 is 127.0.0.1 through a NAT64 gateway), discard-only, multicast
    for (const ip of ['192.0.0.8', '192.0.2.1', '198.18.0.1', '198.19.255.254', '198.51.100.7', '203.0.113.9', '240.0.0.1', '2001:db8::1', '64:ff9b::7f00:1', '100::1', 'ff02::1']) {
      expect(isNonPublicAddress(ip), ip).toBe(true);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '200.152.38.1', '2001:4860:4860::8888', '::ffff:8.8.8.8']) expect(isNonPublicAddress(ip), ip).toBe(false);
  });

  test('a URL with credentials, or of another scheme, is refused at subscription even where private targets are allowed', async () => {
    const key = await liveKey();
    const refused = (url: string, why: RegExp) => expect(addEndpoint(db.pool, { keyId: key.id, url, events: '*', allowPrivate: true })).rejects.toSatisfy(
      (e) => isAgroError(e, 'webhook_target_refused') && why.test((e as Error).message),
    );
    await refused('http://user:pw@127.0.0.1:9/hook', /credentials in the URL are not accepted/);
    await refused('http://user@127.0.0.1:9/hook', /credentials in the URL are not accepted/);
    await refused('ftp://127.0.0.1/hook', /ftp: URLs are not delivered to/);
    await refused('not a url', /not a URL: not a url/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM events.endpoints WHERE key_id = $1`, [key.id])).rows[0].n).toBe(0);
  });

  test('a webhook to 127.0.0.1 is refused without AGRO_WEBHOOKS_ALLOW_PRIVATE, at subscription and at delivery', async () => {
    const strict = loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_WEBHOOKS_ALLOW_PRIVATE: '' });
    expect(strict.webhooks.allowPrivate).toBe(false);
    expect(db.cfg.webhooks.allowPrivate).toBe(true);
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      await expect(addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: strict.webhooks.allowPrivate })).rejects.toSatisfy(
        (e) => isAgroError(e, 'webhook_target_refused') && /127\.0\.0\.1.*private, loopback or link-local/.test((e as Error).message),
      );
      // a name is judged by what it resolves to
      const port = new URL(rx.url).port;
      await expect(addEndpoint(db.pool, { keyId: key.id, url: `http://localhost:${port}/`, events: '*', allowPrivate: false })).rejects.toSatisfy((e) => isAgroError(e, 'webhook_target_refused'));
      await expect(vetTarget(new URL('http://hooks.example.test/'), false, async () => [{ address: '93.184.216.34', family: 4 }, { address: '10.0.0.7', family: 4 }])).rejects.toSatisfy(
        (e) => isAgroError(e, 'webhook_target_refused') && /10\.0\.0\.7/.test((e as Error).message),
      );
      await expect(vetTarget(new URL('http://hooks.example.test/'), false, async () => [{ address: '93.184.216.34', family: 4 }])).resolves.toHaveLength(1);
      // subscribed while allowed, delivered after the setting is gone: refused, nothing sent
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
      await sendTestEvent(db.pool, ep);
      expect(await drainOnce(deps({ cfg: strict }))).toMatchObject({ attempted: 1, retrying: 1 });
      expect(rx.got).toHaveLength(0);
      const [a] = await deliveryLog(db.pool, ep.id);
      expect(a.status_code).toBeNull();
      expect(a.error).toMatch(/127\.0\.0\.1, a private, loopback or link-local address/);
    } finally {
      await rx.close();
    }
  });
});

describe('agro webhooks and agro monitors', () => {
  const AGRO = path.resolve(__dirname, '../bin/agro.mjs');
  // asynchronous: the receivers live in this process and must answer while the command runs
  const agro = (args: string[], env: Record<string, string> = {}, stdin?: string) =>
    new Promise<{ code: number | null; out: any; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [AGRO, ...args, '--json'], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'warn', ...env }, stdio: ['pipe', 'pipe', 'pipe'],
      });
      child.stdin.end(stdin ?? '');
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      child.on('exit', (code) => resolve({ code, out: out ? JSON.parse(out) : null, stderr: err }));
    });

  test('add, list, deliver --once, replay, remove; monitors add, list, remove', async () => {
    const rx = await receiver([200]);
    try {
      const key = await liveKey();
      const refused = await agro(['webhooks', 'add', '--key', key.id, '--url', rx.url, '--events', 'quota.threshold'], { AGRO_WEBHOOKS_ALLOW_PRIVATE: '' });
      expect(refused.code).toBe(2);
      expect(refused.out.error.code).toBe('webhook_target_refused');
      const env = { AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' };
      await expect(addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: 'nope.event', allowPrivate: true })).rejects.toSatisfy((e) => isAgroError(e, 'usage'));
      const added = await agro(['webhooks', 'add', '--key', key.id, '--url', rx.url, '--events', 'quota.threshold,car.situacao.alterada'], env);
      expect(added.code).toBe(0);
      expect(added.out).toMatchObject({ key_id: key.id, url: rx.url, events: ['car.situacao.alterada', 'quota.threshold'] });
      expect(added.out.secret).toMatch(/^whsec_/);
      const listed = await agro(['webhooks', 'list', '--key', key.id], env);
      expect(listed.out.endpoints.map((e: { id: string }) => e.id)).toEqual([added.out.id]);
      expect(JSON.stringify(listed.out)).not.toContain(added.out.secret);

      const eventId = await quotaEvent(key.id);
      const delivered = await agro(['webhooks', 'deliver', '--once'], env);
      expect(delivered.out).toMatchObject({ delivered: 1 });
      expect(rx.got).toHaveLength(1);
      expect(new Webhook(added.out.secret).verify(rx.got[0].body, rx.got[0].headers as Record<string, string>)).toMatchObject({ id: eventId });
      const replayed = await agro(['webhooks', 'replay', eventId], env);
      expect(replayed.out).toMatchObject({ event_id: eventId, deliveries: 1, delivered: 1 });
      expect(rx.got.map((r) => r.headers['webhook-id'])).toEqual([eventId, eventId]);
      const log = await agro(['webhooks', 'log', added.out.id], env);
      expect(log.out.attempts).toHaveLength(2);
      expect((await agro(['webhooks', 'remove', added.out.id], env)).out).toEqual({ id: added.out.id, removed: true });
      expect((await agro(['webhooks', 'list', '--key', key.id], env)).out.endpoints).toEqual([]);

      const car = 'GO-5208707-0123456789ABCDEF0123456789ABCDEF';
      const m = await agro(['monitors', 'add', '--key', key.id, 'car', car.toLowerCase()]);
      expect(m.out).toMatchObject({ key_id: key.id, kind: 'car', record: car, created: true });
      expect((await agro(['monitors', 'add', '--key', key.id, 'car', car])).out).toMatchObject({ id: m.out.id, created: false });
      const c = await agro(['monitors', 'add', '--key', key.id, 'cnpj', '11222333000181']);
      expect(c.out).toMatchObject({ kind: 'cnpj', record: '11.222.333/0001-81' });
      expect((await agro(['monitors', 'add', '--key', key.id, 'cnpj', '11222333000182'])).code).toBe(2);
      await expect(addMonitor(db.pool, 'key_missing', 'car', car)).rejects.toSatisfy((e) => isAgroError(e, 'key_not_found'));
      expect((await agro(['monitors', 'list', '--key', key.id])).out.monitors.map((x: { id: string }) => x.id)).toEqual([m.out.id, c.out.id]);
      expect((await agro(['monitors', 'remove', m.out.id])).out).toEqual({ id: m.out.id, removed: true });
      expect(await removeMonitor(db.pool, m.out.id)).toBe(false);
      expect((await agro(['monitors', 'list', '--key', key.id])).out.monitors).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });

  test('a deliverer SIGKILLed mid-POST: webhooks log shows the delivery in flight until its lease ends, deliver --once says it left it', async () => {
    const rx = await receiver(['hang']);
    try {
      const key = await liveKey();
      const ep = await addEndpoint(db.pool, { keyId: key.id, url: rx.url, events: '*', allowPrivate: true });
      const eventId = await sendTestEvent(db.pool, ep);
      const env = { AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' };
      const child = spawn(process.execPath, [AGRO, 'webhooks', 'deliver'], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent', ...env }, stdio: 'ignore',
      });
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
      const deadline = Date.now() + 60_000;
      while (rx.got.length === 0 && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 20));
      expect(rx.got, 'the POST reached the receiver').toHaveLength(1);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');

      const before = Date.now();
      const log = await agro(['webhooks', 'log', ep.id], env);
      expect(log.code).toBe(0);
      expect(log.out.attempts).toEqual([]);
      expect(log.out.in_flight).toEqual([{ event_id: eventId, type: 'webhook.test', attempt: 1, since: expect.any(String), lease_until: expect.any(String) }]);
      const [f] = log.out.in_flight;
      expect(Date.parse(f.lease_until) - Date.parse(f.since)).toBe(60_000);
      expect(Date.parse(f.lease_until)).toBeGreaterThan(before);
      expect(Date.parse(f.since)).toBeLessThanOrEqual(before);
      const text = spawnSync(process.execPath, [AGRO, 'webhooks', 'log', ep.id], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' }, encoding: 'utf8',
      });
      expect(text.stdout).toContain(`${eventId}  webhook.test`);
      expect(text.stdout).toContain(`in flight (a deliverer holds it until ${f.lease_until}`);

      const once = await agro(['webhooks', 'deliver', '--once'], env);
      expect(once.out).toMatchObject({ attempted: 0, leased_elsewhere: 1, leased_until: f.lease_until });
      expect(rx.got).toHaveLength(1);
      // The lease over, the delivery is no longer in flight: the next pass tries it again.
      await db.pool.query(`UPDATE events.deliveries SET lease_until = now() - interval '1 second' WHERE event_id = $1`, [eventId]);
      expect((await agro(['webhooks', 'log', ep.id], env)).out.in_flight).toEqual([]);
    } finally {
      await rx.close();
    }
  }, 120_000);

  test('the secret from --secret-file or stdin (out of ps); both at once, or an unreadable file, is a usage error', async () => {
    const key = await liveKey();
    const env = { AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' };
    const secret = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
    const file = path.join(db.dataDir, 'hook-secret');
    fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
    const base = ['webhooks', 'add', '--key', key.id, '--url', 'http://127.0.0.1:9/a', '--events', 'quota.threshold'];
    const fromFile = await agro([...base, '--secret-file', file], env);
    expect(fromFile.code).toBe(0);
    expect(fromFile.out.secret).toBe(secret);
    const fromStdin = await agro([...base, '--secret-file', '-'], env, `${secret}\r\n`);
    expect(fromStdin.out.secret).toBe(secret);
    const stored = await db.pool.query('SELECT secret FROM events.endpoints WHERE id = ANY($1) ORDER BY id', [[fromFile.out.id, fromStdin.out.id]]);
    expect(stored.rows.map((r) => r.secret)).toEqual([secret, secret]);
    const both = await agro([...base, '--secret', secret, '--secret-file', file], env);
    expect(both.code).toBe(2);
    expect(both.out.error.message).toMatch(/not both/);
    const missing = await agro([...base, '--secret-file', path.join(db.dataDir, 'nope')], env);
    expect(missing.code).toBe(2);
    expect(missing.out.error.message).toMatch(/--secret-file .*nope/);
  });
});
