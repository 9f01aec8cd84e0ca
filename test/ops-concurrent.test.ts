// Operator commands run while other processes work on the same database, as real child
// processes (`node bin/agro.mjs …`): an upgrade's `agro migrate` while the API answers and a
// long statement holds what the migration changes (readers must not queue behind it; it waits
// with a message, bounded); `agro publish` / `keep` / `rollback` while a run of the same scope
// is in its publish stage; `agro keep` while the run's retention drops that snapshot; two
// `agro schedule` processes sharing a slot, then SIGTERM.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { migrate } from '../src/db/migrate.ts';
import { runPipeline } from '../src/etl/run.ts';
import { claimWithLock, interruptDeadSlots } from '../src/schedule/claims.ts';
import { writeBigState } from './helpers/big-state.ts';
import { eventually, newKey } from './helpers/api.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';
import { serveProcess, type ServeProcess } from './helpers/serve.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Child {
  exit: Promise<number | null>;
  kill(signal: NodeJS.Signals): void;
  stdout(): string;
  stderr(): string;
}

// A failed assertion must not leave a scheduler or a run behind on a dropped database.
const started = new Set<ChildProcess>();
afterAll(() => {
  for (const c of started) c.kill('SIGKILL');
});

function agro(db: TestDb, args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [AGRO, ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  child.on('exit', () => started.delete(child));
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  return { exit: new Promise((r) => child.on('exit', (code) => r(code))), kill: (sig) => child.kill(sig), stdout: () => out, stderr: () => err };
}

/** GET with a bound: the status, or 'hang' when no answer came in time. */
async function bounded(url: string, key: string, ms: number): Promise<number | 'hang'> {
  try {
    const res = await fetch(url, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(ms) });
    await res.text();
    return res.status;
  } catch (e) {
    if ((e as Error).name === 'TimeoutError') return 'hang';
    throw e;
  }
}

/** A small MT state whose zips' dates (hence bytes) differ by `day`: a new snapshot each. */
async function mtSource(tmp: string, day: number): Promise<string> {
  const dir = path.join(tmp, `MT-${day}`);
  await buildSicarState('MT', dir, { themes: [], mtime: new Date(2024, 0, day) });
  return dir;
}

/**
 * The database of the release before 0125: its function absent (renamed: the view keeps
 * working on it), its migration not applied. 0125 replaces serving.source_runs (/v1/sources).
 */
async function before0125(db: TestDb): Promise<void> {
  await db.pool.query(`ALTER FUNCTION etl.shown_run_status(text, bigint) RENAME TO shown_run_status_before`);
  await db.pool.query(`DELETE FROM agro_meta.migrations WHERE id = 125`);
}

describe('agro migrate of an upgrade while the API serves and a long statement reads what it changes', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));
  let api: ServeProcess | undefined;
  afterAll(async () => {
    await api?.stop();
  });

  test('readers are never queued behind the waiting migration; it says what it waits for and applies once the statement ends', async () => {
    const key = await newKey(db);
    api = await serveProcess(db.url, db.dataDir, { AGRO_STATEMENT_TIMEOUT_MS: '5000' });
    expect(await bounded(`${api.base}/v1/sources`, key, 5_000)).toBe(200);
    await before0125(db);

    // A long statement (a run's derive, an as-of export) holds the view the migration replaces.
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT count(*) FROM serving.source_runs');
      const m = agro(db, ['migrate', '--json']);
      await sleep(1_500);
      // While the migration waits, the API answers: a request is not queued behind its lock.
      for (let i = 0; i < 3; i++) expect(await bounded(`${api.base}/v1/sources`, key, 3_000), `request ${i}`).toBe(200);
      expect(m.stderr(), 'migrate says what it waits for').toMatch(/0125_source_runs.*in use/);
      await holder.query('COMMIT');
      expect(await m.exit, m.stderr()).toBe(0);
      expect(JSON.parse(m.stdout()).applied).toEqual(['0125_source_runs']);
    } finally {
      await holder.end();
    }
    expect(await bounded(`${api.base}/v1/sources`, key, 5_000)).toBe(200);
  }, 40_000);
});

