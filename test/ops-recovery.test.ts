// The data engineer's night under failure, with real processes: a run SIGKILLed during its
// derive stage (the next run drops the part tables the dead one left, even those its
// abandoned statements were still creating), and the database restarted while a run
// downloads (the run takes its locks again, so a second run of the same scope is refused
// instead of declaring the first one dead and loading beside it). The scheduler: a job that
// outlasts its period skips the fire times that come meanwhile, and a slot whose scheduler
// was SIGKILLed is run again at the next start.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster } from '../src/db/cluster.ts';
import { createPool } from '../src/db/pool.ts';
import { runPipeline } from '../src/etl/run.ts';
import { listRuns } from '../src/cli/runs.ts';
import { loadSchedule, parseSchedule } from '../src/schedule/config.ts';
import { Scheduler } from '../src/schedule/loop.ts';
import { PIPELINES } from '../pipelines/registry.ts';
import { writeBigState } from './helpers/big-state.ts';
import { eventually } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';
import { slowFileServer } from './helpers/slow-server.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
let work: string;

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ops-recovery-'));
});
afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SIGKILL during derive', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test('the next run drops the part tables of the dead derive and ends its statements; serving never changed', async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    for (const p of ['dnit-snv', 'funai-tis']) expect((await runPipeline(deps, findPipeline(p)!, { source: path.join(ROOT, 'fixtures', p) })).status).toBe('published');
    const small = path.join(work, 'MT-small');
    await buildSicarState('MT', small, { themes: [] });
    expect((await runPipeline(deps, findPipeline('sicar')!, { uf: 'MT', source: small })).status).toBe('published');
    const served = async () => Number((await db.pool.query(`SELECT count(*) FROM serving.car_imovel WHERE uf = 'MT'`)).rows[0].count);
    const before = await served();

    const big = path.join(work, 'MT-big');
    await writeBigState(big, 30_000);
    const child = spawn(process.execPath, [AGRO, 'run', 'sicar', '--uf', 'MT', '--source', big, '--json'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' },
      stdio: 'ignore',
    });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
    const partTables = `SELECT tablename FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE 'ov\\_%'`;
    await eventually(async () => expect((await db.pool.query(partTables)).rowCount, 'a part table of the derive stage').toBeGreaterThan(0), 120_000);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const dead = (await db.pool.query(`SELECT run_id FROM etl.runs WHERE status = 'running'`)).rows.map((r) => r.run_id);
    expect(dead).toHaveLength(1);
    expect(await served()).toBe(before);
    // `agro runs` says so before any cleanup: not "running" until the next run. (Its lock goes
    // when the server notices the killed client's socket closed: a few ms, longer under load.)
    await eventually(async () => expect((await listRuns(db.pool, 'sicar', 1))[0].status, 'the killed run to show as dead').toBe('dead'), 10_000);
    expect((await listRuns(db.pool, 'sicar', 1))[0]).toMatchObject({ run_id: dead[0], status: 'dead', stage: 'derive', error: expect.stringMatching(/died during derive/) });

    // Any run cleans up after the dead one (here the same source again).
    const next = await runPipeline(deps, findPipeline('sicar')!, { uf: 'MT', source: big });
    expect(next.status).toBe('published');
    expect((await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [dead[0]])).rows[0].status).toBe('killed');
    // Its snapshot (loaded up to derive: its tables exist) is failed and its tables are gone.
    const orphan = (await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE run_id = $1`, [dead[0]])).rows;
    expect(orphan.map((s) => s.status)).toEqual(['failed']);
    expect(orphan[0].tables.length, 'the dead snapshot had tables').toBeGreaterThan(0);
    for (const t of orphan[0].tables) expect((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r, t).toBeNull();
    // Nothing of the dead run's process still runs, and no part table appears later.
    const lingering = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`;
    expect((await db.pool.query(lingering, [`agro ${child.pid}@%`])).rows[0].n).toBe(0);
    await sleep(1500);
    expect((await db.pool.query(partTables)).rows).toEqual([]);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
    expect(await served()).toBe(30_000);
  }, 300_000);
});

