// Monitors may be millions (a national account watching every property it finances):
// `agro monitors list` reads them through a cursor a batch at a time and prints each batch as
// it comes, and the account panel shows the first ones with the total.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BATCH_ROWS } from '../src/db/batches.ts';
import { countMonitors, eachMonitorBatch, newestMonitors } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { startApi } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let key: string;
let secret: string;
let other: string;
const MANY = BATCH_ROWS * 2 + 500;
const AGRO = path.resolve(__dirname, '../bin/agro.mjs');

const agro = (args: string[]) => {
  const r = spawnSync(process.execPath, [AGRO, ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'warn' }, encoding: 'utf8', maxBuffer: 64 * 2 ** 20,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

beforeAll(async () => {
  db = await testDatabase();
  const k = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'many' });
  [key, secret] = [k.id, k.key];
  other = (await createKey(db.pool, { env: 'live', plan: 'growth', name: 'none' })).id;
  await db.pool.query(
    `INSERT INTO events.monitors (id, key_id, kind, record, created_at)
     SELECT 'mon_' || lpad(i::text, 6, '0'), $1, 'car', 'GO-5200000-' || lpad(to_hex(i), 32, '0'), '2026-01-01'::timestamptz + make_interval(secs => i)
       FROM generate_series(1, ${MANY}) i`,
    [key],
  );
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('monitors of a key with many of them', () => {
  test('read a batch at a time, oldest first, none missing', async () => {
    const sizes: number[] = [];
    const ids: string[] = [];
    const n = await eachMonitorBatch(db.pool, [key], (rows) => {
      sizes.push(rows.length);
      ids.push(...rows.map((m) => m.id));
    });
    expect(n).toBe(MANY);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(BATCH_ROWS);
    expect(ids).toEqual(Array.from({ length: MANY }, (_, i) => `mon_${String(i + 1).padStart(6, '0')}`));
    expect(await eachMonitorBatch(db.pool, [other], () => {})).toBe(0);
  });

  test('the account panel shows the newest ones and how many there are', async () => {
    expect((await newestMonitors(db.pool, [key], 2)).map((m) => m.id)).toEqual([`mon_${String(MANY).padStart(6, '0')}`, `mon_${String(MANY - 1).padStart(6, '0')}`]);
    expect(await countMonitors(db.pool, [key])).toBe(MANY);
    const api = await startApi(db.cfg, db.url, db);
    try {
      const login = await fetch(`${api.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: secret }), redirect: 'manual' });
      expect(login.status).toBe(303);
      const cookie = login.headers.get('set-cookie')!.split(';')[0];
      const html = await (await fetch(`${api.base}/panel/webhooks`, { headers: { cookie } })).text();
      expect(html.match(/<tr data-monitor=/g)).toHaveLength(500);
      expect(html).toContain(`data-monitor="mon_${String(MANY).padStart(6, '0')}"`);
      expect(html).toContain(`The 500 newest of ${MANY} monitored records`);
    } finally {
      await api.close();
    }
  }, 60_000);

  test('agro monitors list prints them all: one JSON object with --json, a line each without', () => {
    const json = agro(['monitors', 'list', '--key', key, '--json']);
    expect(json.code).toBe(0);
    expect(json.out.trimEnd().split('\n')).toHaveLength(1);
    const monitors = JSON.parse(json.out).monitors;
    expect(monitors).toHaveLength(MANY);
    expect(monitors[MANY - 1]).toEqual({ id: `mon_${String(MANY).padStart(6, '0')}`, key_id: key, kind: 'car', record: `GO-5200000-${MANY.toString(16).padStart(32, '0')}`, created_at: new Date(Date.UTC(2026, 0, 1) + MANY * 1000).toISOString() });
    const text = agro(['monitors', 'list', '--key', key]);
    expect(text.code).toBe(0);
    const lines = text.out.trimEnd().split('\n');
    expect(lines).toHaveLength(MANY);
    expect(lines[0]).toBe(`mon_000001  ${key}  car  GO-5200000-${'1'.padStart(32, '0')}  since 2026-01-01T00:00:01.000Z`);
    expect(JSON.parse(agro(['monitors', 'list', '--key', other, '--json']).out)).toEqual({ monitors: [] });
    expect(agro(['monitors', 'list', '--key', other]).out).toBe('no monitors\n');
  }, 60_000);
});