describe('a migration whose tables stay in use', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test('gives up after its bound with migration_waiting, naming the runs in progress; nothing of it applied', async () => {
    await before0125(db);
    await db.pool.query(`INSERT INTO etl.runs (pipeline, scope, status) VALUES ('sicar', 'MT', 'running')`);
    const holder = new pg.Client({ connectionString: db.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT count(*) FROM serving.source_runs');
      const waits: string[] = [];
      const err = await migrate(db.pool, { lockTimeoutMs: 100, maxWaitMs: 1_500, onWait: (m) => waits.push(m) }).catch((e) => e);
      expect(err).toMatchObject({ code: 'migration_waiting', message: expect.stringMatching(/0125_source_runs.*runs in progress: sicar MT \(run \d+\).*nothing of it was applied/) });
      expect(waits.length).toBeGreaterThan(0);
    } finally {
      await holder.end();
    }
    expect((await db.pool.query(`SELECT 1 FROM agro_meta.migrations WHERE id = 125`)).rowCount).toBe(0);
    expect((await migrate(db.pool)).applied).toEqual(['0125_source_runs']);
  }, 30_000);
});

describe('agro publish / keep / rollback while a run of the same dataset and scope loads', () => {
  let db: TestDb;
  let tmp: string;
  usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ops-concurrent-');

  test('publish and keep of the snapshot a run is publishing are refused at once naming the run; a rollback waits for that publish and undoes it; the ledger tells the truth', async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    const ids: number[] = [];
    for (const day of [10, 11]) {
      const o = await runPipeline(deps, findPipeline('sicar')!, { uf: 'MT', source: await mtSource(tmp, day) });
      expect(o.status).toBe('published');
      ids.push(o.snapshot_id!);
    }
    const big = path.join(tmp, 'MT-big');
    await writeBigState(big, 20_000);
    // A reader holds the serving view: the run's publish stage waits for it (with the dataset's
    // publish lock), which keeps the run in that stage as long as the test needs.
    const reader = new pg.Client({ connectionString: db.url });
    await reader.connect();
    await reader.query('BEGIN');
    await reader.query('SELECT 1 FROM "current".car_imovel LIMIT 1');
    const run = agro(db, ['run', 'sicar', '--uf', 'MT', '--source', big, '--json'], { LOG_LEVEL: 'warn' });
    const publishing = async () =>
      (await db.pool.query(
        `SELECT s.snapshot_id, s.run_id FROM etl.snapshots s JOIN etl.run_stages st ON st.run_id = s.run_id AND st.stage = 'publish' AND st.status = 'running'
          WHERE s.dataset = 'sicar' AND s.scope = 'MT' AND s.status = 'loading'`,
      )).rows[0] as { snapshot_id: number; run_id: number } | undefined;
    let rb: Child;
    try {
      await eventually(async () => expect(await publishing(), 'the run to be in its publish stage').toBeDefined(), 25_000);
      const { snapshot_id: sid, run_id: runId } = (await publishing())!;
      for (const cmd of [['publish', String(sid)], ['keep', String(sid)]]) {
        const t0 = Date.now();
        const c = agro(db, [...cmd, '--json'], { LOG_LEVEL: 'silent' });
        expect(await c.exit, c.stdout()).toBe(1);
        expect(JSON.parse(c.stdout()).error, cmd[0]).toMatchObject({
          code: 'run_in_progress',
          message: expect.stringContaining(`snapshot ${sid} is being loaded by run ${runId} (stage publish)`),
        });
        expect(Date.now() - t0, `${cmd[0]} answers at once, not after the run's publish`).toBeLessThan(8_000);
      }
      // The rollback waits for the run's publish transaction (the dataset's publish lock), then
      // acts on what is current then.
      rb = agro(db, ['rollback', 'sicar', '--uf', 'MT', '--json'], { LOG_LEVEL: 'warn' });
      await eventually(async () => expect(rb.stderr(), 'the rollback says what it waits for').toMatch(new RegExp(`waiting for another publish, rollback or retention of sicar to commit \\(runs in progress: sicar MT run ${runId}\\)`)), 10_000);
    } finally {
      await reader.query('COMMIT');
      await reader.end();
    }
    expect(await rb!.exit, rb!.stdout() + rb!.stderr()).toBe(0);
    const back = JSON.parse(rb!.stdout());
    expect(await run.exit, run.stderr()).toBe(0);
    const { snapshot_id: sid, run_id: runId } = JSON.parse(run.stdout());
    expect(JSON.parse(run.stdout())).toMatchObject({ status: 'published' });
    // The run's publish came first (the reader held it), then the rollback undid it.
    expect(back).toMatchObject({ from_snapshot_id: sid, snapshot_id: ids[1] });
    const snaps = agro(db, ['snapshots', 'sicar', '--uf', 'MT', '--json'], { LOG_LEVEL: 'silent' });
    expect(await snaps.exit).toBe(0);
    const status = Object.fromEntries((JSON.parse(snaps.stdout()).snapshots as { snapshot_id: number; status: string }[]).map((s) => [s.snapshot_id, s.status]));
    expect(status).toEqual({ [ids[0]]: 'superseded', [ids[1]]: 'current', [sid]: 'rolled_back' });
    const runs = agro(db, ['runs', 'sicar', '--json'], { LOG_LEVEL: 'silent' });
    expect(await runs.exit).toBe(0);
    expect(JSON.parse(runs.stdout()).runs[0]).toMatchObject({ run_id: runId, status: 'published', snapshot_id: sid });
    const served = Number((await db.pool.query(`SELECT count(*) FROM serving.car_imovel WHERE uf = 'MT'`)).rows[0].count);
    const currentRows = Number((await db.pool.query(`SELECT rows FROM etl.snapshots s JOIN etl.current c USING (snapshot_id) WHERE c.dataset = 'sicar' AND c.scope = 'MT'`)).rows[0].rows);
    expect(served).toBe(currentRows);
  }, 60_000);
});

