// Behind a TLS-terminating proxy (security audit): the panel's session cookie was Secure only
// when fastify saw HTTPS itself. With AGRO_TRUST_PROXY naming the proxy, its
// X-Forwarded-Proto: https makes the cookie Secure and its X-Forwarded-For is the address
// failed authentications count on; from anyone else (or unset) both headers are ignored, so a
// client cannot escape its count by forging X-Forwarded-For.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { loadConfig, trustProxy } from '../src/config.ts';
import { generateKey } from '../src/platform/keys.ts';
import { expectEnvelope, newKey, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const LIMIT = 3;
let db: TestDb;
const servers: Running[] = [];

beforeAll(async () => {
  db = await testDatabase();
}, 120_000);

afterAll(async () => {
  for (const s of servers) await s.close();
  await db?.drop();
});

async function server(trust?: string): Promise<Running> {
  const env: Record<string, string> = { ...process.env as Record<string, string>, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_API_AUTH_FAILURES_PER_MINUTE: String(LIMIT) };
  if (trust !== undefined) env.AGRO_TRUST_PROXY = trust;
  const s = await startApi(loadConfig(env), db.url, db);
  servers.push(s);
  return s;
}

const login = (base: string, key: string, headers: Record<string, string> = {}) =>
  fetch(`${base}/panel/login`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: `api_key=${key}`, redirect: 'manual' });

/** The session cookie's attributes, lower-cased. */
async function cookieOf(base: string, headers: Record<string, string> = {}): Promise<string[]> {
  const r = await login(base, await newKey(db), headers);
  expect(r.status).toBe(303);
  return r.headers.get('set-cookie')!.split(';').slice(1).map((a) => a.trim().toLowerCase());
}

const failedApiCall = (base: string, forwardedFor: string) =>
  fetch(`${base}/v1/car/history`, { headers: { authorization: `Bearer ${generateKey('live')}`, 'x-forwarded-for': forwardedFor } });

test('AGRO_TRUST_PROXY: unset, true, a hop count, addresses', () => {
  expect(trustProxy(undefined)).toBe(false);
  expect(trustProxy('0')).toBe(false);
  expect(trustProxy('true')).toBe(true);
  expect(trustProxy('2')).toBe(2);
  expect(trustProxy('127.0.0.1, 10.0.0.0/8')).toEqual(['127.0.0.1', '10.0.0.0/8']);
});

test('the trusted proxy\'s X-Forwarded-Proto: https makes the session cookie Secure; an untrusted peer\'s does not', async () => {
  const trusted = await server('127.0.0.1');
  expect(await cookieOf(trusted.base, { 'x-forwarded-proto': 'https' })).toContain('secure');
  expect(await cookieOf(trusted.base)).not.toContain('secure'); // plain HTTP through the proxy
  expect(await cookieOf((await server('1')).base, { 'x-forwarded-proto': 'https' })).toContain('secure'); // one hop: the peer
  for (const base of [(await server()).base, (await server('10.0.0.1')).base]) {
    const attrs = await cookieOf(base, { 'x-forwarded-proto': 'https' });
    expect(attrs).toEqual(expect.arrayContaining(['httponly', 'samesite=strict']));
    expect(attrs).not.toContain('secure');
  }
});

test('failed authentications count on the trusted proxy\'s X-Forwarded-For, and on the peer when it is not trusted', async () => {
  const trusted = await server('127.0.0.1');
  for (let i = 0; i < LIMIT; i++) expect((await failedApiCall(trusted.base, '203.0.113.7')).status).toBe(401);
  const r = await failedApiCall(trusted.base, '203.0.113.7');
  const text = await r.text();
  expectEnvelope({ status: r.status, headers: r.headers, text, body: JSON.parse(text) }, 429, 'rate_limited');
  expect((await failedApiCall(trusted.base, '203.0.113.8')).status).toBe(401); // another client behind the proxy
  expect((await login(trusted.base, generateKey('live'), { 'x-forwarded-for': '203.0.113.7' })).status).toBe(429); // the panel's sign-in too

  // Not trusted: a forged X-Forwarded-For does not make a new client.
  const direct = await server();
  for (let i = 0; i < LIMIT; i++) expect((await failedApiCall(direct.base, `198.51.100.${i}`)).status).toBe(401);
  expect((await failedApiCall(direct.base, '198.51.100.99')).status).toBe(429);
});