describe('a process that died right after its publish committed', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test('the cleanup records the run as published (with a note), not killed; the snapshot stays current', async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    const o = await runPipeline(deps, findPipeline('funai-tis')!, { source: path.join(ROOT, 'fixtures/funai-tis') });
    expect(o.status).toBe('published');
    // The ledger as a SIGKILL between the publish transaction and the run's last update leaves it.
    await db.pool.query(`UPDATE etl.runs SET status = 'running', finished_at = NULL, rows_read = NULL, rows_loaded = NULL, rows_rejected = NULL, snapshot_id = NULL WHERE run_id = $1`, [o.run_id]);
    expect((await runPipeline(deps, findPipeline('cnuc-ucs')!, { source: path.join(ROOT, 'fixtures/cnuc-ucs') })).status).toBe('published');
    const run = (await db.pool.query(`SELECT status, snapshot_id::int, rows_read::int, rows_loaded::int, error FROM etl.runs WHERE run_id = $1`, [o.run_id])).rows[0];
    expect(run).toEqual({ status: 'published', snapshot_id: o.snapshot_id, rows_read: o.rows_read, rows_loaded: o.rows_loaded, error: `the process died after snapshot ${o.snapshot_id} was published; retention was left to a later run` });
    expect((await db.pool.query(`SELECT snapshot_id::int FROM etl.current WHERE dataset = 'funai-tis'`)).rows[0].snapshot_id).toBe(o.snapshot_id);
  }, 120_000);

  test("a pool's sessions carry no listener of a finished run (a scheduler runs thousands on one pool)", async () => {
    const source = path.join(ROOT, 'fixtures/funai-tis');
    expect(['published', 'unchanged']).toContain((await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('funai-tis')!, { source })).status);
    // Two sessions: the lock session is the same one run after run.
    const pool = createPool(db.url, 2);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      for (let i = 0; i < 15; i++) {
        expect((await runPipeline({ cfg: db.cfg, pool, log: db.log }, findPipeline('funai-tis')!, { source })).status).toBe('unchanged');
      }
      await sleep(100);
      expect(warnings.filter((w) => /MaxListeners|memory leak/.test(w))).toEqual([]);
    } finally {
      process.off('warning', onWarning);
      await pool.end();
    }
  }, 120_000);
});