describe('two `agro schedule` processes on one database', () => {
  let db: TestDb;
  let tmp: string;
  usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ops-concurrent-');

  test('the slot both find at their start runs once; both exit 0 on SIGTERM', async () => {
    const file = path.join(tmp, 'yearly.json');
    const source = path.join(ROOT, 'fixtures/ibge-municipios');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { yearly: { cron: '0 0 1 1 *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': source } } } }));
    await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('yearly', '0 0 1 1 *', 'UTC', '2000-01-01T00:00:00Z')`);
    const procs = [0, 1].map(() => agro(db, ['schedule'], { AGRO_SCHEDULE_FILE: file }));
    const slots = async () => (await db.pool.query(`SELECT status FROM etl.schedule_slots WHERE schedule = 'yearly'`)).rows;
    const state = async () => JSON.stringify({ slots: (await db.pool.query(`SELECT * FROM etl.schedule_slots`)).rows, runs: (await db.pool.query(`SELECT run_id, status, error FROM etl.runs`)).rows, stderr: procs.map((p) => p.stderr().slice(-1500)) });
    await eventually(async () => expect(await slots(), await state()).toEqual([{ status: 'done' }]), 25_000);
    await sleep(1_000); // the other one's start is over too
    expect((await db.pool.query(`SELECT pipeline, status FROM etl.runs`)).rows).toEqual([{ pipeline: 'ibge-municipios', status: 'published' }]);
    for (const p of procs) p.kill('SIGTERM');
    for (const p of procs) expect(await p.exit, p.stderr()).toBe(0);
    expect(await slots()).toEqual([{ status: 'done' }]);
  }, 40_000);

  test("a scheduler's start looking for dead slots takes no job lock: another's claim meanwhile gets it and runs the slot", async () => {
    // A slot a dead scheduler left running, its row held a moment by another session: the
    // look for dead slots lasts as long. It held the job's lock meanwhile (taken to see that
    // none held it), and a claim in that moment was recorded skipped "still running in
    // another scheduler", a slot run nowhere (what the two processes above hit now and then).
    await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('daily', '0 3 * * *', 'UTC', '2026-01-01T03:00:00Z')`);
    await db.pool.query(`INSERT INTO etl.schedule_slots (schedule, slot, owner, catch_up) VALUES ('daily', '2026-01-01T03:00:00Z', 'dead:1', false)`);
    const row = new pg.Client({ connectionString: db.url });
    await row.connect();
    try {
      await row.query('BEGIN');
      await row.query(`SELECT 1 FROM etl.schedule_slots WHERE schedule = 'daily' FOR UPDATE`);
      const interrupting = interruptDeadSlots(db.pool, 'daily');
      await sleep(300);
      const claim = await claimWithLock(db.pool, 'daily', new Date('2026-01-02T03:00:00Z'), 'other:2', false);
      try {
        expect(claim.claimed).toBe(true);
        expect(claim.lock, 'the claim gets the job lock').not.toBeNull();
      } finally {
        await claim.lock?.release();
      }
      await row.query('COMMIT');
      expect(await interrupting).toBe(1);
    } finally {
      await row.end();
    }
  });
});

