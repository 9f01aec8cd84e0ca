// The scheduler against a real PostGIS with real pipelines on the committed fixtures:
// config validation, slots in a timezone, dependency order, two schedulers running a slot
// once, one catch-up after downtime, retries with bounded backoff, and SIGTERM in a real
// process during a download (nothing published; the slot runs again at the next start).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { createPool } from '../src/db/pool.ts';
import { isAgroError } from '../src/errors.ts';
import { listRuns } from '../src/cli/runs.ts';
import { defaultSchedule, loadSchedule, parseSchedule, type ScheduleConfig } from '../src/schedule/config.ts';
import { backoff, firesAt, planBatch, previousSlot } from '../src/schedule/plan.ts';
import { Scheduler } from '../src/schedule/loop.ts';
import { PIPELINES } from '../pipelines/registry.ts';
import { JOB_LOCK } from '../src/schedule/claims.ts';
import { createKey } from '../src/platform/keys.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { slowFileServer } from './helpers/slow-server.ts';

const ROOT = path.resolve(__dirname, '..');
const NAMES = PIPELINES.map((p) => p.name);
const IBGE = path.join(ROOT, 'fixtures/ibge-municipios');
const ZARC = path.join(ROOT, 'fixtures/zarc');
let db: TestDb;
let work: string;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'schedule-'));
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

const configError = (raw: unknown) => {
  try {
    parseSchedule(raw, NAMES, 'agro.schedule.json');
  } catch (e) {
    if (isAgroError(e, 'schedule_config')) return e.message;
    throw e;
  }
  return null;
};

function schedule(jobs: Record<string, unknown>, extra: Record<string, unknown> = {}): ScheduleConfig {
  return parseSchedule({ timezone: 'America/Sao_Paulo', jobs, ...extra }, NAMES, 'test');
}

const runCount = async (pipeline: string) => Number((await db.pool.query(`SELECT count(*) FROM etl.runs WHERE pipeline = $1`, [pipeline])).rows[0].count);

describe('schedule config', () => {
  test('errors name the job and the field', () => {
    expect(configError({ jobs: { a: { cron: '0 2 * *', pipelines: ['zarc'] } } })).toMatch(/job "a".*five fields/);
    expect(configError({ jobs: { a: { cron: '0 25 * * *', pipelines: ['zarc'] } } })).toMatch(/job "a".*hour/);
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['zarcc'] } } })).toMatch(/unknown pipeline "zarcc"/);
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipeline: ['zarc'] } } })).toMatch(/unknown key "pipeline"/);
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['sicar'], ufs: ['XX'] } } })).toMatch(/"XX" is not a Brazilian state/);
    expect(configError({ timezone: 'Mars/Olympus', jobs: { a: { cron: '0 2 * * *', pipelines: ['zarc'] } } })).toMatch(/unknown timezone/);
    expect(configError({ jobs: {} })).toMatch(/empty/);
    expect(configError({ retries: -1, jobs: { a: { cron: '0 2 * * *', pipelines: ['zarc'] } } })).toMatch(/retries/);
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['zarc'], sources: { sicar: 'x' } } } })).toMatch(/does not run/);
    // A source is a path, a file:// or an http(s):// URL, as --source (contract §1): ftp://host/x.zip was
    // read as the relative path ./ftp:/host/x.zip, every night a failed run; `schedule --check` passed it.
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['zarc'], sources: { zarc: 'ftp://example.org/zarc/' } } } })).toMatch(/job "a".*source of zarc takes a path, a file:\/\/ or an http\(s\):\/\/ URL, not ftp:\/\//);
    // States as AGRO_SICAR_UFS: a list naming none planned no run of the job's per-state pipelines.
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['sicar'], ufs: [] } } })).toMatch(/job "a".*"ufs" names no state/);
    expect(configError({ jobs: { a: { cron: '0 2 * * *', pipelines: ['zarc'] } } })).toBeNull();
  });

  test('a missing file means the defaults; a broken one is an error naming the file', () => {
    const d = loadSchedule(path.join(work, 'absent.json'), NAMES);
    expect(d.origin).toBe('defaults');
    expect(d).toEqual(defaultSchedule(NAMES));
    expect(d.jobs.map((j) => j.name)).toEqual(['sicar-nightly', 'embargoes-daily', 'layers-weekly', 'cnpj-monthly']);
    const broken = path.join(work, 'broken.json');
    fs.writeFileSync(broken, '{"jobs": ');
    expect(() => loadSchedule(broken, NAMES)).toThrow(/broken\.json: not valid JSON/);
  });

  test('AGRO_SCHEDULE_FILE naming a file that is not there is an error, not the defaults (a typo must not schedule every state)', () => {
    const absent = path.join(work, 'typo.json');
    const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'schedule', '--check', '--json'], {
      env: { ...process.env, AGRO_SCHEDULE_FILE: absent }, encoding: 'utf8', timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(JSON.parse(r.stdout).error).toEqual({ code: 'schedule_config', message: expect.stringContaining(`${absent}: no such file (named by AGRO_SCHEDULE_FILE)`) });
    // The default file name, absent, still means the defaults.
    const d = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'schedule', '--check', '--json'], {
      env: { ...process.env, AGRO_SCHEDULE_FILE: '' }, cwd: work, encoding: 'utf8', timeout: 60_000,
    });
    expect(d.status).toBe(0);
    expect(JSON.parse(d.stdout).origin).toBe('defaults');
  });
});

