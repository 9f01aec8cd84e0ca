// Upgrading in place with a sandbox (the database of ck_test_ keys, made by `agro sandbox load`):
// `agro migrate` migrated the live database alone, so after an upgrade every test-key read of a
// newer view (as_of, by-document, /v1/sources) was a 500 until the sandbox was loaded again.
// `agro migrate` now migrates the sandbox too when there is one, and says what it applied. The
// old state: a sandbox database with the migrations of an older release (up to 0109, before
// serving.snapshots_as_of), applied as `agro migrate` applies them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { listMigrations } from '../src/db/migrate.ts';
import { sandboxUrl } from '../src/platform/sandbox.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { call, newKey, startApi } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const OLD_RELEASE_LAST = 109;
let db: TestDb;

beforeAll(async () => {
  db = await testDatabase();
}, 300_000);

afterAll(async () => {
  await db?.drop(); // drops the `_sandbox` companion too
});

async function oldSandbox(url: string): Promise<void> {
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${new URL(url).pathname.slice(1)}"`).finally(() => admin.end());
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`CREATE SCHEMA agro_meta; CREATE TABLE agro_meta.migrations (id int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    for (const m of listMigrations().filter((x) => x.id <= OLD_RELEASE_LAST)) {
      await c.query(fs.readFileSync(m.file, 'utf8'));
      await c.query('INSERT INTO agro_meta.migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
    }
  } finally {
    await c.end();
  }
}

test('agro migrate migrates the sandbox of an older release too; test keys read it again', async () => {
  const url = sandboxUrl(db.cfg, db.url);
  await oldSandbox(url);
  const key = await newKey(db, 'test');
  const sources = async () => {
    const api = await startApi(db.cfg, db.url, db);
    try {
      return (await call(api.base, '/v1/sources', { key })).status;
    } finally {
      await api.close();
    }
  };
  expect(await sources()).toBe(500); // the older schema: no serving.snapshots_as_of

  const r = spawnSync(process.execPath, [path.join(ROOT_DIR, 'bin/agro.mjs'), 'migrate', '--json'], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 180_000,
  });
  expect(r.status, r.stderr).toBe(0);
  const newer = listMigrations().filter((x) => x.id > OLD_RELEASE_LAST).map((m) => `${String(m.id).padStart(4, '0')}_${m.name}`);
  expect(JSON.parse(r.stdout)).toEqual({ ok: true, applied: [], sandbox_applied: newer });
  expect(await sources()).toBe(200);
}, 240_000);

test('without a sandbox database, agro migrate creates none', async () => {
  const other = await testDatabase();
  try {
    const r = spawnSync(process.execPath, [path.join(ROOT_DIR, 'bin/agro.mjs'), 'migrate', '--json'], {
      env: { ...process.env, DATABASE_URL: other.url, AGRO_DATA_DIR: other.dataDir, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 180_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, applied: [] });
    const name = new URL(sandboxUrl(other.cfg, other.url)).pathname.slice(1);
    expect((await other.pool.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [name])).rows).toEqual([]);
  } finally {
    await other.drop();
  }
}, 240_000);
