// A real API server on loopback over a test database loaded with the fixtures through
// real pipeline runs, and a small HTTP client for the tests.
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { findPipeline } from '../../pipelines/registry.ts';
import { buildServer, createApiPool, type ApiServer } from '../../src/api/server.ts';
import { fixtureRuns } from '../../src/cli/main.ts';
import type { Config } from '../../src/config.ts';
import { runPipeline } from '../../src/etl/run.ts';
import { createKey, type Plan } from '../../src/platform/keys.ts';
import { afterAll, beforeAll } from 'vitest';
import { testDatabase, type TestDb } from './db.ts';

/** Every fixture pipeline, in the nightly order. */
export async function loadFixtures(db: TestDb): Promise<void> {
  for (const r of fixtureRuns()) {
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline(r.pipeline)!, { source: r.source, uf: r.uf });
    if (o.status !== 'published') throw new Error(`${r.pipeline} ${r.uf ?? ''}: ${o.status} ${JSON.stringify(o.error ?? o.gate)}`);
  }
}

/** One more run of a pipeline over a source that `write` puts in a temporary folder; it must publish. */
export async function publishFrom(db: TestDb, pipeline: string, write: (dir: string) => unknown): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${pipeline}-`));
  try {
    await write(dir);
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline(pipeline)!, { source: dir });
    if (o.status !== 'published') throw new Error(`${pipeline}: ${o.status} ${JSON.stringify(o.error ?? o.gate)}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface Running {
  base: string;
  app: ApiServer;
  close(): Promise<void>;
}

/** Starts the API on 127.0.0.1 (port 0) with its own pool. */
export async function startApi(cfg: Config, url: string, db: Pick<TestDb, 'log'>): Promise<Running> {
  const pool = createApiPool(cfg, url);
  const app = await buildServer({ cfg, pool, log: db.log });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  let closed: Promise<void> | null = null;
  return {
    base: `http://127.0.0.1:${port}`,
    app,
    // Idempotent: a test that drops a database the server reads closes it first.
    close() {
      return (closed ??= app.close().then(() => pool.end()));
    },
  };
}

export async function newKey(db: TestDb, env: 'test' | 'live' = 'live', plan: Plan = 'enterprise'): Promise<string> {
  return (await createKey(db.pool, { env, plan, name: 'test' })).key;
}

export interface Reply {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

export async function call(base: string, path: string, o: { key?: string; method?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(o.headers ?? {}) };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  let body: string | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method: o.method ?? (body !== undefined ? 'POST' : 'GET'), headers, body });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

/** Asserts the error envelope and the X-Request-Id it must echo; returns the envelope's error. */
export function expectEnvelope(r: Reply, status: number, code: string): { code: string; message: string; request_id: string } {
  const ctx = `${r.status} ${r.text.slice(0, 300)}`;
  if (r.status !== status) throw new Error(`expected ${status} ${code}, got ${ctx}`);
  const e = r.body?.error;
  if (!e || e.code !== code || typeof e.message !== 'string' || !/^req_[0-9a-f]{24}$/.test(e.request_id)) throw new Error(`bad envelope: ${ctx}`);
  if (r.headers.get('x-request-id') !== e.request_id) throw new Error(`X-Request-Id ${r.headers.get('x-request-id')} ≠ ${e.request_id}`);
  if (Object.keys(r.body).length !== 1 || Object.keys(e).sort().join() !== 'code,message,request_id') throw new Error(`extra fields in the envelope: ${ctx}`);
  return e;
}

/** A test database loaded with every fixture and the API on it (`env`: config over the process's), torn down after the file's tests. */
export const fixtureApi = (env: Record<string, string> = {}) => apiOnTestDatabase(env, true);

/** The same without data sets (the platform: keys, panel, history). */
export const emptyApi = (env: Record<string, string> = {}) => apiOnTestDatabase(env, false);

function apiOnTestDatabase(env: Record<string, string>, fixtures: boolean): { db: TestDb; api: Running } {
  const fx = {} as { db: TestDb; api: Running };
  beforeAll(async () => {
    fx.db = await testDatabase(env);
    if (fixtures) await loadFixtures(fx.db);
    fx.api = await startApi(fx.db.cfg, fx.db.url, fx.db);
  }, 300_000);
  afterAll(async () => {
    await fx.api?.close();
    await fx.db?.drop();
  });
  return fx;
}

/** Retries an assertion until it passes or `ms` have gone (asynchronous notifications, expiries). */
export async function eventually(fn: () => Promise<unknown>, ms = 3_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      return void (await fn());
    } catch (e) {
      if (Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