describe('slots and order', () => {
  test('slots are minutes in the schedule timezone; the previous slot walks back days and hours', () => {
    const tz = 'America/Sao_Paulo'; // UTC−3
    expect(firesAt('0 2 * * *', tz, new Date('2026-11-20T05:00:00Z'))).toBe(true);
    expect(firesAt('0 2 * * *', tz, new Date('2026-11-20T02:00:00Z'))).toBe(false);
    expect(previousSlot('0 2 * * *', tz, new Date('2026-11-23T12:34:56Z'))).toEqual(new Date('2026-11-23T05:00:00Z'));
    expect(previousSlot('0 2 * * *', tz, new Date('2026-11-23T04:59:00Z'))).toEqual(new Date('2026-11-22T05:00:00Z'));
    expect(previousSlot('0 3 2 * *', tz, new Date('2026-11-23T12:00:00Z'))).toEqual(new Date('2026-11-02T06:00:00Z'));
    expect(previousSlot('0 22 * * 6', tz, new Date('2026-11-23T12:00:00Z'))).toEqual(new Date('2026-11-22T01:00:00Z')); // Saturday 22:00 local
    expect(previousSlot('0 0 1 1 *', 'UTC', new Date('2026-11-23T12:00:00Z'))).toEqual(new Date('2026-01-01T00:00:00Z'));
  });

  test('a batch runs in dependency order: municipalities before ZARC, layers before SICAR', () => {
    const s = schedule({
      a: { cron: '0 2 * * *', pipelines: ['sicar', 'zarc'], ufs: ['GO', 'DF'] },
      b: { cron: '0 2 * * *', pipelines: ['funai-tis', 'ibge-municipios'] },
    });
    const plan = planBatch(s.jobs, (p) => p === 'sicar', ['MT']);
    expect(plan.map((r) => `${r.pipeline}${r.uf ? ' ' + r.uf : ''}`)).toEqual(['ibge-municipios', 'funai-tis', 'sicar GO', 'sicar DF', 'zarc']);
    expect(backoff(1, 1000, 5000)).toBe(1000);
    expect(backoff(3, 1000, 5000)).toBe(4000);
    expect(backoff(9, 1000, 5000)).toBe(5000);
  });
});

