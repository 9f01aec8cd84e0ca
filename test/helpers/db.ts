// Real PostGIS for tests: a database per test file, cloned from a migrated template
// (CREATE DATABASE … TEMPLATE is a file copy: fast, and files never see each other's data).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig, type Config } from '../../src/config.ts';
import { databaseUrl } from '../../src/db/cluster.ts';
import { listMigrations, migrate } from '../../src/db/migrate.ts';
import { createPool } from '../../src/db/pool.ts';
import { createLogger, type Logger } from '../../src/log.ts';

/** The template is named after the migrations' content, so concurrent runs with other migrations never collide. */
function templateName(): string {
  const h = crypto.createHash('sha256');
  for (const m of listMigrations()) h.update(m.file).update(fs.readFileSync(m.file));
  return `agro_tpl_${h.digest('hex').slice(0, 12)}`;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = '/' + db;
  return u.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: withDatabase(databaseUrl(loadConfig()), 'postgres') });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A template's comment says when a suite last used it. */
const stamp = (c: pg.Client, name: string) => c.query(`COMMENT ON DATABASE ${name} IS 'agro test template, used ${new Date().toISOString()}'`);

/**
 * Each change of the migrations builds a new template (~17 MB); a development cluster kept
 * every old one. When a new one is built, templates no suite used for a day go (by their
 * stamp, else by their files' age; another checkout with older migrations rebuilds its own in
 * seconds, and testDatabase rebuilds one dropped under it). Best effort: a cluster where this
 * user cannot read file ages keeps them.
 */
async function dropStaleTemplates(c: pg.Client): Promise<void> {
  try {
    const stale = await c.query(
      `SELECT datname FROM pg_database
        WHERE datname LIKE 'agro\\_tpl\\_%'
          AND coalesce(substring(shobj_description(oid, 'pg_database') FROM 'used (\\S+)$')::timestamptz,
                       (pg_stat_file('base/' || oid || '/PG_VERSION')).modification) < now() - interval '1 day'`,
    );
    for (const { datname } of stale.rows) {
      await c.query(`UPDATE pg_database SET datistemplate = false WHERE datname = $1`, [datname]);
      await c.query(`DROP DATABASE IF EXISTS ${datname}`).catch(() => c.query(`UPDATE pg_database SET datistemplate = true WHERE datname = $1`, [datname]));
    }
  } catch {
    /* not allowed here: the templates stay */
  }
}

export async function prepareTemplate(): Promise<void> {
  const name = templateName();
  await admin(async (c) => {
    await c.query(`SELECT pg_advisory_lock(hashtext('agro.test-template'))`);
    try {
      const ready = await c.query(`SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate`, [name]);
      if (ready.rowCount) return void (await stamp(c, name));
      await dropStaleTemplates(c);
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.query(`CREATE DATABASE ${name}`);
      const pool = createPool(withDatabase(databaseUrl(loadConfig()), name), 2);
      try {
        await migrate(pool);
      } finally {
        await pool.end();
      }
      await c.query(`UPDATE pg_database SET datistemplate = true WHERE datname = $1`, [name]);
      await stamp(c, name);
    } finally {
      await c.query(`SELECT pg_advisory_unlock(hashtext('agro.test-template'))`);
    }
  });
}

export interface TestDb {
  url: string;
  pool: pg.Pool;
  /** Config pointing at this database and a private data folder. */
  cfg: Config;
  log: Logger;
  dataDir: string;
  drop(): Promise<void>;
}

/** A fresh migrated database and data folder for one test file. Call drop() in afterAll. */
export async function testDatabase(env: Record<string, string> = {}): Promise<TestDb> {
  const name = `agro_t_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  const clone = () => admin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${templateName()}`));
  // The template dropped under a running suite (another checkout's cleanup): built again.
  await clone().catch(async (e) => {
    if ((e as { code?: string }).code !== '3D000') throw e;
    await prepareTemplate();
    await clone();
  });
  const url = withDatabase(databaseUrl(loadConfig()), name);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-test-'));
  const cfg = loadConfig({ ...process.env, DATABASE_URL: url, AGRO_DATA_DIR: dataDir, ...env });
  const pool = createPool(url, 8);
  return {
    url, pool, cfg, dataDir,
    log: createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
    async drop() {
      await pool.end();
      // `agro sandbox load` against this database makes its `_sandbox` companion.
      await admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).then(() => c.query(`DROP DATABASE IF EXISTS ${name}_sandbox WITH (FORCE)`)));
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
