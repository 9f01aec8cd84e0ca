// Key lifecycle (issue 10): 401 for every kind of bad key, rotation with a grace period (the
// server's key cache included), revoked keys listed for 30 days, `agro keys rotate`.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEndpoint } from '../src/events/endpoints.ts';
import { createKey, listKeys, purgeRevokedKeys, revokeKey, rotateKey } from '../src/platform/keys.ts';
import { call, eventually, expectEnvelope, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let api: Running;

beforeAll(async () => {
  db = await testDatabase();
  api = await startApi(db.cfg, db.url, db);
}, 120_000);

afterAll(async () => {
  await api?.close();
  await db?.drop();
});

// The history needs no data set: any key can read its own.
const hit = (key?: string) => call(api.base, '/v1/car/history', { key });


describe('keys', () => {
  test('401 for missing, malformed, unknown, revoked and expired-after-rotation keys', async () => {
    expectEnvelope(await hit(), 401, 'unauthorized');
    expectEnvelope(await hit('ck_live_short'), 401, 'unauthorized');
    const gone = await createKey(db.pool, { env: 'live', plan: 'starter' });
    await db.pool.query(`DELETE FROM platform.api_keys WHERE id = $1`, [gone.id]);
    expectEnvelope(await hit(gone.key), 401, 'unauthorized');
    const rev = await createKey(db.pool, { env: 'live', plan: 'starter' });
    expect((await hit(rev.key)).status).toBe(200);
    await revokeKey(db.pool, rev.id);
    await eventually(async () => expectEnvelope(await hit(rev.key), 401, 'unauthorized'));

    const old = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'rotating' });
    expect((await hit(old.key)).status).toBe(200); // now cached by the server
    const r = await rotateKey(db.pool, old.id, 1.5 / 3600); // 1.5 s of grace
    expect(r.key).toMatchObject({ env: 'live', plan: 'growth', name: 'rotating' });
    expect(r.key.key).not.toBe(old.key);
    expect((await hit(r.key.key)).status).toBe(200);
    expect((await hit(old.key)).status).toBe(200); // in its grace period
    await new Promise((res) => setTimeout(res, Math.max(0, r.old.expires_at.getTime() - Date.now()) + 100));
    const e = expectEnvelope(await hit(old.key), 401, 'unauthorized'); // no notification at expiry: the cache checks it
    expect(e.message).toMatch(/unknown or revoked/);
    expect((await hit(r.key.key)).status).toBe(200);
    await expect(rotateKey(db.pool, old.id, 24)).rejects.toMatchObject({ code: 'key_not_found' });
  });

  test('the default grace is 24 h; revoking a rotated key ends its grace at once', async () => {
    expect(db.cfg.api.keyRotationGraceHours).toBe(24);
    const old = await createKey(db.pool, { env: 'test', plan: 'starter' });
    const r = await rotateKey(db.pool, old.id, db.cfg.api.keyRotationGraceHours);
    expect(Math.round((r.old.expires_at.getTime() - Date.now()) / 3_600_000)).toBe(24);
    expect((await hit(old.key)).status).toBe(200);
    await revokeKey(db.pool, old.id);
    await eventually(async () => expectEnvelope(await hit(old.key), 401, 'unauthorized'));
  });

  test('a grace that is no number of hours >= 0 is refused before anything changes: the key stays active, with no successor', async () => {
    const k = await createKey(db.pool, { env: 'live', plan: 'starter' });
    for (const g of [-1, NaN]) await expect(rotateKey(db.pool, k.id, g), String(g)).rejects.toMatchObject({ code: 'usage', message: expect.stringContaining(`the grace period is a number of hours ≥ 0, got ${g}`) });
    expect((await db.pool.query(`SELECT revoked_at, replaced_by FROM platform.api_keys WHERE id = $1`, [k.id])).rows).toEqual([{ revoked_at: null, replaced_by: null }]);
    expect((await hit(k.key)).status).toBe(200);
  });

  test('revoked keys stay listed, with their history, for 30 days; then the purge removes both', async () => {
    const recent = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'recent' });
    const ancient = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'ancient' });
    await hit(recent.key);
    await hit(ancient.key);
    await api.app.flushHistory(); // history rows are written in batches
    await db.pool.query(`UPDATE platform.api_keys SET revoked_at = now() - interval '29 days' WHERE id = $1`, [recent.id]);
    await db.pool.query(`UPDATE platform.api_keys SET revoked_at = now() - interval '31 days' WHERE id = $1`, [ancient.id]);
    const ids = (await listKeys(db.pool)).map((k) => k.id);
    expect(ids).toContain(recent.id);
    expect(ids).not.toContain(ancient.id);
    expect(await purgeRevokedKeys(db.pool)).toBeGreaterThanOrEqual(1);
    const left = await db.pool.query(`SELECT key_id, count(*)::int AS n FROM platform.requests WHERE key_id = ANY($1) GROUP BY key_id`, [[recent.id, ancient.id]]);
    expect(left.rows).toEqual([{ key_id: recent.id, n: 1 }]);
    expect((await db.pool.query(`SELECT 1 FROM platform.api_keys WHERE id = $1`, [ancient.id])).rowCount).toBe(0);
  });

  test('agro keys rotate prints the successor once and when the old key stops working', () => {
    const k = createKey(db.pool, { env: 'live', plan: 'scale', name: 'cli' });
    return k.then((old) => {
      const root = path.resolve(__dirname, '..');
      const env = { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_KEY_ROTATION_GRACE_HOURS: '2' };
      const r = spawnSync(process.execPath, [path.join(root, 'bin/agro.mjs'), 'keys', 'rotate', old.id, '--json'], { cwd: root, env, encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      const j = JSON.parse(r.stdout);
      expect(j).toMatchObject({ env: 'live', plan: 'scale', name: 'cli', replaces: old.id });
      expect(j.key).toMatch(/^ck_live_/);
      expect(Math.round((Date.parse(j.old_key_expires_at) - Date.now()) / 3_600_000)).toBe(2);
      const again = spawnSync(process.execPath, [path.join(root, 'bin/agro.mjs'), 'keys', 'rotate', old.id, '--json'], { cwd: root, env, encoding: 'utf8' });
      expect(again.status).not.toBe(0);
      expect(JSON.parse(again.stdout).error.code).toBe('key_not_found');
    });
  }, 60_000);

  test('agro platform purge applies the retentions', async () => {
    const k = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'purge' });
    await db.pool.query(`INSERT INTO platform.requests (id, key_id, method, path, status, billable, created_at) VALUES ('req_purge_old', $1, 'GET', '/v1/x', 200, true, now() - interval '14 months')`, [k.id]);
    await db.pool.query(`INSERT INTO platform.idempotency (key_id, method, path, idem_key, body_sha256, state, expires_at) VALUES ($1, 'POST', '/v1/x', 'old', '\\x00', 'done', now() - interval '1 hour')`, [k.id]);
    // Webhook deliveries of events past the history retention go with their log when settled
    // (delivered, given up) or when their endpoint is disabled; a pending one and a recent
    // event's stay; the events stay, their ids unique (before: nothing was ever purged).
    const ep = await addEndpoint(db.pool, { keyId: k.id, url: 'https://hooks.example.com/old', events: '*', allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 }] });
    const event = async (dedupe: string, monthsAgo: number, status: 'delivered' | 'failed' | 'pending') => {
      const id = (await db.pool.query(`SELECT events.enqueue('quota.threshold', $1, $2, '{}'::jsonb) AS id`, [dedupe, k.id])).rows[0].id;
      const at = `now() - make_interval(months => ${monthsAgo})`;
      await db.pool.query(`UPDATE events.outbox SET created_at = ${at}, dispatched_at = ${at} WHERE id = $1`, [id]);
      await db.pool.query(`INSERT INTO events.deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, created_at) VALUES ($1, $2, $3, 1, ${at}, ${at})`, [id, ep.id, status]);
      await db.pool.query(`INSERT INTO events.attempts (event_id, endpoint_id, attempt, at, status_code, duration_ms) VALUES ($1, $2, 1, ${at}, 204, 5)`, [id, ep.id]);
      return id;
    };
    const gone = [await event('purge-a', 14, 'delivered'), await event('purge-b', 20, 'failed')];
    const kept = [await event('purge-c', 2, 'delivered'), await event('purge-d', 14, 'pending')];
    const disabled = await addEndpoint(db.pool, { keyId: k.id, url: 'https://hooks.example.com/gone', events: '*', allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 }] });
    await db.pool.query(`UPDATE events.endpoints SET disabled_at = now(), disabled_reason = '410 Gone' WHERE id = $1`, [disabled.id]);
    await db.pool.query(`INSERT INTO events.deliveries (event_id, endpoint_id, status, attempts, next_attempt_at) VALUES ($1, $2, 'pending', 3, now())`, [kept[1], disabled.id]);
    await db.pool.query(`INSERT INTO events.form_tokens (token, endpoint_id, used_at) VALUES ('purge-old', $1, now() - interval '37 hours'), ('purge-new', $1, now() - interval '11 hours')`, [ep.id]);
    const oldForm = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'old form' });
    const newForm = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'new form' });
    await db.pool.query(`UPDATE platform.api_keys SET form_token = 'purge-key-old', created_at = now() - interval '37 hours' WHERE id = $1`, [oldForm.id]);
    await db.pool.query(`UPDATE platform.api_keys SET form_token = 'purge-key-new' WHERE id = $1`, [newForm.id]);
    const root = path.resolve(__dirname, '..');
    const r = spawnSync(process.execPath, [path.join(root, 'bin/agro.mjs'), 'platform', 'purge', '--json'], { cwd: root, env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir }, encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.history_rows).toBeGreaterThanOrEqual(1);
    expect(j.idempotency_answers).toBeGreaterThanOrEqual(1);
    expect((await db.pool.query(`SELECT 1 FROM platform.requests WHERE id = 'req_purge_old'`)).rowCount).toBe(0);
    expect((await db.pool.query(`SELECT 1 FROM platform.idempotency WHERE key_id = $1`, [k.id])).rowCount).toBe(0);
    expect(j.webhook_deliveries).toBe(3);
    const left = async (table: string, col: string) => (await db.pool.query(`SELECT ${col} AS id FROM ${table} WHERE ${col} = ANY ($1) ORDER BY 1`, [[...gone, ...kept]])).rows.map((x) => x.id);
    for (const [t, col] of [['events.deliveries', 'event_id'], ['events.attempts', 'event_id']]) expect(await left(t, col)).toEqual([...kept].sort());
    expect((await db.pool.query(`SELECT endpoint_id FROM events.deliveries WHERE event_id = $1`, [kept[1]])).rows).toEqual([{ endpoint_id: ep.id }]);
    expect(await left('events.outbox', 'id')).toEqual([...gone, ...kept].sort());
    // The panel's one-time form tokens outlive the session that could post their form again
    // (12 h, its CSRF token with it) by a day, then go; a key keeps itself, not its token.
    expect(j.form_tokens).toBe(2);
    expect((await db.pool.query(`SELECT token FROM events.form_tokens WHERE token LIKE 'purge-%' ORDER BY 1`)).rows).toEqual([{ token: 'purge-new' }]);
    expect((await db.pool.query(`SELECT id, form_token FROM platform.api_keys WHERE id = ANY ($1) ORDER BY form_token NULLS FIRST`, [[oldForm.id, newForm.id]])).rows)
      .toEqual([{ id: oldForm.id, form_token: null }, { id: newForm.id, form_token: 'purge-key-new' }]);
  }, 60_000);
});