describe('scheduler', () => {
  const SLOT = new Date('2026-11-20T05:00:00Z'); // 02:00 in São Paulo

  test('two schedulers with their own pools run a slot once, in dependency order', async () => {
    const s = schedule({ layers: { cron: '0 2 * * *', pipelines: ['zarc', 'ibge-municipios'], sources: { zarc: ZARC, 'ibge-municipios': IBGE } } });
    const pools = [createPool(db.url, 4), createPool(db.url, 4)];
    try {
      const [a, b] = pools.map((pool, i) => new Scheduler({ cfg: db.cfg, pool, log: db.log, owner: `s${i}`, now: () => SLOT }, s));
      const [ra, rb] = await Promise.all([a.tick(SLOT), b.tick(SLOT)]);
      const all = [...ra, ...rb];
      expect(all.map((r) => r.claim).sort()).toEqual(['claimed', 'taken']);
      const ran = all.find((r) => r.claim === 'claimed')!;
      expect(ran.status).toBe('done');
      expect(ran.runs.map((r) => [r.pipeline, r.status])).toEqual([['ibge-municipios', 'published'], ['zarc', 'published']]);
      expect(await runCount('ibge-municipios')).toBe(1);
      expect(await runCount('zarc')).toBe(1);
      const slots = (await db.pool.query(`SELECT owner, status, run_ids::int[] AS run_ids FROM etl.schedule_slots WHERE schedule = 'layers'`)).rows;
      expect(slots).toEqual([{ owner: ran === ra[0] ? 's0' : 's1', status: 'done', run_ids: ran.runs.map((r) => r.run_id) }]);
      // The same slot again (a late tick): nobody runs it.
      expect((await a.tick(SLOT)).map((r) => r.claim)).toEqual(['taken']);
      expect(await runCount('zarc')).toBe(1);
      // The next night while the job still runs elsewhere (its advisory lock is held): the slot is recorded as skipped.
      const holder = await pools[1].connect();
      try {
        await holder.query(`SELECT pg_advisory_lock(${JOB_LOCK}, hashtext('layers'))`);
        const next = new Date('2026-11-21T05:00:00Z');
        expect((await a.tick(next)).map((r) => [r.claim, r.status, r.runs.length])).toEqual([['busy', 'skipped', 0]]);
        expect((await db.pool.query(`SELECT status, error FROM etl.schedule_slots WHERE schedule = 'layers' AND slot = $1`, [next])).rows).toEqual([
          { status: 'skipped', error: 'the job was still running in another scheduler' },
        ]);
        expect(await runCount('zarc')).toBe(1);
      } finally {
        holder.release(true);
      }
    } finally {
      await Promise.all(pools.map((p) => p.end()));
    }
  });

  test('after downtime, the missed slots are caught up once at start', async () => {
    const s = schedule({ daily: { cron: '0 2 * * *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': IBGE } } });
    const now = () => new Date('2026-11-23T12:00:00Z');
    // First start: the schedule is new, nothing is run until its next slot.
    expect(await new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now }, s).catchUp()).toEqual([]);
    // The scheduler was down for three nights: the last claimed slot is the 19th's.
    await db.pool.query(`UPDATE etl.schedules SET last_slot = '2026-11-19T05:00:00Z' WHERE schedule = 'daily'`);
    const before = await runCount('ibge-municipios');
    const results = await new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now, owner: 'b' }, s).catchUp();
    expect(results.map((r) => [r.job, r.slot.toISOString(), r.catchUp, r.claim, r.status])).toEqual([['daily', '2026-11-23T05:00:00.000Z', true, 'claimed', 'done']]);
    expect(await runCount('ibge-municipios')).toBe(before + 1);
    // Another scheduler starting now finds nothing to catch up.
    expect(await new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now, owner: 'c' }, s).catchUp()).toEqual([]);
    expect(await runCount('ibge-municipios')).toBe(before + 1);
    const last = (await db.pool.query(`SELECT last_slot FROM etl.schedules WHERE schedule = 'daily'`)).rows[0].last_slot;
    expect(last).toEqual(new Date('2026-11-23T05:00:00Z'));
  });

  test('a failed run is retried with bounded exponential backoff, every attempt in the ledger', async () => {
    const later = path.join(work, 'zarc-later');
    const s = schedule(
      { retrying: { cron: '30 4 * * *', pipelines: ['zarc'], sources: { zarc: later } }, hopeless: { cron: '45 4 * * *', pipelines: ['zarc'], sources: { zarc: path.join(work, 'never') } } },
      { retries: 2, backoff_ms: 1000, max_backoff_ms: 1500 },
    );
    const waits: number[] = [];
    const sleep = async (ms: number) => {
      waits.push(ms);
      // The source appears before the third attempt.
      if (waits.length === 2) fs.cpSync(ZARC, later, { recursive: true });
    };
    const sch = new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, sleep, now: () => new Date('2026-11-21T07:30:00Z') }, s);
    const [r] = await sch.tick(new Date('2026-11-21T07:30:00Z'));
    expect(waits).toEqual([1000, 1500]);
    expect(r.runs.map((o) => o.status)).toEqual(['failed', 'failed', 'unchanged']);
    expect(r.runs[0].error?.code).toBe('source_not_found');
    expect(r.status).toBe('done');
    // Never recovers: three attempts, then the slot is failed.
    waits.length = 0;
    const [h] = await sch.tick(new Date('2026-11-21T07:45:00Z'));
    expect(waits).toEqual([1000, 1500]);
    expect(h.runs.map((o) => o.status)).toEqual(['failed', 'failed', 'failed']);
    expect(h.status).toBe('failed');
    const slot = (await db.pool.query(`SELECT status, attempts, error FROM etl.schedule_slots WHERE schedule = 'hopeless'`)).rows[0];
    expect(slot).toMatchObject({ status: 'failed', attempts: 3, error: expect.stringMatching(/zarc: source not found/) });
    // `agro runs` shows the failures with their errors.
    const runs = await listRuns(db.pool, 'zarc', 3);
    expect(runs.map((x) => [x.run_id, x.status, x.error_code])).toEqual(h.runs.map((o) => [o.run_id, 'failed', 'source_not_found']).reverse());
  });
});