describe('agro keep while a run of the dataset applies retention', () => {
  let db: TestDb;
  let tmp: string;
  usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ops-concurrent-');

  test('a keep during the drop of that snapshot never says "exempt" of a snapshot retention then drops', async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    const ids: number[] = [];
    for (const day of [10, 11]) ids.push((await runPipeline(deps, findPipeline('sicar')!, { uf: 'MT', source: await mtSource(tmp, day) })).snapshot_id!);
    const oldest = ids[0];
    const table = ((await db.pool.query(`SELECT tables FROM etl.snapshots WHERE snapshot_id = $1`, [oldest])).rows[0].tables as string[])[0];
    // An as-of reader holds the oldest snapshot's table: the run's retention (keep 1: the
    // current one and the rollback target stay) waits to drop it, holding the dataset's lock.
    const reader = new pg.Client({ connectionString: db.url });
    await reader.connect();
    let keep: Child;
    try {
      await reader.query('BEGIN');
      await reader.query(`SELECT 1 FROM ${table} LIMIT 1`);
      const run = agro(db, ['run', 'sicar', '--uf', 'MT', '--source', await mtSource(tmp, 12), '--json'], { LOG_LEVEL: 'warn', AGRO_RETENTION: '1', AGRO_PUBLISH_LOCK_TIMEOUT_MS: '15000' });
      const dropping = async () =>
        (await db.pool.query(`SELECT 1 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE NOT l.granted AND l.mode = 'AccessExclusiveLock' AND c.oid = $1::regclass`, [table])).rowCount;
      await eventually(async () => expect(await dropping(), 'the retention to wait for the reader').toBe(1), 25_000);
      keep = agro(db, ['keep', String(oldest), '--json'], { LOG_LEVEL: 'silent' });
      await sleep(2_000);
      await reader.query('COMMIT');
      expect(await run.exit, run.stderr()).toBe(0);
    } finally {
      await reader.end();
    }
    const code = await keep!.exit;
    const { status, kept } = (await db.pool.query(`SELECT status, kept FROM etl.snapshots WHERE snapshot_id = $1`, [oldest])).rows[0];
    // Either order is sound, not both: kept and there, or refused and dropped.
    if (code === 0) expect({ status, kept, out: JSON.parse(keep!.stdout()) }).toEqual({ status: 'superseded', kept: true, out: { snapshot_id: oldest, kept: true } });
    else expect({ status, code, error: JSON.parse(keep!.stdout()).error.code }).toEqual({ status: 'dropped', code: 1, error: 'snapshot_not_found' });
  }, 60_000);
});