test('migrations 0087 and 0089 on keys rotated before them: each successor counts on its chain\'s first key, with the month it had counted', async () => {
  // The state before 0087: a chain a → b → c and a key never rotated, each with this month's usage on its own id.
  const [a, b, c, d] = await Promise.all(['a', 'b', 'c', 'd'].map((n) => createKey(db.pool, { env: 'live', plan: 'starter', name: `pre-0087 ${n}` })));
  await db.pool.query(`UPDATE platform.api_keys SET replaced_by = CASE id WHEN $1 THEN $2 WHEN $2 THEN $3 END, revoked_at = CASE WHEN id IN ($1, $2) THEN now() END, meter_id = NULL WHERE id IN ($1, $2, $3, $4)`, [a.id, b.id, c.id, d.id]);
  const month = `${new Date().toISOString().slice(0, 7)}-01`;
  for (const [k, used] of [[a, 10], [b, 45], [c, 2], [d, 7]] as const) {
    await db.pool.query(`INSERT INTO platform.usage_months (key_id, month, used) VALUES ($1, $2, $3) ON CONFLICT (key_id, month) DO UPDATE SET used = EXCLUDED.used`, [k.id, month, used]);
  }
  const sql = (f: string) => fs.readFileSync(path.join(import.meta.dirname, '..', 'sql', f), 'utf8');
  // 0087's backfill (its ALTER TABLE already ran in this database), then 0089 as it is.
  await db.pool.query(sql('0087_key_meter.sql').slice(sql('0087_key_meter.sql').indexOf('WITH RECURSIVE')));
  await db.pool.query(sql('0089_meter_usage.sql'));
  const keys = await db.pool.query(`SELECT id, meter_id FROM platform.api_keys WHERE id IN ($1, $2, $3, $4)`, [a.id, b.id, c.id, d.id]);
  expect(Object.fromEntries(keys.rows.map((r) => [r.id, r.meter_id]))).toEqual({ [a.id]: null, [b.id]: a.id, [c.id]: a.id, [d.id]: null });
  const usage = await db.pool.query(`SELECT key_id, used FROM platform.usage_months WHERE key_id IN ($1, $2, $3, $4) AND month = $5`, [a.id, b.id, c.id, d.id, month]);
  expect(Object.fromEntries(usage.rows.map((r) => [r.key_id, r.used]))).toEqual({ [a.id]: 57, [d.id]: 7 });
});
