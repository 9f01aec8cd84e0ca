// The operator's commands as people and scripts use them: the live progress line in a
// pseudo-terminal (util-linux `script`), `agro runs`, `agro backfill --series/--series-file`
// and `agro doctor`, each through the real `agro` binary against a real PostGIS.
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { slowFileServer } from './helpers/slow-server.ts';
import { eventually } from './helpers/api.ts';
import { fixtureRuns } from '../src/cli/main.ts';
import { scriptArgs, shellLine, TERMINAL_ENV } from './helpers/terminal.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
const ZARC = path.join(ROOT, 'fixtures/zarc');
const IBGE_ZIP = path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip');
let db: TestDb;
let work: string;

const env = (extra: Record<string, string> = {}) => ({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info', ...extra });

function agro(...args: string[]) {
  const r = spawnSync(process.execPath, [AGRO, ...args], { env: env(), encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, json: () => JSON.parse(r.stdout) };
}

/** `agro` without blocking this process (a server in it must answer; two commands may run at once). */
function agroAsync(extraEnv: Record<string, string>, ...args: string[]) {
  return new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
    const child = spawn(process.execPath, [AGRO, ...args], { env: env(extraEnv) });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

/** Runs a command in a pseudo-terminal; resolves with everything the terminal showed. */
function inTerminal(command: string, extraEnv: Record<string, string> = {}): Promise<{ code: number | null; screen: string }> {
  return new Promise((resolve) => {
    const child = spawn('script', scriptArgs(command), { env: env({ COLUMNS: '160', ...TERMINAL_ENV, ...extraEnv }), stdio: ['ignore', 'pipe', 'pipe'] });
    let screen = '';
    child.stdout.on('data', (d) => (screen += d));
    child.stderr.on('data', (d) => (screen += d));
    child.on('exit', (code) => resolve({ code, screen }));
  });
}

const ZARC_FILES = fs.readdirSync(ZARC).filter((f) => f.endsWith('.csv')).sort();

function zarcSource(dir: string, files: string[]) {
  fs.mkdirSync(dir, { recursive: true });
  for (const f of files) fs.copyFileSync(path.join(ZARC, f), path.join(dir, f));
  return dir;
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ops-cli-'));
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('a terminal made for people', () => {
  test('one live line per stage: bytes of total with rate and ETA while downloading, rows per second while reading', async () => {
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    try {
      const size = fs.statSync(IBGE_ZIP).size;
      const half = Math.floor(size / 2);
      const done = inTerminal(shellLine([process.execPath, AGRO, 'run', 'ibge-municipios', '--source', server.url]));
      await server.started;
      await new Promise((r) => setTimeout(r, 600)); // the live line shows the stalled half
      server.release();
      const { code, screen } = await done;
      expect(code).toBe(0);
      const lines = screen.split(/\r\n|\r|\n/).map((l) => l.replace(/\x1b\[2K/g, ''));
      const pct = Math.floor((100 * half) / size);
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^ibge-municipios · download · ${half} B of 1\\.8 kB \\(${pct} %\\) · [\\d.]+ [kM]?B/s · ETA [\\d.]+ s · [\\d.]+ s$`)));
      expect(lines).toContainEqual(expect.stringMatching(/^✓ ibge-municipios · download · 1\.8 kB of 1\.8 kB \(100 %\) · .*\/s · [\d.]+ s$/));
      expect(lines).toContainEqual(expect.stringMatching(/^✓ ibge-municipios · read · 9 rows · [\d,]+ rows\/s · [\d.]+ s$/));
      for (const s of ['normalise', 'quality', 'publish']) expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^✓ ibge-municipios · ${s} · `)));
      expect(lines).toContainEqual(expect.stringMatching(/^ibge-municipios: published snapshot \d+/));
      expect(screen).not.toMatch(/\{"level"/); // no JSON log lines at a terminal
    } finally {
      server.release();
      await server.close();
    }
  });

  test('LOG_FORMAT=json keeps JSON logs and no progress line, even at a terminal; a pipe gets JSON', async () => {
    const { code, screen } = await inTerminal(shellLine([process.execPath, AGRO, 'run', 'zarc', '--source', ZARC]), { LOG_FORMAT: 'json' });
    expect(code).toBe(0);
    expect(screen).toMatch(/\{"level":30,.*"msg":"stage done"/);
    expect(screen).not.toMatch(/· download ·/);
    const piped = agro('run', 'zarc', '--source', ZARC);
    expect(piped.stderr).not.toMatch(/· download ·/);
    expect(piped.stderr.trim().split('\n').every((l) => l.startsWith('{'))).toBe(true);
  });
});

describe('agro runs', () => {
  test('recent runs newest first with status, duration, rows and a CPF-masked error', () => {
    const cpfDir = path.join(work, '529.982.247-25');
    const failed = agro('run', 'zarc', '--source', cpfDir, '--json');
    expect(failed.code).toBe(1);
    const r = agro('runs', '--json');
    expect(r.code).toBe(0);
    const runs = r.json().runs;
    expect(runs.length).toBeGreaterThanOrEqual(3);
    expect(runs[0]).toMatchObject({ run_id: failed.json().run_id, pipeline: 'zarc', status: 'failed', error_code: 'source_not_found', uf: null });
    expect(runs[0].error).toMatch(/\*\*\*\.982\.247-\*\*/);
    expect(JSON.stringify(runs)).not.toMatch(/529\.982\.247-25/);
    const published = runs.find((x: { pipeline: string }) => x.pipeline === 'ibge-municipios');
    expect(published).toMatchObject({ status: 'published', rows_read: 9, rows_loaded: 9, rows_rejected: 0, snapshot_id: expect.any(Number) });
    expect(published.duration_ms).toBeGreaterThan(0);
    expect(agro('runs', 'ibge-municipios', '--limit', '1', '--json').json().runs.map((x: { pipeline: string }) => x.pipeline)).toEqual(['ibge-municipios']);
    const table = agro('runs', '--limit', '2');
    expect(table.stdout.split('\n')[0]).toMatch(/^run\s+pipeline\s+uf\s+status\s+started \(UTC\)\s+duration\s+read\s+loaded\s+rejected\s+snapshot\s+error$/);
    expect(table.stdout).toMatch(/failed .*source_not_found: source not found: .*\*\*\*\.982\.247-\*\*/);
    expect(agro('runs', '--limit', '0').code).toBe(2);
    expect(agro('runs', 'nope').code).toBe(2);
  });

  test('at an 80-column terminal the error is not cut off: it goes, wrapped, under its run', async () => {
    const failed = agro('run', 'zarc', '--source', path.join(work, 'no-such-folder', 'zarc-tabua-de-risco-2025.csv'), '--json');
    expect(failed.code).toBe(1);
    const error = `${failed.json().error.code}: ${failed.json().error.message}`;
    expect(error.length).toBeGreaterThan(80);
    const { code, screen } = await inTerminal(`stty cols 80; ${shellLine([process.execPath, AGRO, 'runs', '--limit', '1'])}`);
    expect(code).toBe(0);
    const lines = screen.split(/\r\n|\r|\n/).filter((l) => l.trim());
    expect(lines[0]).toMatch(/^run\s+pipeline\s+uf\s+status\s+started \(UTC\)\s+duration\s+read\s+loaded\s+rejected\s+snapshot$/);
    expect(lines[1]).toMatch(new RegExp(`^ *${failed.json().run_id}  zarc +failed `));
    const under = lines.slice(2);
    expect(under.every((l) => l.startsWith('     ') && l.length <= 80)).toBe(true);
    expect(under.map((l) => l.trim()).join(' ')).toBe(error);
  });
});

describe('agro backfill --series', () => {
  test('dated folders load in date order, each kept; the newest becomes current; a list file adds an older date without making it current', async () => {
    const fresh = await testDatabase();
    try {
      const series = path.join(work, 'series');
      // Out of creation order on purpose: the dates decide.
      zarcSource(path.join(series, '2025-01-01'), ZARC_FILES);
      zarcSource(path.join(series, '2024-01-01'), [ZARC_FILES[0]]);
      zarcSource(path.join(series, '2024-06-01'), [ZARC_FILES[0], ZARC_FILES[2]]);
      const run = (...args: string[]) => {
        const r = spawnSync(process.execPath, [AGRO, ...args], { env: { ...env(), DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir }, encoding: 'utf8', timeout: 120_000 });
        return { code: r.status, stdout: r.stdout, stderr: r.stderr };
      };
      const r = run('backfill', 'zarc', '--series', series, '--json');
      expect(r.code, r.stderr).toBe(0);
      const runs = JSON.parse(r.stdout).runs;
      expect(runs.map((o: { as_of: string; status: string; kept: boolean }) => [o.as_of, o.status, o.kept])).toEqual([
        ['2024-01-01', 'published', true], ['2024-06-01', 'published', true], ['2025-01-01', 'published', true],
      ]);
      const list = path.join(work, 'older.txt');
      fs.writeFileSync(list, `# an older release found later\n2023-06-01 ${path.relative(work, zarcSource(path.join(work, 'older'), [ZARC_FILES[2]]))}\n`);
      // The engine's gate compares a backfill with the current snapshot: a smaller older release is blocked (exit 3)…
      const blocked = run('backfill', 'zarc', '--series-file', list, '--json');
      expect(blocked.code).toBe(3);
      expect(JSON.parse(blocked.stdout).runs.map((x: { status: string; kept: boolean }) => [x.status, x.kept])).toEqual([['blocked', false]]);
      // …and --force loads it, kept, without making it current (it is older).
      const o = run('backfill', 'zarc', '--series-file', list, '--force', '--json');
      expect(o.code, o.stderr).toBe(0);
      expect(JSON.parse(o.stdout).runs.map((x: { as_of: string; status: string; kept: boolean }) => [x.as_of, x.status, x.kept])).toEqual([['2023-06-01', 'loaded', true]]);
      const snaps = (await fresh.pool.query(`SELECT s.as_of::text, s.kept, c.snapshot_id IS NOT NULL AS current FROM etl.snapshots s LEFT JOIN etl.current c USING (snapshot_id) WHERE s.dataset = 'zarc' AND s.status <> 'dropped' AND s.status <> 'blocked' ORDER BY s.as_of`)).rows;
      expect(snaps).toEqual([
        { as_of: '2023-06-01', kept: true, current: false },
        { as_of: '2024-01-01', kept: true, current: false },
        { as_of: '2024-06-01', kept: true, current: false },
        { as_of: '2025-01-01', kept: true, current: true },
      ]);
      // Usage errors name the problem.
      fs.mkdirSync(path.join(work, 'bad-series', 'June'), { recursive: true });
      const bad = run('backfill', 'zarc', '--series', path.join(work, 'bad-series'));
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/folder named YYYY-MM-DD \(not: June\)/);
      fs.writeFileSync(path.join(work, 'bad.txt'), '2024-02-30 somewhere\n');
      expect(run('backfill', 'zarc', '--series-file', path.join(work, 'bad.txt')).stderr).toMatch(/line 1: expected "YYYY-MM-DD SOURCE"/);
      expect(run('backfill', 'zarc', '--series', series, '--as-of', '2024-01-01').code).toBe(2);
    } finally {
      await fresh.drop();
    }
  });
});

describe('agro backfill --series with a date that fails', () => {
  test('the series stops there and says which dates it did not run (JSON and terminal); run again, it resumes', async () => {
    const fresh = await testDatabase();
    try {
      const series = path.join(work, 'series-gap');
      zarcSource(path.join(series, '2024-01-01'), [ZARC_FILES[0]]);
      fs.mkdirSync(path.join(series, '2024-06-01'), { recursive: true }); // an empty folder: the download fails
      zarcSource(path.join(series, '2025-01-01'), ZARC_FILES);
      const run = (...args: string[]) => spawnSync(process.execPath, [AGRO, ...args], { env: { ...env(), DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir }, encoding: 'utf8', timeout: 120_000 });
      const r = run('backfill', 'zarc', '--series', series, '--json');
      expect(r.status, r.stderr).toBe(1);
      const o = JSON.parse(r.stdout);
      expect(o.runs.map((x: { as_of: string | null; status: string }) => x.status)).toEqual(['published', 'failed']);
      expect(o.not_run).toEqual([{ as_of: '2025-01-01', source: path.join(series, '2025-01-01') }]);
      const t = run('backfill', 'zarc', '--series', series);
      expect(t.status).toBe(1);
      expect(t.stdout).toMatch(/not run: 2025-01-01 \(the series stops at a failed date: a later one would be published over the gap; fix it and run the series again\)/);
      // Fixed, the same series again: the loaded date is unchanged, the rest loads.
      zarcSource(path.join(series, '2024-06-01'), [ZARC_FILES[0], ZARC_FILES[2]]);
      const again = run('backfill', 'zarc', '--series', series, '--json');
      expect(again.status, again.stderr).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ runs: [{ status: 'unchanged' }, { status: 'published' }, { status: 'published' }], not_run: [] });
    } finally {
      await fresh.drop();
    }
  });
});

describe('agro backfill --series with a date the quality gate blocks', () => {
  test('the series stops there as at a failed date (exit 3, not_run); with --force it goes on', async () => {
    const fresh = await testDatabase();
    try {
      const series = path.join(work, 'series-blocked');
      zarcSource(path.join(series, '2024-01-01'), [ZARC_FILES[0]]);
      zarcSource(path.join(series, '2024-06-01'), [ZARC_FILES[0], ZARC_FILES[1]]); // blocked (the gate's reason does not matter here)
      zarcSource(path.join(series, '2025-01-01'), ZARC_FILES);
      const run = (...args: string[]) => spawnSync(process.execPath, [AGRO, ...args], { env: { ...env(), DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir }, encoding: 'utf8', timeout: 120_000 });
      const r = run('backfill', 'zarc', '--series', series, '--json');
      expect(r.status, r.stderr).toBe(3);
      const o = JSON.parse(r.stdout);
      // 2025-01-01 published after it would leave as_of=2024-06-xx answering 2024-01-01's data
      expect(o.runs.map((x: { as_of: string; status: string }) => [x.as_of, x.status])).toEqual([['2024-01-01', 'published'], ['2024-06-01', 'blocked']]);
      expect(o.not_run).toEqual([{ as_of: '2025-01-01', source: path.join(series, '2025-01-01') }]);
      const t = run('backfill', 'zarc', '--series', series);
      expect(t.status).toBe(3);
      expect(t.stdout).toMatch(/not run: 2025-01-01 \(the series stops at a date the quality gate blocked: a later one would be published over the gap; check its report, then run the series again \(--force loads it anyway\)\)/);
      const forced = run('backfill', 'zarc', '--series', series, '--force', '--json');
      expect(forced.status, forced.stderr).toBe(0);
      expect(JSON.parse(forced.stdout)).toMatchObject({ runs: [{ status: 'unchanged' }, { status: 'published', forced: true }, { status: 'published' }], not_run: [] });
    } finally {
      await fresh.drop();
    }
  });
});

describe('agro backfill --series-file and Ctrl-C', () => {
  test('the download under way finishes, the run ends interrupted, the later dates do not start; one JSON object, exit 1', async () => {
    const fresh = await testDatabase(); // nothing loaded: the first date is a new snapshot
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    try {
      const list = path.join(work, 'interrupted.txt');
      fs.writeFileSync(list, `2024-06-01 ${server.url}\n2025-01-01 ${path.dirname(IBGE_ZIP)}\n`);
      const child = spawn(process.execPath, [AGRO, 'backfill', 'ibge-municipios', '--series-file', list, '--json'], { env: env({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir }) });
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.on('exit', (code, signal) => r({ code, signal })));
      await server.started;
      child.kill('SIGINT');
      await new Promise((r) => setTimeout(r, 300));
      server.release();
      expect(await exited).toEqual({ code: 1, signal: null });
      expect(err).toMatch(/SIGINT: the stage under way finishes/);
      const runs = JSON.parse(out).runs;
      expect(runs.map((o: { as_of: string | null; status: string; error?: { code: string } }) => [o.status, o.error?.code])).toEqual([['failed', 'interrupted']]);
      expect(JSON.parse(out).not_run).toEqual([{ as_of: '2025-01-01', source: path.dirname(IBGE_ZIP) }]);
      expect((await fresh.pool.query(`SELECT run_id::int, status, error_code FROM etl.runs`)).rows).toEqual([{ run_id: runs[0].run_id, status: 'failed', error_code: 'interrupted' }]);
      expect((await fresh.pool.query(`SELECT count(*)::int AS n FROM etl.current`)).rows[0].n).toBe(0);
    } finally {
      server.release();
      await server.close();
      await fresh.drop();
    }
  }, 120_000);
});

describe('stdout closed by its reader (agro nightly | head -1)', () => {
  test('the night goes on to its end and says nothing of the database; a listing exits quietly', async () => {
    const fresh = await testDatabase();
    try {
      const closedAfterFirstLine = (...args: string[]) => new Promise<{ code: number | null; err: string }>((resolve) => {
        const child = spawn(process.execPath, [AGRO, ...args], { env: env({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] });
        let err = '';
        child.stdout.once('data', () => child.stdout.destroy());
        child.stderr.on('data', (d) => (err += d));
        child.on('exit', (code) => resolve({ code, err }));
      });
      const night = await closedAfterFirstLine('nightly', '--sources', 'fixtures');
      expect(night.err).not.toMatch(/database is unreachable|EPIPE|\n\s+at /);
      expect(night.code).toBe(0);
      const runs = (await fresh.pool.query(`SELECT status, count(*)::int AS n FROM etl.runs GROUP BY status`)).rows;
      expect(runs).toEqual([{ status: 'published', n: fixtureRuns().length }]);
      const list = await closedAfterFirstLine('runs', '--limit', '100');
      expect(list.err).not.toMatch(/EPIPE|\n\s+at /);
      expect(list.code).toBe(0);
    } finally {
      await fresh.drop();
    }
  }, 180_000);
});

describe('agro doctor', () => {
  test('every check passes here; an unreachable database fails with what to do, exit 1', () => {
    const ok = agro('doctor', '--json');
    expect(ok.code).toBe(0);
    const checks = ok.json().checks;
    expect(checks.map((c: { name: string }) => c.name)).toEqual(['node', 'gdal', 'gdal drivers', 'disk', 'hmac key', 'schedule file', 'database', 'postgresql', 'postgis', 'migrations', 'dead runs', 'stuck slots', 'last slots']);
    expect(checks.filter((c: { status: string }) => c.status === 'fail')).toEqual([]);
    expect(checks.find((c: { name: string }) => c.name === 'postgis').detail).toMatch(/^PostGIS 3\./);
    expect(checks.find((c: { name: string }) => c.name === 'gdal').detail).toMatch(/^GDAL \d+\.\d+/);
    // Without AGRO_HMAC_KEY the published development key signs cursors and keys documento_hmac: a warning, with what to do.
    const hmacCheck = (extra: Record<string, string>) => JSON.parse(spawnSync(process.execPath, [AGRO, 'doctor', '--json'], { env: { ...env(), AGRO_HMAC_KEY: '', ...extra }, encoding: 'utf8', timeout: 60_000 }).stdout).checks.find((c: { name: string }) => c.name === 'hmac key');
    expect(hmacCheck({})).toMatchObject({ status: 'warn', detail: expect.stringMatching(/AGRO_HMAC_KEY is not set.*development key/), fix: expect.stringMatching(/^set AGRO_HMAC_KEY/) });
    expect(hmacCheck({ AGRO_HMAC_KEY: 'short' })).toMatchObject({ status: 'warn', detail: expect.stringMatching(/shorter than 32/) });
    expect(hmacCheck({ AGRO_HMAC_KEY: 'k'.repeat(40) })).toMatchObject({ status: 'ok' });
    const down = spawnSync(process.execPath, [AGRO, 'doctor'], { env: env({ DATABASE_URL: 'postgres://agro@127.0.0.1:9/agro' }), encoding: 'utf8' });
    expect(down.status).toBe(1);
    expect(down.stdout).toMatch(/✗ database +DATABASE_URL is unreachable.*\n +→ start that server or correct DATABASE_URL/);
  });
});

describe('agro doctor after a bad night', () => {
  test('a run and a slot left by a scheduler killed -9, failed and skipped last slots, a schedule file that does not validate: each a line with what to do', async () => {
    const fresh = await testDatabase();
    const server = await slowFileServer(IBGE_ZIP, 'BR_Municipios_2024.zip');
    try {
      const file = path.join(work, 'doctor-schedule.json');
      fs.writeFileSync(file, JSON.stringify({ timezone: 'UTC', jobs: {
        yearly: { cron: '0 0 1 1 *', pipelines: ['ibge-municipios'], sources: { 'ibge-municipios': server.url } },
        weekly: { cron: '0 3 * * 0', pipelines: ['zarc'] },
        daily: { cron: '0 4 * * *', pipelines: ['funai-tis'] },
      } }));
      // A scheduler catching up the yearly job, killed -9 in the middle of its download.
      await fresh.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('yearly', '0 0 1 1 *', 'UTC', '2000-01-01T00:00:00Z')`);
      const sched = spawn(process.execPath, [AGRO, 'schedule'], { env: env({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, AGRO_SCHEDULE_FILE: file, LOG_LEVEL: 'warn' }), stdio: 'ignore' });
      const killed = new Promise((r) => sched.on('exit', r));
      await server.started;
      sched.kill('SIGKILL');
      await killed;
      // A minute on (a slot claimed in the last minute may be a live scheduler's skip in progress).
      await fresh.pool.query(`UPDATE etl.schedule_slots SET claimed_at = claimed_at - interval '2 minutes'`);
      // A slot a live scheduler has just claimed to mark it skipped (unlocked for an instant): not stuck.
      await fresh.pool.query(`INSERT INTO etl.schedules (schedule, cron, timezone, last_slot) VALUES ('other', '0 4 * * *', 'UTC', now())`);
      await fresh.pool.query(`INSERT INTO etl.schedule_slots (schedule, slot, owner, status) VALUES ('other', date_trunc('minute', now()), 'h:2', 'running')`);
      // (the scheduler registered every job at its start)
      await fresh.pool.query(`INSERT INTO etl.schedule_slots (schedule, slot, owner, status, error, finished_at) VALUES
        ('weekly', '2026-11-15T03:00:00Z', 'h:1', 'done', NULL, now()), ('weekly', '2026-11-22T03:00:00Z', 'h:1', 'failed', 'zarc: source not found', now()),
        ('daily', '2026-11-24T04:00:00Z', 'h:1', 'skipped', 'the previous slot was still running', now())`);
      const doctor = (schedule = file) => spawnSync(process.execPath, [AGRO, 'doctor', '--json'], { env: env({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, AGRO_SCHEDULE_FILE: schedule }), encoding: 'utf8', timeout: 60_000 });
      const checkOf = (r: { stdout: string }, name: string) => JSON.parse(r.stdout).checks.find((c: { name: string }) => c.name === name);
      const bad = doctor();
      expect(bad.status, bad.stderr).toBe(1);
      expect(checkOf(bad, 'schedule file')).toMatchObject({ status: 'ok', detail: `${file} (3 jobs)` });
      expect(checkOf(bad, 'dead runs')).toEqual({ name: 'dead runs', status: 'warn', run_ids: [1], detail: '1 left running by a process that died: run 1 ibge-municipios (during download)', fix: expect.stringMatching(/^the next run of any pipeline .* cleans up after them/) });
      expect(checkOf(bad, 'stuck slots')).toEqual({
        name: 'stuck slots', status: 'fail', detail: expect.stringMatching(new RegExp(`^1 left running by a scheduler that is gone: yearly \\d{4}-01-01 00:00 UTC \\(${os.hostname()}:${sched.pid}\\)$`)),
        slots: [{ job: 'yearly', slot: expect.stringMatching(/-01-01T00:00:00\.000Z$/), status: 'running', owner: `${os.hostname()}:${sched.pid}`, error: null }],
        fix: 'start `agro schedule` again: it marks them interrupted and runs the latest once',
      });
      expect(checkOf(bad, 'last slots')).toMatchObject({
        status: 'fail', detail: 'daily 2026-11-24 04:00 UTC skipped (the previous slot was still running); weekly 2026-11-22 03:00 UTC failed (zarc: source not found)',
        slots: [{ job: 'daily', status: 'skipped' }, { job: 'weekly', status: 'failed' }],
      });
      // For people: one line each, with what to do.
      const text = spawnSync(process.execPath, [AGRO, 'doctor'], { env: env({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, AGRO_SCHEDULE_FILE: file }), encoding: 'utf8', timeout: 60_000 });
      expect(text.stdout).toMatch(/! dead runs +1 left running .*\n +→ the next run of any pipeline/);
      expect(text.stdout).toMatch(/✗ stuck slots +1 left running .*\n +→ start `agro schedule` again/);
      expect(text.stdout).toMatch(/✗ last slots +daily .*\n +→ read the error/);
      // A skipped last slot alone is a warning; with the scheduler back, nothing is stuck any more.
      await fresh.pool.query(`UPDATE etl.schedule_slots SET status = 'done', error = NULL WHERE schedule = 'weekly'`);
      await fresh.pool.query(`UPDATE etl.schedule_slots SET status = 'interrupted' WHERE schedule = 'yearly'`);
      const warned = doctor();
      expect(checkOf(warned, 'stuck slots')).toMatchObject({ status: 'ok' });
      expect(checkOf(warned, 'last slots')).toMatchObject({ status: 'warn', slots: [{ job: 'daily', status: 'skipped' }, { job: 'yearly', status: 'interrupted' }] });
      expect(checkOf(warned, 'dead runs')).toMatchObject({ status: 'warn' });
      expect(warned.status, warned.stdout).toBe(0);
      // A schedule file that does not validate: the scheduler would not start.
      const broken = path.join(work, 'doctor-broken.json');
      fs.writeFileSync(broken, JSON.stringify({ jobs: { a: { cron: '0 25 * * *', pipelines: ['zarc'] } } }));
      const invalid = doctor(broken);
      expect(invalid.status).toBe(1);
      expect(checkOf(invalid, 'schedule file')).toEqual({ name: 'schedule file', status: 'fail', detail: expect.stringMatching(/^invalid schedule file: .*doctor-broken\.json.*job "a".*hour/), fix: expect.stringMatching(/agro schedule --check/) });
    } finally {
      server.release();
      await server.close();
      await fresh.drop();
    }
  }, 120_000);
});

describe('a password written in a source URL', () => {
  test('is never shown: not in the run JSON, the logs, `agro runs` (table and JSON) or the ledger; `agro db url` still prints it', async () => {
    const fresh = await testDatabase();
    const server = http.createServer((_req, res) => res.writeHead(404).end('gone'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const run = (...args: string[]) => agroAsync({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir }, ...args);
      const failed = await run('run', 'zarc', '--source', `http://mirror:s3cr3t-pw@127.0.0.1:${port}/zarc.csv`, '--json');
      expect(failed.code).toBe(1);
      expect(JSON.parse(failed.out).error).toEqual({ code: 'source_not_found', message: expect.stringContaining(`http://mirror:***@127.0.0.1:${port}/zarc.csv`) });
      const listed = await run('runs', '--json');
      const table = await run('runs');
      const ledger = JSON.stringify((await fresh.pool.query(`SELECT options, error FROM etl.runs`)).rows);
      for (const text of [failed.out, failed.err, listed.out, table.out, ledger]) expect(text).not.toContain('s3cr3t-pw');
      expect(listed.out).toContain('mirror:***@');
      // The one command whose output is the URL itself prints it whole.
      const withPassword = 'postgres://agro:pw@127.0.0.1:9/agro';
      const url = spawnSync(process.execPath, [AGRO, 'db', 'url', '--json'], { env: env({ DATABASE_URL: withPassword }), encoding: 'utf8' });
      expect(JSON.parse(url.stdout)).toEqual({ url: withPassword });
    } finally {
      server.close();
      await fresh.drop();
    }
  });
});

describe('agro nightly with a pipeline failing in the middle', () => {
  test('the later pipelines still run (SICAR after the failed layer); exit 1; the last line and the JSON summary name the failure', async () => {
    const fresh = await testDatabase();
    try {
      // The official plan, every source a bundled fixture but FUNAI's, which is missing.
      const sources: Record<string, string> = {};
      for (const r of fixtureRuns()) if (!r.uf) sources[`AGRO_SOURCE_${r.pipeline.toUpperCase().replace(/-/g, '_')}`] = r.source;
      const nightEnv = { ...sources, AGRO_SOURCE_FUNAI_TIS: path.join(work, 'no-funai-here'), AGRO_SOURCE_SICAR: path.join(ROOT, 'fixtures/sicar/MT'), AGRO_SICAR_UFS: 'MT', DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, LOG_LEVEL: 'warn' };
      const night = (...extra: string[]) => spawnSync(process.execPath, [AGRO, 'nightly', ...extra], { env: env(nightEnv), encoding: 'utf8', timeout: 300_000 });
      const text = night();
      expect(text.status, text.stderr).toBe(1);
      const lines = text.stdout.trim().split('\n');
      expect(lines.at(-1)).toMatch(/^nightly: \d+ runs — \d+ published, 1 failed \(funai-tis: source_not_found\)$/);
      expect(lines.some((l) => /^sicar MT: unchanged|^sicar MT: published/.test(l))).toBe(true);
      const json = night('--json');
      expect(json.status).toBe(1);
      const o = JSON.parse(json.stdout);
      expect(o.summary).toEqual({ runs: o.runs.length, failed: ['funai-tis'], blocked: [], not_run: [], by_status: { unchanged: o.runs.length - 1, failed: 1 } });
    } finally {
      await fresh.drop();
    }
  }, 400_000);
});

describe('two agro nightly at once', () => {
  test('the second starts nothing and says which one holds the night (exit 1); the first loads every pipeline, no run fails', async () => {
    const fresh = await testDatabase();
    try {
      const night = (...extra: string[]) => agroAsync({ DATABASE_URL: fresh.url, AGRO_DATA_DIR: fresh.dataDir, LOG_LEVEL: 'warn' }, 'nightly', '--sources', 'fixtures', ...extra);
      const first = night();
      await eventually(async () => expect((await fresh.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n).toBeGreaterThan(0), 60_000);
      const second = await night('--json');
      expect(second.code).toBe(1);
      expect(second.out.trim().split('\n')).toHaveLength(1);
      expect(JSON.parse(second.out).error).toEqual({ code: 'nightly_in_progress', message: expect.stringMatching(/^the night is taken: another `agro nightly` is running, held by agro \d+@\S+ since \d{4}-\d\d-\d\d \d\d:\d\d UTC; this one starts nothing/) });
      const done = await first;
      expect(done.code, done.err).toBe(0);
      const runs = (await fresh.pool.query(`SELECT status, count(*)::int AS n FROM etl.runs GROUP BY status`)).rows;
      expect(runs).toEqual([{ status: 'published', n: fixtureRuns().length }]);
      // Once it is over, the next night starts.
      const next = await night('--json');
      expect(next.code, next.err).toBe(0);
    } finally {
      await fresh.drop();
    }
  }, 400_000);
});