describe('agro schedule --check', () => {
  test('fire times in the schedule timezone (and UTC), and the last slot of each job: a skipped night is seen without SQL', async () => {
    const file = path.join(work, 'overnight.json');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'America/Sao_Paulo', jobs: { overnight: { cron: '0 1 * * *', pipelines: ['zarc'] } } }));
    await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('overnight', '0 1 * * *', 'America/Sao_Paulo', '2026-11-24T04:00:00Z')`);
    await db.pool.query(`INSERT INTO etl.schedule_slots (schedule, slot, owner, status, error, finished_at) VALUES
      ('overnight', '2026-11-23T04:00:00Z', 'h:1', 'done', NULL, now()), ('overnight', '2026-11-24T04:00:00Z', 'h:1', 'skipped', 'the previous slot was still running', now())`);
    const check = (...extra: string[]) => spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'schedule', '--check', ...extra], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_SCHEDULE_FILE: file }, encoding: 'utf8', timeout: 60_000,
    });
    const j = check('--json');
    expect(j.status, j.stderr).toBe(0);
    const [job] = JSON.parse(j.stdout).jobs;
    expect(job.next[0]).toMatch(/T04:00:00\.000Z$/);
    expect(job.next_local[0]).toMatch(/^\d{4}-\d\d-\d\d 01:00$/);
    expect(job.last).toEqual({ slot: '2026-11-24T04:00:00.000Z', slot_local: '2026-11-24 01:00', status: 'skipped', error: 'the previous slot was still running', run_ids: [] });
    const t = check();
    expect(t.stdout).toMatch(/overnight .* next \d{4}-\d\d-\d\d 01:00 America\/Sao_Paulo \(\d{4}-\d\d-\d\d 04:00 UTC\)/);
    expect(t.stdout).toMatch(/\n +last 2026-11-24 01:00: skipped \(the previous slot was still running\)/);
    // Without a database, --check still validates the file.
    const offline = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'schedule', '--check', '--json'], {
      env: { ...process.env, DATABASE_URL: 'postgres://agro@127.0.0.1:9/agro', AGRO_SCHEDULE_FILE: file }, encoding: 'utf8', timeout: 60_000,
    });
    expect(offline.status).toBe(0);
    expect(JSON.parse(offline.stdout).jobs[0].last).toBeNull();
  });
});

describe('agro schedule whose start fails', () => {
  test('exits 1 with the error, its cron tasks gone (it does not stay up doing nothing)', async () => {
    const fresh = await testDatabase();
    try {
      const file = path.join(work, 'start-fails.json');
      fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { every: { cron: '* * * * *', pipelines: ['zarc'] } } }));
      await fresh.pool.query(`ALTER TABLE etl.schedules RENAME TO schedules_gone`); // registering the jobs fails
      const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'schedule', '--json'], {
        env: { ...process.env, DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 30_000,
      });
      expect(r.signal).toBeNull(); // not killed by the timeout
      expect(r.status).toBe(1);
      expect(JSON.parse(r.stdout).error.message).toMatch(/etl\.schedules/);
    } finally {
      await fresh.drop();
    }
  });
});

describe('a database error in the middle of a batch', () => {
  test("the jobs claimed before it are not left holding their lock: the slot is failed with the error, the next fire time runs", async () => {
    const s = schedule({
      first: { cron: '10 3 * * *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': IBGE } },
      second: { cron: '10 3 * * *', pipelines: ['zarc'], sources: { zarc: ZARC } },
    });
    const sch = new Scheduler({ cfg: db.cfg, pool: db.pool, log: db.log, now: () => new Date('2026-11-22T12:00:00Z') }, s);
    expect(await sch.catchUp()).toEqual([]); // both jobs registered, nothing due
    // The second job's claim now fails (a foreign key: any database error does the same).
    await db.pool.query(`DELETE FROM etl.schedules WHERE schedule = 'second'`);
    await expect(sch.tick(new Date('2026-11-23T06:10:00Z'))).rejects.toThrow(/foreign key/);
    const slot = async (at: string) => (await db.pool.query(`SELECT status, error FROM etl.schedule_slots WHERE schedule = 'first' AND slot = $1`, [at])).rows[0];
    expect(await slot('2026-11-23T06:10:00Z')).toEqual({ status: 'failed', error: expect.stringMatching(/^the batch stopped: .*foreign key/) });
    await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone) VALUES ('second', '10 3 * * *', 'America/Sao_Paulo')`);
    const next = await sch.tick(new Date('2026-11-24T06:10:00Z'));
    expect(next.map((r) => [r.job, r.claim, r.status])).toEqual([['first', 'claimed', 'done'], ['second', 'claimed', 'done']]);
  });
});

