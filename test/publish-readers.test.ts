// Publishing never stalls readers (issue 6 C.4). One reader transaction stays open on
// the serving view while a run publishes, and a loop of other readers keeps querying:
// their latency stays low, and the publish either succeeds once the open reader ends or
// gives up cleanly after its bounded wait, keeping the snapshot for `agro publish`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SICAR_FIXTURES, buildSicarState } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import type { Config } from '../src/config.ts';
import { applyRetention, publishSnapshot } from '../src/etl/publish.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
const LOCK_TIMEOUT_MS = 200;
/** What a reader may wait at most: one lock attempt of the publisher, plus a generous margin for a shared 2-core machine. */
const MAX_READER_MS = 1_000;

let variant = 0;
async function source(): Promise<string> {
  const dir = path.join(work, `DF-${++variant}`);
  await buildSicarState('DF', dir, { mtime: new Date(2024, 3, 1, 0, variant) });
  return dir;
}
const currentId = async () => (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'DF'`)).rows[0]?.snapshot_id ?? null;
const cfgWith = (maxWaitMs: number): Config => ({ ...db.cfg, publishLockTimeoutMs: LOCK_TIMEOUT_MS, publishMaxWaitMs: maxWaitMs });

/** An open reader transaction: it holds its lock on the serving view until end(). */
async function openReader() {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('BEGIN');
  await c.query(`SELECT count(*) FROM serving.car_imovel WHERE uf = 'DF'`);
  return { end: async () => { await c.query('COMMIT'); await c.end(); } };
}

/** Readers querying in a loop on their own connections; returns every latency and the answers. */
function readerLoop(readers = 3) {
  let on = true;
  const latencies: number[] = [];
  const errors: string[] = [];
  const loops = Array.from({ length: readers }, async () => {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      while (on) {
        const t0 = performance.now();
        try {
          await c.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE uf = 'DF'`);
        } catch (e) {
          errors.push((e as Error).message);
        }
        latencies.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 5));
      }
    } finally {
      await c.end();
    }
  });
  return {
    async stop() {
      on = false;
      await Promise.all(loops);
      return { latencies, errors, max: Math.max(...latencies) };
    },
  };
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'publish-readers-'));
  const first = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source() });
  expect(first.status).toBe('published');
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('an open reader transaction during publish', () => {
  test('publish retries with a short lock timeout and succeeds once the reader ends; readers never queue', async () => {
    const before = await currentId();
    const holder = await openReader();
    const readers = readerLoop();
    const HOLD_MS = 2_000;
    const released = new Promise<void>((r) => setTimeout(() => holder.end().then(r), HOLD_MS));
    const t0 = Date.now();
    const o = await runPipeline({ cfg: cfgWith(30_000), pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source() });
    await released;
    const r = await readers.stop();
    console.info(`readers during a retried publish: ${r.latencies.length} queries, max ${r.max.toFixed(0)} ms; publish stage ${o.stages.publish} ms`);
    expect(o.status).toBe('published');
    expect(await currentId()).toBe(o.snapshot_id);
    expect(o.snapshot_id).not.toBe(before);
    // The publish really waited for the open reader (it could not take the view's lock) …
    expect(Date.now() - t0).toBeGreaterThanOrEqual(HOLD_MS - 100);
    expect(o.stages.publish).toBeGreaterThan(LOCK_TIMEOUT_MS);
    // … and meanwhile the other readers went on: no error, none waited long.
    expect(r.errors).toEqual([]);
    expect(r.latencies.length).toBeGreaterThan(20);
    expect(r.max).toBeLessThan(MAX_READER_MS);
  });

  test('a reader that outlasts the bounded wait: publish fails cleanly, the snapshot is kept `loaded` for `agro publish`', async () => {
    const before = await currentId();
    const holder = await openReader();
    const readers = readerLoop();
    const o = await runPipeline({ cfg: cfgWith(1_500), pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source() }).catch(async (e) => {
      await holder.end();
      throw e;
    });
    const r = await readers.stop();
    console.info(`readers during a publish that gave up: ${r.latencies.length} queries, max ${r.max.toFixed(0)} ms`);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('publish_lock_timeout');
    expect(o.error?.message).toMatch(new RegExp(`agro publish ${o.snapshot_id}`));
    expect(await currentId()).toBe(before);
    expect(r.errors).toEqual([]);
    expect(r.max).toBeLessThan(MAX_READER_MS);
    expect(await db.pool.query(`SELECT count(*)::int AS n FROM serving.car_imovel WHERE uf = 'DF'`).then((x) => x.rows[0].n)).toBe(SICAR_FIXTURES.DF.areaImovel.length);

    const snap = await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE snapshot_id = $1`, [o.snapshot_id]);
    expect(snap.rows[0].status).toBe('loaded');
    for (const t of snap.rows[0].tables) expect((await db.pool.query('SELECT to_regclass($1) AS r', [t])).rows[0].r).not.toBeNull();
    const run = await db.pool.query(`SELECT status, error_code, snapshot_id FROM etl.runs WHERE run_id = $1`, [o.run_id]);
    expect(run.rows[0]).toEqual({ status: 'failed', error_code: 'publish_lock_timeout', snapshot_id: o.snapshot_id });

    // Once the reader is gone, the kept snapshot publishes.
    await holder.end();
    const pub = await publishSnapshot(db.pool, sicar, o.snapshot_id!, { budget: { lockTimeoutMs: LOCK_TIMEOUT_MS, maxWaitMs: 5_000 } });
    expect(pub.status).toBe('published');
    expect(await currentId()).toBe(o.snapshot_id);
  });

  test('retention does not queue readers of an old snapshot either: it skips what is being read and drops it later', async () => {
    const first = (await db.pool.query(`SELECT snapshot_id, tables FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'DF' ORDER BY snapshot_id LIMIT 1`)).rows[0];
    const table = first.tables.find((t: string) => /car_imovel/.test(t));
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT count(*) FROM ${table}`);
    const budget = { lockTimeoutMs: LOCK_TIMEOUT_MS, maxWaitMs: 1_000 };
    const t0 = Date.now();
    try {
      expect(await applyRetention(db.pool, 'sicar', 'DF', 1, [], budget)).not.toContain(first.snapshot_id);
    } finally {
      await holder.query('COMMIT');
      await holder.end();
    }
    expect(Date.now() - t0).toBeLessThan(MAX_READER_MS * 5);
    expect((await db.pool.query('SELECT to_regclass($1) AS r', [table])).rows[0].r).not.toBeNull();
    expect(await applyRetention(db.pool, 'sicar', 'DF', 1, [], budget)).toContain(first.snapshot_id);
    expect((await db.pool.query('SELECT to_regclass($1) AS r', [table])).rows[0].r).toBeNull();
  });
});

describe('a publish whose own work is long', () => {
  test('waits for readers on the view rewrite alone: its work is done once, and only the wait counts against the budget', async () => {
    // The work before the view rewrite (change events for millions of monitors, the row-drop
    // gate) may take longer than the wait budget: one lock timeout must not end the publish,
    // nor make it do that work again.
    const older = await currentId();
    expect((await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source() })).status).toBe('published');
    const WORK_MS = 3_000;
    let works = 0;
    const gate = async () => {
      works++;
      await new Promise((r) => setTimeout(r, WORK_MS));
      return [];
    };
    const holder = await openReader();
    // The reader ends about a second into the publish's wait for the view.
    const released = new Promise<void>((r) => setTimeout(() => holder.end().then(r), WORK_MS + 1_000));
    const pub = await publishSnapshot(db.pool, sicar, older, { gate, budget: { lockTimeoutMs: LOCK_TIMEOUT_MS, maxWaitMs: 2_500 } }).finally(() => released);
    expect(pub.status).toBe('published');
    expect(works).toBe(1);
    expect(await currentId()).toBe(older);
  });
});
