// Migrations: every file applies on an empty database, and two processes migrating
// at once end with each migration applied exactly once.
import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { databaseUrl } from '../src/db/cluster.ts';
import { listMigrations, migrate } from '../src/db/migrate.ts';
import { createPool } from '../src/db/pool.ts';

const name = `agro_m_${crypto.randomBytes(4).toString('hex')}`;
const base = new URL(databaseUrl(loadConfig()));
const url = (db: string) => Object.assign(new URL(base.toString()), { pathname: '/' + db }).toString();
async function admin(sql: string) {
  const c = new pg.Client({ connectionString: url('postgres') });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}
afterAll(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));

test('concurrent migrate on an empty database applies each migration once', async () => {
  await admin(`CREATE DATABASE ${name}`);
  const pools = [createPool(url(name), 2), createPool(url(name), 2), createPool(url(name), 2)];
  try {
    const results = await Promise.all(pools.map((p) => migrate(p)));
    const all = results.flatMap((r) => r.applied);
    expect(all).toHaveLength(listMigrations().length);
    expect(new Set(all).size).toBe(all.length);
    const rows = await pools[0].query('SELECT id FROM agro_meta.migrations ORDER BY id');
    expect(rows.rows.map((r) => r.id)).toEqual(listMigrations().map((m) => m.id));
    expect((await migrate(pools[0])).applied).toEqual([]);
  } finally {
    await Promise.all(pools.map((p) => p.end()));
  }
});
