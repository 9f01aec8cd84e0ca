// The account panel as its users meet it when something goes wrong: an error on a panel form is
// a page (never the API's JSON envelope), a form sent back with an error keeps what was typed
// (CPFs masked), and every page fits a 375 px wide phone with long values in it. Real server on
// loopback, real HTTP, Debian's headless Chromium.
import type { Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { addEndpoint, rotateSecret } from '../src/events/endpoints.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { call, emptyApi, startApi } from './helpers/api.ts';
import { launchChromium } from './helpers/chromium.ts';

const fx = emptyApi();
let chromium: { browser: Browser; close: () => Promise<void> };

beforeAll(async () => {
  chromium = await launchChromium();
}, 120_000);

afterAll(async () => chromium?.close());

/** Signs in with a key: the session cookie and the CSRF token of its forms. */
async function signIn(base: string, key: string): Promise<{ cookie: string; csrf: string; post: (path: string, fields: Record<string, string | string[]>) => Promise<Response> }> {
  const login = await fetch(`${base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: key }), redirect: 'manual' });
  expect(login.status).toBe(303);
  const cookie = login.headers.get('set-cookie')!.split(';')[0];
  const csrf = /name="csrf" value="([^"]+)"/.exec(await (await fetch(`${base}/panel`, { headers: { cookie } })).text())![1];
  const post = (path: string, fields: Record<string, string | string[]>) => {
    const body = new URLSearchParams({ csrf });
    for (const [k, v] of Object.entries(fields)) for (const x of [v].flat()) body.append(k, x);
    return fetch(`${base}${path}`, { method: 'POST', headers: { cookie }, body, redirect: 'manual' });
  };
  return { cookie, csrf, post };
}

const expectPage = async (r: Response, status: number) => {
  const text = await r.text();
  expect(r.status, text.slice(0, 300)).toBe(status);
  expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(text).toMatch(/^<!doctype html>/);
  expect(text).not.toContain('"error":{');
  return text;
};

describe('panel errors are pages', () => {
  test('a key already rotated shows no Rotate button; rotating it again (a reload of the rotate form) is a page that says so', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'rot' });
    const { cookie, post } = await signIn(fx.api.base, owner.key);
    expect((await post(`/panel/keys/${owner.id}/rotate`, {})).status).toBe(201);
    const html = await (await fetch(`${fx.api.base}/panel`, { headers: { cookie } })).text();
    expect(html).not.toContain(`action="/panel/keys/${owner.id}/rotate"`);
    expect(html).toContain(`action="/panel/keys/${owner.id}/revoke"`); // still in its grace period: may be ended now
    const again = await expectPage(await post(`/panel/keys/${owner.id}/rotate`, {}), 404);
    expect(again).toContain('already rotated');
    expect(again).toContain('href="/panel"');
  });

  test('revoking the session’s own key says the session has ended and drops its cookie', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'self' });
    const { cookie, post } = await signIn(fx.api.base, owner.key);
    const r = await post(`/panel/keys/${owner.id}/revoke`, {});
    expect(r.headers.get('set-cookie')).toMatch(/^agro_panel=;.*Expires=Thu, 01 Jan 1970/);
    const text = await expectPage(r, 200);
    expect(text).toContain(`Key ${owner.id} revoked: this session, signed in with it, has ended.`);
    expect(text).toContain('name="api_key"');
    expect((await fx.db.pool.query(`SELECT count(*)::int AS n FROM platform.panel_sessions WHERE key_id = $1`, [owner.id])).rows[0].n).toBe(0);
    expect(await (await fetch(`${fx.api.base}/panel`, { headers: { cookie } })).text()).toContain('name="api_key"');
  });

  test('sign-ins over the failure limit are refused with a page and Retry-After, not JSON', async () => {
    const limited = await startApi({ ...fx.db.cfg, api: { ...fx.db.cfg.api, authFailuresPerMinute: 2 } }, fx.db.url, fx.db);
    try {
      for (let i = 0; i < 2; i++) await expectPage(await fetch(`${limited.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: 'ck_live_' + 'x'.repeat(38) }) }), 401);
      const r = await fetch(`${limited.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: 'ck_live_' + 'y'.repeat(38) }) });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      const text = await expectPage(r, 429);
      expect(text).toContain('too many failed authentications');
      expect(text).toContain('name="api_key"'); // the sign-in form, to try again later
    } finally {
      await limited.close();
    }
  });

  test('/panel/ redirects to /panel (its query kept); an unknown panel page is the panel’s 404 page, another method its 405 page; the API’s stay JSON', async () => {
    for (const [path, to] of [['/panel/', '/panel'], ['/panel/?from=2026-01-01', '/panel?from=2026-01-01']]) {
      const r = await fetch(`${fx.api.base}${path}`, { redirect: 'manual' });
      expect(r.status, path).toBe(308);
      expect(r.headers.get('location')).toBe(to);
    }
    const nope = await expectPage(await fetch(`${fx.api.base}/panel/nope/529.982.247-25`), 404);
    expect(nope).toContain('not found: no route GET /panel/nope/***.982.247-**');
    expect(nope).toContain('href="/panel"');
    const get = await fetch(`${fx.api.base}/panel/keys`);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await expectPage(get, 405)).toContain('method not allowed: GET /panel/keys (allowed: POST)');
    const api = await fetch(`${fx.api.base}/v1/nope`);
    expect(api.status).toBe(404);
    expect(api.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await fetch(`${fx.api.base}/panelx`).then((r) => r.headers.get('content-type'))).toMatch(/^application\/json/);
  });

  test('a body the panel cannot read is a page', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter' });
    const { cookie, csrf } = await signIn(fx.api.base, owner.key);
    const fd = new FormData();
    fd.set('csrf', csrf);
    fd.set('name', 'multipart');
    await expectPage(await fetch(`${fx.api.base}/panel/keys`, { method: 'POST', headers: { cookie }, body: fd }), 415);
  });
});

describe('a create-key form posted again', () => {
  test('a reload of the 201 page (the same form body again) creates nothing and names the key the form made; a fresh form creates another', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'reload' });
    const { cookie, csrf } = await signIn(fx.api.base, owner.key);
    const keysOf = async () => (await fx.db.pool.query(`SELECT id FROM platform.api_keys WHERE account_id = $1 ORDER BY created_at, id`, [owner.id])).rows.map((r) => r.id as string);
    const formOf = async (html: string) => {
      const token = /name="form_token" value="([^"]+)"/.exec(html)?.[1] ?? '';
      return new URLSearchParams({ csrf, form_token: token, name: 'ci', env: 'test' }).toString();
    };
    const send = (body: string) => fetch(`${fx.api.base}/panel/keys`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body, redirect: 'manual' });
    const body = await formOf(await (await fetch(`${fx.api.base}/panel`, { headers: { cookie } })).text());
    const first = await expectPage(await send(body), 201);
    expect(first).toContain('id="new-key"');
    const made = await keysOf();
    expect(made).toHaveLength(1);
    const again = await expectPage(await send(body), 409);
    expect(again).toContain(`already created key <code>${made[0]}</code>`);
    expect(again).not.toContain('id="new-key"');
    expect(again).not.toContain('ck_test_');
    expect(await keysOf()).toEqual(made);
    // The 201 page's own form is a fresh one: it creates another key.
    const next = await expectPage(await send(await formOf(first)), 201);
    expect(next).toContain('id="new-key"');
    expect(await keysOf()).toHaveLength(2);
  });
});

describe('webhook forms posted again', () => {
  // Subscribing and rotating answer 201 with the secret on the page, so a browser's reload posts
  // the form again: a second subscription (every event delivered twice) or a second rotation (the
  // secret just stored demoted to "previous", to stop signing after the window).
  test('a reload of the subscribe page creates no second subscription; a reload of the rotate page rotates nothing; fresh forms still work', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'hook reload' });
    const { cookie, csrf } = await signIn(fx.api.base, owner.key);
    const endpointsOf = async () =>
      (await fx.db.pool.query(`SELECT id, secret FROM events.endpoints WHERE key_id = $1 ORDER BY created_at, id`, [owner.id])).rows as { id: string; secret: string }[];
    const send = (path: string, body: string) => fetch(`${fx.api.base}${path}`, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body, redirect: 'manual' });
    const tokenOf = (html: string, action: string) => {
      const form = html.split('<form').find((f) => f.includes(`action="${action}"`))!;
      return /name="form_token" value="([^"]+)"/.exec(form)?.[1] ?? '';
    };
    const subscribeForm = (html: string, url: string) => {
      const b = new URLSearchParams({ csrf, form_token: tokenOf(html, '/panel/webhooks'), url });
      b.append('events', 'car.embargo.criado');
      return b.toString();
    };
    const overview = await (await fetch(`${fx.api.base}/panel/webhooks`, { headers: { cookie } })).text();
    const body = subscribeForm(overview, 'https://8.8.8.8/hooks/a');
    const first = await expectPage(await send('/panel/webhooks', body), 201);
    expect(first).toContain('id="new-secret"');
    const made = await endpointsOf();
    expect(made).toHaveLength(1);
    const again = await expectPage(await send('/panel/webhooks', body), 409);
    expect(again).toContain(`already created subscription <code>${made[0].id}</code>`);
    expect(again).not.toContain('id="new-secret"');
    expect(await endpointsOf()).toEqual(made);
    await expectPage(await send('/panel/webhooks', subscribeForm(first, 'https://8.8.8.8/hooks/b')), 201);
    expect(await endpointsOf()).toHaveLength(2);

    // Rotate: the page's form for that endpoint, posted twice.
    const action = `/panel/webhooks/${made[0].id}/rotate`;
    const rotateBody = new URLSearchParams({ csrf, form_token: tokenOf(first, action) }).toString();
    const rotated = await expectPage(await send(action, rotateBody), 201);
    const secret = /<code id="new-secret">([^<]+)<\/code>/.exec(rotated)![1];
    expect((await endpointsOf())[0].secret).toBe(secret);
    const twice = await expectPage(await send(action, rotateBody), 409);
    expect(twice).toContain('already rotated');
    expect(twice).not.toContain('id="new-secret"');
    expect((await endpointsOf())[0].secret).toBe(secret);
    // The 201 page's own rotate form is a fresh one.
    const next = await expectPage(await send(action, new URLSearchParams({ csrf, form_token: tokenOf(rotated, action) }).toString()), 201);
    expect(/<code id="new-secret">([^<]+)<\/code>/.exec(next)![1]).not.toBe(secret);
  });
});

describe('webhook forms posted again, later', () => {
  // A form's token is remembered apart from the subscription's row: a rotation made in between
  // (the CLI's, or the panel's next form) or the subscription removed in between does not make
  // the old form good again; another account's token names nothing of that account.
  const tokenOf = (html: string, action: string) => {
    const form = html.split('<form').find((f) => f.includes(`action="${action}"`))!;
    return /name="form_token" value="([^"]+)"/.exec(form)![1];
  };
  const session = async (name: string) => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name });
    const { cookie, csrf } = await signIn(fx.api.base, owner.key);
    const send = (path: string, fields: Record<string, string>) =>
      fetch(`${fx.api.base}${path}`, { method: 'POST', headers: { cookie }, body: new URLSearchParams({ csrf, ...fields }), redirect: 'manual' });
    const overview = async () => (await fetch(`${fx.api.base}/panel/webhooks`, { headers: { cookie } })).text();
    return { owner, send, overview };
  };
  const secretOf = async (id: string) => (await fx.db.pool.query(`SELECT secret FROM events.endpoints WHERE id = $1`, [id])).rows[0].secret as string;

  test('a rotate form posted again after a rotation by the CLI, or by a newer panel form, rotates nothing', async () => {
    const { owner, send, overview } = await session('rotate later');
    const e = await addEndpoint(fx.db.pool, { keyId: owner.id, url: 'https://8.8.8.8/later', events: '*', allowPrivate: false });
    const action = `/panel/webhooks/${e.id}/rotate`;
    const old = tokenOf(await overview(), action);
    const page = await expectPage(await send(action, { form_token: old }), 201);
    await rotateSecret(fx.db.pool, e.id); // `agro webhooks rotate` in between
    const cli = await secretOf(e.id);
    expect(await expectPage(await send(action, { form_token: old }), 409)).toContain('already rotated');
    expect(await secretOf(e.id)).toBe(cli);
    await expectPage(await send(action, { form_token: tokenOf(page, action) }), 201); // the next page's own form
    const newest = await secretOf(e.id);
    expect(await expectPage(await send(action, { form_token: old }), 409)).toContain('already rotated');
    expect(await secretOf(e.id)).toBe(newest);
  });

  test('a subscribe form posted again after its subscription was removed subscribes nothing', async () => {
    const { owner, send, overview } = await session('removed later');
    const token = tokenOf(await overview(), '/panel/webhooks');
    const fields = { form_token: token, url: 'https://8.8.8.8/removed', events: 'car.embargo.criado' };
    await expectPage(await send('/panel/webhooks', fields), 201);
    const [{ id }] = (await fx.db.pool.query(`SELECT id FROM events.endpoints WHERE key_id = $1`, [owner.id])).rows;
    expect((await send(`/panel/webhooks/${id}/remove`, {})).status).toBe(303);
    expect(await expectPage(await send('/panel/webhooks', fields), 409)).toContain('removed since');
    expect((await fx.db.pool.query(`SELECT count(*)::int AS n FROM events.endpoints WHERE key_id = $1`, [owner.id])).rows[0].n).toBe(0);
  });

  test("another account's subscribe token does not name that account's subscription", async () => {
    const a = await session('account a');
    const token = tokenOf(await a.overview(), '/panel/webhooks');
    await expectPage(await a.send('/panel/webhooks', { form_token: token, url: 'https://8.8.8.8/a', events: 'car.embargo.criado' }), 201);
    const [{ id }] = (await fx.db.pool.query(`SELECT id FROM events.endpoints WHERE key_id = $1`, [a.owner.id])).rows;
    const b = await session('account b');
    const text = await expectPage(await b.send('/panel/webhooks', { form_token: token, url: 'https://8.8.8.8/b', events: 'car.embargo.criado' }), 403);
    expect(text).not.toContain(id);
  });
});

describe('panel forms sent back with an error', () => {
  test('the monitor form masks a CPF typed into it and keeps the kind and number typed', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter' });
    const { post } = await signIn(fx.api.base, owner.key);
    const html = await expectPage(await post('/panel/monitors', { kind: 'cnpj', record: '529.982.247-25' }), 422);
    expect(html).not.toContain('529.982.247-25');
    expect(html).toContain('not a valid CNPJ: ***.982.247-**');
    expect(html).not.toContain('usage error'); // the catalogue's prefix is for the CLI
    expect(html).toContain('<input name="record" size="50" required value="***.982.247-**">');
    expect(html).toContain('<option value="cnpj" selected>');
    const car = await expectPage(await post('/panel/monitors', { kind: 'car', record: 'MT-123' }), 422);
    expect(car).toContain('value="MT-123"');
  });

  test('the subscription form keeps the URL and the events chosen, and says which events to choose in the panel’s words', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'starter' });
    const { post } = await signIn(fx.api.base, owner.key);
    const bad = await expectPage(await post('/panel/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['car.embargo.criado', 'quota.threshold'] }), 422);
    expect(bad).toContain('value="http://127.0.0.1:9/hook"');
    expect(bad).toContain('value="car.embargo.criado" checked');
    expect(bad).toContain('value="quota.threshold" checked');
    expect(bad).not.toContain('value="car.situacao.alterada" checked');
    const none = await expectPage(await post('/panel/webhooks', { url: 'https://8.8.8.8/hook' }), 422);
    expect(none).toContain('choose at least one event');
    expect(none).not.toContain('--events');
    expect(none).toContain('value="https://8.8.8.8/hook"');
    // A fresh form has every event checked and no URL.
    const fresh = await (await post('/panel/webhooks', { url: 'https://8.8.8.8/ok', events: 'car.embargo.criado' })).text();
    expect(fresh).toContain('id="new-secret"');
    expect(fresh).toContain('value="car.situacao.alterada" checked');
    expect(fresh).toContain('<input name="url" type="url" size="50" required>');
  });
});

describe('panel at 375 px', () => {
  test('the dashboard, the webhooks page and a delivery log fit a phone, long values included', async () => {
    const owner = await createKey(fx.db.pool, { env: 'live', plan: 'growth', name: 'n'.repeat(100) });
    await createKey(fx.db.pool, { env: 'test', plan: 'growth', name: 'ci', accountId: owner.id });
    const hook = await addEndpoint(fx.db.pool, { keyId: owner.id, url: `https://8.8.8.8/${'h'.repeat(400)}`, events: '*', allowPrivate: false });
    await addMonitor(fx.db.pool, owner.id, 'car', 'MT-5107925-0123456789ABCDEF0123456789ABCDEF');
    for (let i = 0; i < 3; i++) await call(fx.api.base, `/v1/car/history?limit=5&q=${'q'.repeat(200)}`, { key: owner.key });
    const page = await chromium.browser.newPage();
    await page.setJavaScriptEnabled(false);
    await page.setViewport({ width: 375, height: 800 });
    await page.goto(`${fx.api.base}/panel`);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375);
    await page.type('input[name=api_key]', owner.key);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    for (const path of ['/panel', '/panel/webhooks', `/panel/webhooks/${hook.id}`]) {
      await page.goto(`${fx.api.base}${path}`);
      expect(await page.$eval('h1', (e) => e.textContent)).not.toBe('Account panel — sign in');
      expect(await page.evaluate(() => document.documentElement.scrollWidth), path).toBeLessThanOrEqual(375);
    }
    await page.close();
  });
});
