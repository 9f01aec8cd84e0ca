// The sandbox of `ck_test_` keys (contract §4): its own database on the same cluster, with the
// same migrations and serving views, loaded from the bundled fixtures by the real pipelines.
// The API reads it through a second pool chosen by the key's env, so a test key cannot reach a
// live row by any query (not a filter that a new route could forget) and live keys never see it.
import path from 'node:path';
import pg from 'pg';
import { findPipeline } from '../../pipelines/registry.ts';
import type { Config } from '../config.ts';
import { migrate } from '../db/migrate.ts';
import { createPool } from '../db/pool.ts';
import { AgroError } from '../errors.ts';
import { runPipeline } from '../etl/run.ts';
import type { Logger } from '../log.ts';

/** The sandbox database URL: configured, or the live database's name + `_sandbox`. */
export function sandboxUrl(cfg: Config, liveUrl: string): string {
  if (cfg.sandboxDatabaseUrl) return cfg.sandboxDatabaseUrl;
  const u = new URL(liveUrl);
  const name = decodeURIComponent(u.pathname.replace(/^\//, '')) || 'postgres';
  u.pathname = `/${encodeURIComponent(`${name}_sandbox`)}`;
  return u.toString();
}

const quoteIdent = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** Creates the sandbox database when missing (from the live one's server). */
async function ensureDatabase(liveUrl: string, url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  const c = new pg.Client({ connectionString: liveUrl });
  await c.connect();
  try {
    const exists = await c.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [name]);
    if (!exists.rowCount) await c.query(`CREATE DATABASE ${quoteIdent(name)}`);
  } catch (e) {
    if ((e as { code?: string }).code !== '42P04') throw e; // created meanwhile by another loader
  } finally {
    await c.end();
  }
}

/**
 * Migrates the sandbox database when there is one (only `agro sandbox load` creates it): an
 * upgrade in place migrated the live database alone, and every test-key read of a newer view
 * (as_of, by-document, /v1/sources) failed on the sandbox's older schema until it was loaded
 * again. Returns the migrations applied, or null when there is no sandbox database.
 */
export async function migrateSandbox(cfg: Config, liveUrl: string): Promise<string[] | null> {
  const pool = createPool(sandboxUrl(cfg, liveUrl), 1);
  try {
    return (await migrate(pool)).applied;
  } catch (e) {
    if ((e as { code?: string }).code === '3D000') return null; // no such database
    throw e;
  } finally {
    await pool.end();
  }
}

export interface SandboxRun {
  pipeline: string;
  source: string;
  uf?: string;
}

/** `agro sandbox load`: migrates the sandbox database and publishes every fixture run into it. */
export async function loadSandbox(o: { cfg: Config; liveUrl: string; log: Logger; runs: SandboxRun[] }): Promise<{ url: string; published: number }> {
  const url = sandboxUrl(o.cfg, o.liveUrl);
  await ensureDatabase(o.liveUrl, url);
  // Its own data directory too: raw files and reports are named by snapshot id.
  const cfg: Config = Object.freeze({ ...o.cfg, databaseUrl: url, dataDir: path.join(o.cfg.dataDir, 'sandbox') });
  const pool = createPool(url);
  try {
    await migrate(pool);
    let published = 0;
    for (const r of o.runs) {
      const pipeline = findPipeline(r.pipeline);
      if (!pipeline) throw new AgroError('usage', `unknown pipeline ${r.pipeline}`);
      const out = await runPipeline({ cfg, pool, log: o.log }, pipeline, { source: r.source, uf: r.uf });
      if (out.status === 'published') published++;
      else o.log.warn({ pipeline: r.pipeline, uf: r.uf, status: out.status }, 'sandbox: fixture run not published');
    }
    return { url, published };
  } finally {
    await pool.end();
  }
}