/** Children startAgro started: a test that fails before stopping its own must not leave it running. */
const started = new Set<ChildProcess>();
afterEach(() => {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  started.clear();
});

/** A real `agro <args>` on `db`: the child, what it wrote to stdout and stderr so far, its exit code. */
function startAgro(db: TestDb, extraEnv: Record<string, string>, ...args: string[]) {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** A real `agro schedule` on `db` with the schedule `file`. */
const startScheduler = (db: TestDb, file: string) => startAgro(db, { AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'info' }, 'schedule');

test('agro schedule purges the platform\'s tables at its start (and every day): a deployment running only the scheduler does not keep history past its retention', async () => {
  const fresh = await testDatabase();
  try {
    const file = path.join(work, 'purge.json');
    fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { yearly: { cron: '0 0 1 1 *', pipelines: ['ibge-municipios'] } } }));
    const k = await createKey(fresh.pool, { env: 'live', plan: 'starter', name: 'purged' });
    await fresh.pool.query(`INSERT INTO platform.requests (id, key_id, method, path, status, billable, created_at) VALUES ('req_sched_old', $1, 'GET', '/v1/x', 200, true, now() - interval '14 months')`, [k.id]);
    const { child, stderr, exited } = startScheduler(fresh, file);
    // Before: only an `agro platform purge` run by hand (or by the operator's own cron) removed it.
    const gone = async () => (await fresh.pool.query(`SELECT 1 FROM platform.requests WHERE id = 'req_sched_old'`)).rowCount === 0;
    for (let i = 0; i < 200 && !(await gone()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await gone()).toBe(true);
    child.kill('SIGTERM');
    expect(await exited, stderr()).toBe(0);
    expect(stderr()).toMatch(/platform purge/);
  } finally {
    await fresh.drop();
  }
}, 60_000);