describe('the database restarted while a run downloads', () => {
  let dataDir: string;
  const env = () => {
    const e: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'info' };
    delete e.DATABASE_URL; // a private embedded cluster: this test stops it
    delete e.AGRO_DB_PORT;
    return e;
  };
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ops-restart-'));
  });
  afterAll(async () => {
    await new EmbeddedCluster(loadConfig({ AGRO_DATA_DIR: dataDir })).stop().catch(() => {});
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('the run takes its locks again: a second run of the scope is refused, the first publishes, no run is declared dead', async () => {
    const migrate = spawnSync(process.execPath, [AGRO, 'migrate', '--json'], { env: env(), encoding: 'utf8', timeout: 180_000 });
    expect(migrate.status, migrate.stderr).toBe(0);
    const cluster = new EmbeddedCluster(loadConfig({ AGRO_DATA_DIR: dataDir }));
    const url = (await cluster.status()).url;

    const mt = path.join(work, 'MT-restart');
    await buildSicarState('MT', mt, { themes: [] });
    const server = await slowFileServer(path.join(mt, 'MT_AREA_IMOVEL.zip'), 'MT_AREA_IMOVEL.zip');
    try {
      const first = spawn(process.execPath, [AGRO, 'run', 'sicar', '--uf', 'MT', '--source', server.url.replace(/MT_AREA_IMOVEL\.zip$/, ''), '--json'], { env: env() });
      let out = '';
      let err = '';
      first.stdout.on('data', (d) => (out += d));
      first.stderr.on('data', (d) => (err += d));
      const exited = new Promise<number | null>((r) => first.on('exit', (code) => r(code)));
      await server.started;

      expect((await cluster.stop()).running).toBe(false);
      expect((await cluster.start(() => {})).running).toBe(true);

      const c = new pg.Client({ connectionString: url });
      c.on('error', () => {});
      await c.connect();
      try {
        const runId = (await c.query(`SELECT run_id FROM etl.runs WHERE status = 'running'`)).rows[0].run_id;
        // The first run holds its alive lock again once the database is back.
        await eventually(async () =>
          expect((await c.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 727001 AND objid = $1 AND granted`, [runId])).rowCount, 'the run to take its lock again').toBeGreaterThan(0), 30_000);

        const other = path.join(work, 'MT-other');
        await buildSicarState('MT', other, { themes: [], dropEveryOther: true });
        const second = spawnSync(process.execPath, [AGRO, 'run', 'sicar', '--uf', 'MT', '--source', other, '--json'], { env: env(), encoding: 'utf8', timeout: 120_000 });
        expect(second.status, second.stderr).toBe(1);
        expect(JSON.parse(second.stdout)).toMatchObject({ status: 'failed', error: { code: 'run_in_progress', message: expect.stringContaining(`run ${runId}`) } });

        server.release();
        expect(await exited, err).toBe(0);
        expect(JSON.parse(out)).toMatchObject({ run_id: runId, status: 'published' });
        expect(err).toMatch(/locks are held again/);
        const runs = (await c.query(`SELECT run_id, status, error_code FROM etl.runs ORDER BY run_id`)).rows;
        expect(runs).toEqual([
          { run_id: runId, status: 'published', error_code: null },
          { run_id: expect.any(Number), status: 'failed', error_code: 'run_in_progress' },
        ]);
      } finally {
        await c.end().catch(() => {});
      }
    } finally {
      server.release();
      await server.close();
    }
  }, 400_000);
});

describe('the scheduler under failure', () => {
  const IBGE_ZIP = path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip');
  const NAMES = PIPELINES.map((p) => p.name);
  let db: TestDb;
  usesTestDatabase((d) => (db = d));
  const slots = async (job: string) =>
    (await db.pool.query(`SELECT slot, status, error FROM etl.schedule_slots WHERE schedule = $1 ORDER BY slot`, [job])).rows.map((r) => [r.slot.toISOString(), r.status, r.error]);

  test('a job longer than its period: the fire times that come while it runs are skipped, not queued behind it', async () => {
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    try {
      const s = parseSchedule({ timezone: 'UTC', jobs: { minutely: { cron: '* * * * *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': server.url } } } }, NAMES, 'test');
      const sch = new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now: () => new Date('2026-11-20T05:00:00Z') }, s);
      const first = sch.tick(new Date('2026-11-20T05:00:00Z'));
      await server.started;
      // Two more minutes fire while the first run is still downloading.
      for (const at of ['2026-11-20T05:01:00Z', '2026-11-20T05:02:00Z']) {
        const r = await sch.tick(new Date(at));
        expect(r.map((x) => [x.claim, x.status, x.runs.length])).toEqual([['busy', 'skipped', 0]]);
      }
      server.release();
      const [done] = await first;
      expect([done.status, done.runs.map((o) => o.status)]).toEqual(['done', ['published']]);
      expect(await slots('minutely')).toEqual([
        ['2026-11-20T05:00:00.000Z', 'done', null],
        ['2026-11-20T05:01:00.000Z', 'skipped', 'the previous slot was still running'],
        ['2026-11-20T05:02:00.000Z', 'skipped', 'the previous slot was still running'],
      ]);
      expect(Number((await db.pool.query(`SELECT count(*) FROM etl.runs WHERE pipeline = 'ibge-municipios'`)).rows[0].count)).toBe(1);
      // Once it is done, the next minute runs again.
      const [next] = await sch.tick(new Date('2026-11-20T05:03:00Z'));
      expect([next.claim, next.status]).toEqual(['claimed', 'done']);
    } finally {
      server.release();
      await server.close();
    }
  }, 120_000);

  test('a scheduler SIGKILLed in the middle of a slot: the next start marks the slot interrupted and runs it again', async () => {
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    try {
      const file = path.join(work, 'yearly.json');
      fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { yearly: { cron: '0 0 1 1 *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': server.url } } } }));
      // A scheduler ran this job long ago: the start catches up the latest slot.
      await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('yearly', '0 0 1 1 *', 'UTC', '2000-01-01T00:00:00Z')`);
      const child = spawn(process.execPath, [AGRO, 'schedule'], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'silent' },
        stdio: 'ignore',
      });
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
      await server.started;
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      server.release();
      expect((await slots('yearly')).map((x) => x[1])).toEqual(['running']);
      // Its locks go when the server notices the killed client's sockets closed (longer under load).
      const sessions = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`;
      await eventually(async () => expect((await db.pool.query(sessions, [`agro ${child.pid}@%`])).rows[0].n, "the killed scheduler's sessions to end").toBe(0), 10_000);

      const s = loadSchedule(file, NAMES);
      const again = await new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now: () => new Date('2026-11-23T12:00:00Z') }, s).catchUp();
      // (published, or unchanged when an earlier test of this file published the same file)
      expect(again.map((r) => [r.slot.toISOString(), r.status, r.runs.length])).toEqual([['2026-01-01T00:00:00.000Z', 'done', 1]]);
      expect(['published', 'unchanged']).toContain(again[0].runs[0].status);
      const runs = (await db.pool.query(`SELECT r.run_id FROM etl.runs r JOIN etl.schedule_slots s ON r.run_id = ANY (s.run_ids) WHERE s.schedule = 'yearly'`)).rows;
      expect(runs.map((r) => r.run_id)).toEqual([again[0].runs[0].run_id]);
      expect((await slots('yearly')).map((x) => x[1])).toEqual(['done']);
      expect((await db.pool.query(`SELECT status, error FROM etl.runs WHERE pipeline = 'ibge-municipios' ORDER BY run_id`)).rows.map((r) => r.status)).toContain('killed');
    } finally {
      server.release();
      await server.close();
    }
  }, 120_000);
  test('fire times that pass while the start-time catch-up still runs are recorded skipped, not lost', async () => {
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    const file = path.join(work, 'minutely-catch-up.json');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'America/Sao_Paulo', jobs: { busy_minutely: { cron: '* * * * *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': server.url } } } }));
    // A scheduler ran this job long ago: the start catches up, and the catch-up's download stalls.
    await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('busy_minutely', '* * * * *', 'America/Sao_Paulo', '2000-01-01T00:00:00Z')`);
    const child = spawn(process.execPath, [AGRO, 'schedule'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await server.started;
      const caughtUp = (await slots('busy_minutely'))[0];
      const next = new Date(Math.floor(new Date(caughtUp[0]).getTime() / 60_000) * 60_000 + 60_000).toISOString();
      await eventually(async () => expect(await slots('busy_minutely'), `the fire time ${next} recorded`).toContainEqual([next, 'skipped', 'a catch-up of this job was still running']), 90_000);
    } finally {
      server.release();
      child.kill('SIGTERM');
      await exited;
      await server.close();
    }
  }, 180_000);

  test('a fire time passed while the scheduler was suspended (SIGSTOP, a paused VM) is run late and recorded, not dropped', async () => {
    const file = path.join(work, 'minutely.json');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'America/Sao_Paulo', jobs: { minutely: { cron: '* * * * *', pipelines: ['zarc'], sources: { zarc: path.join(ROOT, 'fixtures/zarc') } } } }));
    const child = spawn(process.execPath, [AGRO, 'schedule'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await eventually(async () => expect(stderr).toMatch(/scheduler started/), 60_000);
      // Suspended from 2 s before a minute to 3 s after it: node-cron's tick comes 3 s late.
      let boundary = Math.ceil(Date.now() / 60_000) * 60_000;
      if (boundary - Date.now() < 4000) boundary += 60_000;
      await sleep(boundary - 2000 - Date.now());
      child.kill('SIGSTOP');
      await sleep(boundary + 3000 - Date.now());
      child.kill('SIGCONT');
      const slot = new Date(boundary).toISOString();
      await eventually(async () => expect(await slots('minutely'), `the slot ${slot} run late`).toContainEqual([slot, 'done', null]), 60_000);
      expect(stderr).toMatch(/fire time passed while the scheduler was suspended or busy/);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  }, 180_000);
});

describe('a full disk', () => {
  let db: TestDb;
  let tiny: string;
  let mounted = false;
  beforeAll(async () => {
    db = await testDatabase();
    tiny = fs.mkdtempSync(path.join(os.tmpdir(), 'ops-tiny-'));
    // A real full disk: a 2 MB tmpfs as AGRO_DATA_DIR (needs root, as the test machine has).
    // Without it the test fails rather than skips: a skip would leave disk_full untested in silence.
    const m = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', tiny], { encoding: 'utf8' });
    mounted = m.status === 0;
    if (!mounted) throw new Error(`mount -t tmpfs ${tiny} failed (the test needs root): ${m.error?.message ?? m.stderr}`);
  });
  afterAll(async () => {
    if (mounted) spawnSync('umount', [tiny]);
    fs.rmSync(tiny, { recursive: true, force: true });
    await db?.drop();
  });

  const agro = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [AGRO, ...args], { env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: tiny, LOG_LEVEL: 'info' } });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });

  test('a local copy and a download that fill the disk: disk_full saying where and what to do, no stack trace, no partial copy', async () => {
    const big = path.join(work, 'MT-disk');
    await writeBigState(big, 10_000);
    expect(fs.statSync(path.join(big, 'MT_AREA_IMOVEL.zip')).size).toBeGreaterThan(2 * 1024 * 1024);

    const local = await agro(['run', 'sicar', '--uf', 'MT', '--source', big, '--json']);
    expect(local.code).toBe(1);
    const o = JSON.parse(local.stdout);
    expect(o).toMatchObject({ status: 'failed', error: { code: 'disk_full', message: expect.stringMatching(/no space left.*AGRO_DATA_DIR/) } });
    expect(o.error.message).toContain(tiny);
    expect(local.stderr).not.toMatch(/\n\s+at /);
    // The copy of a local file is not resumed: nothing of it stays to fill the disk.
    expect(fs.readdirSync(path.join(tiny, 'raw/sicar/MT'))).toEqual([]);

    const body = fs.readFileSync(path.join(big, 'MT_AREA_IMOVEL.zip'));
    const server = http.createServer((req, res) => {
      if (req.url !== '/MT_AREA_IMOVEL.zip') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': String(body.length) }).end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      const remote = await agro(['run', 'sicar', '--uf', 'MT', '--source', url]);
      expect(remote.code).toBe(1);
      expect(remote.stdout).toMatch(/error \(disk_full\): no space left on the disk: writing .*AGRO_DATA_DIR/);
      expect(remote.stderr).not.toMatch(/\n\s+at /);
      expect((await db.pool.query(`SELECT error_code FROM etl.runs ORDER BY run_id`)).rows.map((r) => r.error_code)).toEqual(['disk_full', 'disk_full']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 120_000);
});

describe('SIGTERM or Ctrl-C during agro run', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test('the download under way finishes, the run ends interrupted and leaves nothing; a second signal exits at once', async () => {
    const server = await slowFileServer(path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip'), 'BR_Municipios_2024.zip');
    try {
      const start = () => {
        const child = spawn(process.execPath, [AGRO, 'run', 'ibge-municipios', '--source', server.url, '--json'], {
          env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info' },
        });
        let out = '';
        let err = '';
        child.stdout.on('data', (d) => (out += d));
        child.stderr.on('data', (d) => (err += d));
        const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('exit', (code, signal) => r({ code, signal })));
        return { child, exited, out: () => out, err: () => err };
      };
      const a = start();
      await server.started;
      a.child.kill('SIGTERM');
      await sleep(300);
      server.release();
      expect(await a.exited).toEqual({ code: 1, signal: null });
      expect(a.err()).toMatch(/SIGTERM: the stage under way finishes/);
      expect(JSON.parse(a.out())).toMatchObject({ status: 'failed', stages: { download: expect.any(Number) }, error: { code: 'interrupted' } });
      expect((await db.pool.query(`SELECT status, error_code FROM etl.runs`)).rows).toEqual([{ status: 'failed', error_code: 'interrupted' }]);
      expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.current`)).rows[0].n).toBe(0);
      expect(fs.readdirSync(path.join(db.dataDir, 'work'))).toEqual([]);
    } finally {
      server.release();
      await server.close();
    }
    // Twice: out at once, with the download still hanging; the ledger shows the run dead.
    const hanging = await slowFileServer(path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip'), 'BR_Municipios_2024.zip');
    try {
      const child = spawn(process.execPath, [AGRO, 'run', 'ibge-municipios', '--source', hanging.url], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info' },
        stdio: 'ignore',
      });
      const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
      await hanging.started;
      child.kill('SIGINT');
      await sleep(200);
      child.kill('SIGINT');
      expect(await exited).toBe(1);
      // The server ends the dead process's session (and frees its run lock) a moment after the exit.
      await eventually(async () => expect((await listRuns(db.pool, 'ibge-municipios', 1))[0]).toMatchObject({ status: 'dead', stage: 'download' }));
    } finally {
      hanging.release();
      await hanging.close();
    }
  }, 120_000);
});

describe('unhappy paths at the command line', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));
  const agro = (...args: string[]) => {
    const r = spawnSync(process.execPath, [AGRO, ...args], { env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, out: r.stdout ? JSON.parse(r.stdout) : null, stderr: r.stderr };
  };
  const runs = async () => Number((await db.pool.query(`SELECT count(*) FROM etl.runs`)).rows[0].count);

  test('--as-of in the future, or before the release date the source carries; an unknown dataset; keeping a blocked snapshot', async () => {
    // A copy of the IBAMA CSV: its modification day is today, its own stamp (ULTIMA_ATUALIZACAO_RELATORIO) 2026-10-28.
    const dir = path.join(work, 'ibama');
    fs.mkdirSync(dir, { recursive: true });
    const csv = path.join(dir, 'termo_embargo.csv');
    fs.copyFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), csv);

    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    for (const cmd of ['run', 'backfill']) {
      const r = agro(cmd, 'ibama-embargos', '--source', csv, '--as-of', tomorrow, '--json');
      expect(r.code).toBe(2);
      expect(r.out.error).toEqual({ code: 'usage', message: expect.stringContaining(`--as-of ${tomorrow} is in the future`) });
    }
    const series = path.join(work, 'ibama-series');
    fs.mkdirSync(path.join(series, '2026-10-28'), { recursive: true });
    fs.mkdirSync(path.join(series, tomorrow));
    fs.copyFileSync(csv, path.join(series, '2026-10-28', 'termo_embargo.csv'));
    expect(agro('backfill', 'ibama-embargos', '--series', series, '--json').code).toBe(2);
    expect(await runs()).toBe(0); // refused before anything ran

    // Before the file's own release date: every later date would have been nulled as implausible.
    const early = agro('backfill', 'ibama-embargos', '--source', csv, '--as-of', '2015-01-01', '--json');
    expect(early.code).toBe(1);
    expect(early.out).toMatchObject({ status: 'failed', snapshot_id: null, error: { code: 'usage', message: expect.stringMatching(/--as-of 2015-01-01 is before 2026-10-28, the release date the source itself carries.*or --force/) } });
    // Its report: none, and why.
    const report = agro('report', `r${early.out.run_id}`, '--json');
    expect(report.code).toBe(1);
    expect(report.out.error.message).toMatch(new RegExp(`run ${early.out.run_id} ended failed before its quality stage: usage error: --as-of 2015-01-01`));
    const ok = agro('backfill', 'ibama-embargos', '--source', csv, '--as-of', '2026-10-28', '--json');
    expect(ok.out).toMatchObject({ status: 'published', as_of: '2026-10-28' });
    expect(Number((await db.pool.query(`SELECT count(*) FROM serving.ibama_embargos WHERE data_embargo IS NOT NULL`)).rows[0].count)).toBeGreaterThan(100);

    const unknown = agro('snapshots', 'nope', '--json');
    expect(unknown.code).toBe(2);
    expect(unknown.out.error.message).toMatch(/unknown pipeline "nope"/);

    const half = agro('run', 'ibama-embargos', '--source', path.join(ROOT, 'fixtures/ibama-embargos/variants/termo_embargo_virgula.csv'), '--json');
    expect(half.out.status).toBe('blocked');
    const keep = agro('keep', String(half.out.snapshot_id), '--json');
    expect(keep.code).toBe(3);
    expect(keep.out.error.message).toMatch(new RegExp(`snapshot ${half.out.snapshot_id} was blocked by the quality gate: publish it with --force first`));

    // With DATABASE_URL set, `db status` is about that database, not the unused embedded cluster.
    expect(agro('db', 'status', '--json')).toMatchObject({ code: 0, out: { running: true, url: db.url, note: expect.stringMatching(/embedded cluster is not used/) } });
    const down = spawnSync(process.execPath, [AGRO, 'db', 'status', '--json'], { env: { ...process.env, DATABASE_URL: 'postgres://agro:s3cr3t@127.0.0.1:1/nothing' }, encoding: 'utf8' });
    expect([down.status, JSON.parse(down.stdout).running]).toEqual([1, false]);
    // The password never reaches the output (it ends up in CI logs).
    expect(JSON.parse(down.stdout).url).toBe('postgres://agro:***@127.0.0.1:1/nothing');
    expect(down.stdout + down.stderr).not.toContain('s3cr3t');
  }, 120_000);

  test('--reload loads bytes a snapshot already holds (after an upgrade whose rules read them better); without it they are unchanged', async () => {
    // bytes of its own (blank lines at the end): the tests before it loaded the fixture's
    const csv = path.join(work, 'ibama-reload.csv');
    fs.writeFileSync(csv, fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8') + '\n'.repeat(20));
    const first = agro('run', 'ibama-embargos', '--source', csv, '--json');
    expect(first.out).toMatchObject({ status: 'published' });
    expect(agro('run', 'ibama-embargos', '--source', csv, '--json').out).toMatchObject({ status: 'unchanged', snapshot_id: first.out.snapshot_id });
    const again = agro('run', 'ibama-embargos', '--source', csv, '--reload', '--json');
    expect(again.code).toBe(0);
    expect(again.out).toMatchObject({ status: 'published', rows_loaded: first.out.rows_loaded });
    expect(again.out.snapshot_id).toBeGreaterThan(first.out.snapshot_id);
    const [cur] = (await db.pool.query(`SELECT snapshot_id::int AS id, source_sha256 FROM etl.snapshots s JOIN etl.current USING (snapshot_id) WHERE s.dataset = 'ibama-embargos'`)).rows;
    expect(cur.id).toBe(again.out.snapshot_id);
    const [old] = (await db.pool.query(`SELECT source_sha256 FROM etl.snapshots WHERE snapshot_id = $1`, [first.out.snapshot_id])).rows;
    expect(cur.source_sha256).toBe(old.source_sha256);
  }, 120_000);

  test("a backfill's snapshot is kept out of retention (the next run's would drop a past date first); keep --release gives it back", async () => {
    const dir = path.join(work, 'ibama-kept');
    fs.mkdirSync(dir, { recursive: true });
    let n = 0;
    /** The fixture CSV with n blank lines more: other bytes each time. */
    const csv = () => {
      const f = path.join(dir, `termo_embargo_${++n}.csv`);
      fs.writeFileSync(f, fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8') + '\n'.repeat(n));
      return f;
    };
    const status = async (id: number) => (await db.pool.query(`SELECT status, kept FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0];
    const one = (...args: string[]) => spawnSync(process.execPath, [AGRO, ...args], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent', AGRO_RETENTION: '1' }, encoding: 'utf8', timeout: 120_000,
    });
    const json = (...args: string[]) => JSON.parse(one(...args, '--json').stdout);
    expect(json('run', 'ibama-embargos', '--source', csv(), '--as-of', '2026-11-10')).toMatchObject({ status: 'published' });
    const old = json('backfill', 'ibama-embargos', '--source', csv(), '--as-of', '2026-11-01');
    expect(old).toMatchObject({ status: 'loaded', kept: true });
    expect(await status(old.snapshot_id)).toEqual({ status: 'loaded', kept: true });
    expect(json('run', 'ibama-embargos', '--source', csv(), '--as-of', '2026-11-12')).toMatchObject({ status: 'published' });
    expect(await status(old.snapshot_id)).toEqual({ status: 'loaded', kept: true }); // retention 1: only kept ones besides the current

    const text = one('backfill', 'ibama-embargos', '--source', csv(), '--as-of', '2026-11-02').stdout;
    expect(text).toMatch(/^ibama-embargos: loaded snapshot (\d+)[^]*\n  kept out of retention \(`agro keep \1 --release` gives it back\)\n$/);

    expect(json('keep', String(old.snapshot_id), '--release')).toEqual({ snapshot_id: old.snapshot_id, kept: false });
    expect(json('run', 'ibama-embargos', '--source', csv(), '--as-of', '2026-11-13')).toMatchObject({ status: 'published' });
    expect(await status(old.snapshot_id)).toEqual({ status: 'dropped', kept: false });
  }, 120_000);
});
