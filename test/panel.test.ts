// The account panel in a real headless Chromium (Debian's chromium through puppeteer-core):
// sign in with an API key, create a key (shown once), see a call appear in the history,
// revoke the key. Also: cookie flags, CSRF refusal, no script needed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEndpoint } from '../src/events/endpoints.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { call, eventually, expectEnvelope, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let api: Running;
let browser: Browser;
let profile: string;

beforeAll(async () => {
  db = await testDatabase();
  api = await startApi(db.cfg, db.url, db);
  profile = fs.mkdtempSync(path.join(os.tmpdir(), 'panel-chromium-'));
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await api?.close();
  await db?.drop();
  if (profile) fs.rmSync(profile, { recursive: true, force: true });
});


describe('account panel', () => {
  test('sign in, create a key, see its call in the history, revoke it', async () => {
    const owner = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'Banco X' });
    const page = await browser.newPage();
    await page.setJavaScriptEnabled(false); // the panel must work without script
    await page.goto(`${api.base}/panel`);
    expect(await page.$('input[name=api_key]')).not.toBeNull();

    // Sign in: a session cookie, HttpOnly and SameSite=Strict.
    await page.type('input[name=api_key]', owner.key);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    expect(await page.$eval('h1', (e) => e.textContent)).toBe('Account panel');
    const cookies = await browser.cookies();
    const session = cookies.find((c) => c.name === 'agro_panel')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/panel' });
    const text = await page.$eval('body', (e) => e.textContent!);
    expect(text).toContain('growth');
    expect(text).toContain('0 of 100');
    expect(await page.$('svg[aria-label="billable requests per day"]')).not.toBeNull();
    expect(await page.content()).not.toMatch(/<script/i);

    // Create a key: shown once.
    await page.type('input[name=name]', 'from the panel');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/panel/keys"] button[type=submit]')]);
    const newKey = await page.$eval('#new-key', (e) => e.textContent!);
    expect(newKey).toMatch(/^ck_live_[0-9A-Za-z]{38}$/);
    const newId = (await db.pool.query(`SELECT id, plan, account_id FROM platform.api_keys WHERE name = 'from the panel'`)).rows[0];
    expect(newId).toMatchObject({ plan: 'growth', account_id: owner.id });
    await page.goto(`${api.base}/panel`);
    expect(await page.content()).not.toContain(newKey); // never shown again
    expect(await page.$(`tr[data-key="${newId.id}"]`)).not.toBeNull();

    // A call by the signed-in key appears in its history, CPF masked.
    const r = await call(api.base, '/v1/car/by-document/52998224725', { key: owner.key, headers: { 'x-lgpd-base-legal': 'consentimento' } });
    expect(r.status).toBe(503); // no data loaded here: still a request of the history, not billed
    expect((await call(api.base, '/v1/car/history?limit=5', { key: owner.key })).status).toBe(200);
    await page.reload();
    const rows = await page.$$eval('#history tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent!.trim())));
    expect(rows[0].slice(1)).toEqual(['GET', '/v1/car/history?limit=5', '200', 'no', '']);
    expect(rows[1].slice(1)).toEqual(['GET', '/v1/car/by-document/***.982.247-**', '503', 'no', 'consentimento']);
    expect(await page.content()).not.toContain('52998224725');
    // Date filter: nothing yesterday.
    const y = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await page.goto(`${api.base}/panel?from=${y}&to=${y}`);
    expect(await page.$$eval('#history tbody tr', (trs) => trs.length)).toBe(0);

    // Revoke the new key.
    expect((await call(api.base, '/v1/car/history', { key: newKey })).status).toBe(200);
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-key="${newId.id}"] form[action$="/revoke"] button`)]);
    expect(await page.$eval(`tr[data-key="${newId.id}"] .state`, (e) => e.textContent!)).toMatch(/^revoked /);
    await eventually(async () => expectEnvelope(await call(api.base, '/v1/car/history', { key: newKey }), 401, 'unauthorized'));
    await page.close();
  }, 120_000);

  test('forms refuse a missing or wrong CSRF token; a bad key does not sign in', async () => {
    const owner = await createKey(db.pool, { env: 'live', plan: 'starter' });
    const bad = await fetch(`${api.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: owner.key + 'x' }), redirect: 'manual' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('set-cookie')).toBeNull();
    const login = await fetch(`${api.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: owner.key }), redirect: 'manual' });
    expect(login.status).toBe(303);
    const setCookie = login.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    const cookie = setCookie.split(';')[0];
    const forged = await fetch(`${api.base}/panel/keys`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ name: 'forged', csrf: 'nope' }), redirect: 'manual' });
    expect(forged.status).toBe(403);
    const none = await fetch(`${api.base}/panel/keys`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ name: 'forged' }), redirect: 'manual' });
    expect(none.status).toBe(403);
    expect((await db.pool.query(`SELECT 1 FROM platform.api_keys WHERE name = 'forged'`)).rowCount).toBe(0);
    // Another account's key cannot be revoked from this session.
    const html = await (await fetch(`${api.base}/panel`, { headers: { cookie } })).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1];
    const stranger = await createKey(db.pool, { env: 'live', plan: 'starter' });
    const cross = await fetch(`${api.base}/panel/keys/${stranger.id}/revoke`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ csrf }), redirect: 'manual' });
    expect(cross.status).toBe(404);
    expect((await db.pool.query(`SELECT revoked_at FROM platform.api_keys WHERE id = $1`, [stranger.id])).rows[0].revoked_at).toBeNull();
    // Rotate the session's own key: the successor shown once, the old key in its 24 h grace.
    const rot = await fetch(`${api.base}/panel/keys/${owner.id}/rotate`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ csrf }), redirect: 'manual' });
    expect(rot.status).toBe(201);
    const successor = /<code id="new-key">(ck_live_\w+)<\/code>/.exec(await rot.text())![1];
    expect((await call(api.base, '/v1/car/history', { key: successor })).status).toBe(200);
    expect((await call(api.base, '/v1/car/history', { key: owner.key })).status).toBe(200);
    const row = (await db.pool.query(`SELECT replaced_by, revoked_at > now() + interval '23 hours' AS in_grace FROM platform.api_keys WHERE id = $1`, [owner.id])).rows[0];
    expect(row.in_grace).toBe(true);
    expect(row.replaced_by).toMatch(/^key_/);
  });

  test('a session signed in with a test key manages test keys only: it cannot mint, revoke or rotate a live key of its account, nor touch its webhooks', async () => {
    const live = await createKey(db.pool, { env: 'live', plan: 'starter', name: 'prod' });
    const sandbox = await createKey(db.pool, { env: 'test', plan: 'starter', name: 'ci', accountId: live.id });
    const hook = await addEndpoint(db.pool, { keyId: live.id, url: 'https://8.8.8.8/hooks', events: '*', allowPrivate: false });
    const watched = await addMonitor(db.pool, live.id, 'cnpj', '45.723.174/0001-10');
    const login = await fetch(`${api.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: sandbox.key }), redirect: 'manual' });
    expect(login.status).toBe(303);
    const cookie = login.headers.get('set-cookie')!.split(';')[0];
    const html = await (await fetch(`${api.base}/panel`, { headers: { cookie } })).text();
    const csrf = /name="csrf" value="([^"]+)"/.exec(html)![1];
    expect(html).toContain(`data-key="${live.id}"`);
    expect(html).not.toContain(`action="/panel/keys/${live.id}/revoke"`);
    expect(html).not.toContain('<option>live</option>');
    const post = (path: string, fields: Record<string, string>) =>
      fetch(`${api.base}${path}`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ csrf, ...fields }), redirect: 'manual' });

    const minted = await post('/panel/keys', { env: 'live', name: 'escalated' });
    expect(minted.status).toBe(403);
    expect(await minted.text()).not.toMatch(/ck_live_/);
    expect((await db.pool.query(`SELECT env FROM platform.api_keys WHERE name = 'escalated'`)).rows).toEqual([]);
    expect((await post(`/panel/keys/${live.id}/rotate`, {})).status).toBe(403);
    expect((await post(`/panel/keys/${live.id}/revoke`, {})).status).toBe(403);
    expect((await db.pool.query(`SELECT revoked_at, replaced_by FROM platform.api_keys WHERE id = $1`, [live.id])).rows[0]).toEqual({ revoked_at: null, replaced_by: null });
    expect((await call(api.base, '/v1/car/history', { key: live.key })).status).toBe(200);
    // Nor the live key's subscriptions: a rotated secret would be shown to it, signing for the live receiver.
    expect(await (await fetch(`${api.base}/panel/webhooks`, { headers: { cookie } })).text()).not.toContain(hook.id);
    expect((await fetch(`${api.base}/panel/webhooks/${hook.id}`, { headers: { cookie } })).status).toBe(404);
    for (const action of ['rotate', 'remove', 'test']) expect((await post(`/panel/webhooks/${hook.id}/${action}`, {})).status, action).toBe(404);
    expect((await post(`/panel/monitors/${watched.id}/remove`, {})).status).toBe(404);
    expect((await db.pool.query(`SELECT secret FROM events.endpoints WHERE id = $1`, [hook.id])).rows[0].secret).toBe(hook.secret);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM events.monitors WHERE id = $1`, [watched.id])).rows[0].n).toBe(1);

    // Test keys it may still create and rotate.
    const made = await post('/panel/keys', { env: 'test', name: 'ci 2' });
    expect(made.status).toBe(201);
    expect(await made.text()).toMatch(/<code id="new-key">ck_test_\w+<\/code>/);
    expect((await post(`/panel/keys/${sandbox.id}/rotate`, {})).status).toBe(201);
  });
});