/**
 * A schedule file `name` with one yearly job loading `pipeline` from `source`, which a
 * scheduler ran before, long ago: the next start catches it up at once.
 */
async function yearlyCatchUp(db: TestDb, name: string, pipeline: string, source: string): Promise<string> {
  const file = path.join(work, name);
  fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: { yearly: { cron: '0 0 1 1 *', pipelines: [pipeline], sources: { [pipeline]: source } } } }));
  await db.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('yearly', '0 0 1 1 *', 'UTC', '2000-01-01T00:00:00Z')`);
  return file;
}

describe('SIGTERM', () => {
  test('the download under way finishes, nothing more starts, nothing is published; the next start runs the slot again', async () => {
    const fresh = await testDatabase();
    const server = await slowFileServer(path.join(IBGE, 'BR_Municipios_2024.zip'), 'BR_Municipios_2024.zip');
    try {
      const file = await yearlyCatchUp(fresh, 'yearly.json', 'ibge-municipios', server.url);
      const { child, stderr, exited } = startScheduler(fresh, file);
      await server.started;
      const running = (await fresh.pool.query(`SELECT r.status, s.stage, s.status AS stage_status FROM etl.runs r JOIN etl.run_stages s USING (run_id)`)).rows;
      expect(running).toEqual([{ status: 'running', stage: 'download', stage_status: 'running' }]);
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      server.release();
      expect(await exited).toBe(0);
      expect(stderr()).toMatch(/SIGTERM: the stage under way finishes/);
      const run = (await fresh.pool.query(`SELECT status, error_code FROM etl.runs`)).rows;
      expect(run).toEqual([{ status: 'failed', error_code: 'interrupted' }]);
      const stages = (await fresh.pool.query(`SELECT stage, status FROM etl.run_stages ORDER BY seq`)).rows;
      expect(stages).toEqual([{ stage: 'download', status: 'done' }]);
      expect((await fresh.pool.query(`SELECT count(*)::int AS n FROM etl.current`)).rows[0].n).toBe(0);
      expect((await fresh.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname IN ('stage', 'snap') AND tablename NOT LIKE '%template'`)).rows[0].n).toBe(0);
      expect((await fresh.pool.query(`SELECT status FROM etl.schedule_slots`)).rows).toEqual([{ status: 'interrupted' }]);
      // The next start claims the interrupted slot again and loads it. The slot is this year's
      // 1 January on the real clock the child ran on (a fixed 2026 "now" failed from 2027 on).
      const { slot } = (await fresh.pool.query<{ slot: Date }>(`SELECT slot FROM etl.schedule_slots`)).rows[0];
      expect(slot.toISOString()).toMatch(/^\d{4}-01-01T00:00:00\.000Z$/);
      const s = loadSchedule(file, NAMES);
      const again = await new Scheduler({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log, now: () => new Date(slot.getTime() + 12 * 3600_000) }, s).catchUp();
      expect(again.map((r) => [r.slot.toISOString(), r.status, r.runs.map((o) => o.status)])).toEqual([[slot.toISOString(), 'done', ['published']]]);
    } finally {
      server.release();
      await server.close();
      await fresh.drop();
    }
  });
});

/** A real `agro nightly` on `db` (extra env for its sources). */
const startNightly = (db: TestDb, extraEnv: Record<string, string>, ...args: string[]) => startAgro(db, { LOG_LEVEL: 'warn', ...extraEnv }, 'nightly', ...args);

