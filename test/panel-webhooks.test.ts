// The panel's webhooks page in a real headless Chromium with script disabled: subscribe an
// endpoint (secret shown once), send a test event that the server's own drainer delivers to a
// real receiver on 127.0.0.1, see it in the delivery log, replay it, add and remove a monitor;
// a form without the CSRF token is refused.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'puppeteer-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildServer, createApiPool } from '../src/api/server.ts';
import { createKey } from '../src/platform/keys.ts';
import { launchChromium } from './helpers/chromium.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let browser: Browser;
let closeBrowser: () => Promise<void>;
let base: string;
let close: () => Promise<void>;
const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
let receiver: http.Server;
let receiverUrl: string;

beforeAll(async () => {
  db = await testDatabase({ AGRO_WEBHOOKS_ALLOW_PRIVATE: '1', AGRO_WEBHOOKS_POLL_MS: '100' });
  const pool = createApiPool(db.cfg, db.url);
  const app = await buildServer({ cfg: db.cfg, pool, log: db.log, drainWebhooks: true });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  close = async () => {
    await app.close();
    await pool.end();
  };
  receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/agro-hooks`;
  ({ browser, close: closeBrowser } = await launchChromium());
}, 120_000);

afterAll(async () => {
  await closeBrowser?.();
  await close?.();
  receiver?.closeAllConnections();
  await new Promise((r) => receiver?.close(r));
  await db?.drop();
});

async function until<T>(fn: () => Promise<T | undefined | null | false>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('panel: webhooks and monitors', () => {
  test('subscribe, send a test event, see it delivered, replay it; monitor a record', async () => {
    const owner = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'Trader Y' });
    const page = await browser.newPage();
    await page.setJavaScriptEnabled(false);
    await page.goto(`${base}/panel`);
    await page.type('input[name=api_key]', owner.key);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    await Promise.all([page.waitForNavigation(), page.click('a[href="/panel/webhooks"]')]);
    expect(await page.$eval('h1', (e) => e.textContent)).toBe('Webhooks and monitors');

    // Subscribe: the secret is shown once.
    await page.type('input[name=url]', receiverUrl);
    await Promise.all([page.waitForNavigation(), page.click('form[action="/panel/webhooks"] button[type=submit]')]);
    const secret = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    const [ep] = (await db.pool.query(`SELECT id, key_id, url, events FROM events.endpoints`)).rows;
    expect(ep).toMatchObject({ key_id: owner.id, url: receiverUrl });
    expect([...ep.events].sort()).toEqual(['car.embargo.criado', 'car.situacao.alterada', 'quota.threshold', 'socio.qsa.alterado']);
    await page.goto(`${base}/panel/webhooks`);
    expect(await page.content()).not.toContain(secret);
    expect(await page.$(`tr[data-endpoint="${ep.id}"]`)).not.toBeNull();

    // Send a test event: the server's drainer delivers it, signed with that secret.
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-endpoint="${ep.id}"] form[action$="/test"] button`)]);
    expect(page.url()).toBe(`${base}/panel/webhooks/${ep.id}`);
    await until(async () => received.length > 0);
    const event = new Webhook(secret).verify(received[0].body, received[0].headers as Record<string, string>) as { id: string; type: string };
    expect(event.type).toBe('webhook.test');
    const row = await until(async () => {
      await page.reload();
      return page.$(`#deliveries tr[data-event="${event.id}"]`);
    });
    const cells = await row.$$eval('td', (tds) => tds.map((td) => td.textContent!.trim()));
    expect(cells.slice(1, 7)).toEqual([event.id, 'webhook.test', '1', '200', 'ok', 'delivered']);

    // Replay: delivered again with the same id.
    await Promise.all([page.waitForNavigation(), page.click(`#deliveries tr[data-event="${event.id}"] form[action$="/replay"] button`)]);
    await until(async () => received.length > 1);
    expect(received.map((r) => r.headers['webhook-id'])).toEqual([event.id, event.id]);

    // Monitors: add (a lower-case CAR number is stored in upper case), refuse a bad one, remove.
    const car = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
    await page.goto(`${base}/panel/webhooks`);
    await page.type('input[name=record]', car.toLowerCase());
    await Promise.all([page.waitForNavigation(), page.click('form[action="/panel/monitors"] button[type=submit]')]);
    const [m] = (await db.pool.query(`SELECT id, key_id, kind, record FROM events.monitors`)).rows;
    expect(m).toMatchObject({ key_id: owner.id, kind: 'car', record: car });
    expect(await page.$eval(`tr[data-monitor="${m.id}"]`, (e) => e.textContent)).toContain(car);
    await page.type('input[name=record]', 'GO-123');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/panel/monitors"] button[type=submit]')]);
    expect(await page.$eval('[role=alert]', (e) => e.textContent)).toMatch(/not a CAR number/);
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-monitor="${m.id}"] button`)]);
    expect(await page.$(`tr[data-monitor="${m.id}"]`)).toBeNull();

    // Rotate the secret: a new one shown once; the next delivery carries both signatures.
    await page.goto(`${base}/panel/webhooks`);
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-endpoint="${ep.id}"] form[action$="/rotate"] button`)]);
    const rotated = await page.$eval('#new-secret', (e) => e.textContent!);
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(secret);
    expect(await page.$eval(`tr[data-endpoint="${ep.id}"] .state`, (e) => e.textContent)).toMatch(/old secret signs until/);
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-endpoint="${ep.id}"] form[action$="/test"] button`)]);
    await until(async () => received.length > 2);
    for (const s of [secret, rotated]) expect(new Webhook(s).verify(received[2].body, received[2].headers as Record<string, string>)).toBeTruthy();

    // Remove the subscription.
    await page.goto(`${base}/panel/webhooks`);
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-endpoint="${ep.id}"] form[action$="/remove"] button`)]);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM events.endpoints`)).rows[0].n).toBe(0);
    expect(await page.content()).not.toMatch(/<script/i);

    // A form posted without the session's CSRF token is refused.
    const cookie = (await browser.cookies()).find((c) => c.name === 'agro_panel')!;
    const r = await fetch(`${base}/panel/webhooks`, {
      method: 'POST', headers: { cookie: `agro_panel=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: `url=${encodeURIComponent(receiverUrl)}&events=quota.threshold`,
    });
    expect(r.status).toBe(403);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM events.endpoints`)).rows[0].n).toBe(0);
    // Another account's subscription is not reachable.
    const other = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'other' });
    const foreign = (await db.pool.query(`INSERT INTO events.endpoints (id, key_id, url, events, secret) VALUES ('we_foreign', $1, $2, '{*}', $3) RETURNING id`, [other.id, receiverUrl, secret])).rows[0];
    await page.goto(`${base}/panel/webhooks/${foreign.id}`);
    expect(await page.$eval('h1', (e) => e.textContent)).toBe('Not found');
    // Nor can a form with this session's own CSRF token act on it.
    await page.goto(`${base}/panel/webhooks`);
    const token = await page.$eval('input[name="csrf"]', (e) => (e as HTMLInputElement).value);
    for (const action of ['remove', 'rotate', 'test', 'replay']) {
      const a = await fetch(`${base}/panel/webhooks/${foreign.id}/${action}`, {
        method: 'POST', headers: { cookie: `agro_panel=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: `csrf=${encodeURIComponent(token)}&event_id=x`, redirect: 'manual',
      });
      expect(a.status, action).toBe(404);
    }
    expect((await db.pool.query(`SELECT secret FROM events.endpoints WHERE id = 'we_foreign'`)).rows).toEqual([{ secret }]);
  });
});