describe('agro nightly and agro schedule exclude each other', () => {
  test('a manual nightly while the scheduler runs a batch starts nothing and names the scheduler process and its slot', async () => {
    const fresh = await testDatabase();
    const server = await slowFileServer(path.join(IBGE, 'BR_Municipios_2024.zip'), 'BR_Municipios_2024.zip');
    try {
      const file = await yearlyCatchUp(fresh, 'night-sched.json', 'ibge-municipios', server.url);
      const sched = startScheduler(fresh, file);
      await server.started; // the catch-up batch is downloading
      const night = startNightly(fresh, {}, '--sources', 'fixtures', '--json');
      expect(await night.exited, night.stderr()).toBe(1);
      expect(JSON.parse(night.stdout()).error).toEqual({
        code: 'nightly_in_progress',
        message: expect.stringMatching(new RegExp(`^the night is taken: the scheduler \\(agro ${sched.child.pid}@\\S+\\) is running a batch: yearly \\(slot \\d{4}-01-01 00:00 UTC\\); this one starts nothing`)),
      });
      // The nightly started no run: the scheduler's download is the only one, and it goes on.
      expect((await fresh.pool.query(`SELECT pipeline, status FROM etl.runs`)).rows).toEqual([{ pipeline: 'ibge-municipios', status: 'running' }]);
      server.release();
      for (let i = 0; i < 600 && (await fresh.pool.query(`SELECT 1 FROM etl.schedule_slots WHERE status = 'running'`)).rowCount; i++) await new Promise((r) => setTimeout(r, 100));
      expect((await fresh.pool.query(`SELECT status FROM etl.schedule_slots`)).rows).toEqual([{ status: 'done' }]);
      sched.child.kill('SIGTERM');
      expect(await sched.exited, sched.stderr()).toBe(0);
    } finally {
      server.release();
      await server.close();
      await fresh.drop();
    }
  }, 120_000);

  test('a fire time while a manual nightly holds the night is recorded skipped with the reason; no run fails', async () => {
    const fresh = await testDatabase();
    const server = await slowFileServer(path.join(IBGE, 'BR_Municipios_2024.zip'), 'BR_Municipios_2024.zip');
    try {
      // The official night, its first pipeline caught in the middle of its download.
      const night = startNightly(fresh, { AGRO_SOURCE_IBGE_MUNICIPIOS: server.url });
      await server.started;
      const file = await yearlyCatchUp(fresh, 'sched-night.json', 'zarc', ZARC);
      const sched = startScheduler(fresh, file);
      const slot = async () => (await fresh.pool.query(`SELECT status, error, run_ids::int[] AS run_ids FROM etl.schedule_slots WHERE schedule = 'yearly'`)).rows[0];
      // The slot row is written before the log line: wait for both (a loaded machine read stderr in between).
      for (let i = 0; i < 300 && ((await slot())?.status !== 'skipped' || !/skipped: a manual/.test(sched.stderr())); i++) await new Promise((r) => setTimeout(r, 100));
      expect(await slot()).toEqual({ status: 'skipped', error: expect.stringMatching(new RegExp(`^a manual \`agro nightly\` was running \\(agro ${night.child.pid}@\\S+ since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\)$`)), run_ids: [] });
      expect(sched.stderr()).toMatch(/skipped: a manual `agro nightly` was running/);
      // Nothing failed: the night's download goes on, the scheduler started no run.
      expect((await fresh.pool.query(`SELECT pipeline, status FROM etl.runs`)).rows).toEqual([{ pipeline: 'ibge-municipios', status: 'running' }]);
      sched.child.kill('SIGTERM');
      expect(await sched.exited, sched.stderr()).toBe(0);
      night.child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      server.release();
      expect(await night.exited).toBe(1);
      // The skipped slot is not run again at the next start: the night loaded the same sources.
      expect((await fresh.pool.query(`SELECT status FROM etl.schedule_slots`)).rows).toEqual([{ status: 'skipped' }]);
    } finally {
      server.release();
      await server.close();
      await fresh.drop();
    }
  }, 120_000);
});
