// The API from the command line: `agro keys create|list|revoke`, `agro serve` as a real
// process (its request log: no Authorization header, no CPF in clear), and `agro demo`
// ending with the API and three curl lines that answer from the fixtures.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { scriptArgs, shellLine, TERMINAL_ENV } from './helpers/terminal.ts';

const ROOT = path.resolve(__dirname, '..');
const BIN = path.join(ROOT, 'bin', 'agro.mjs');
let db: TestDb;

beforeAll(async () => {
  db = await testDatabase();
}, 120_000);
afterAll(async () => {
  await db?.drop();
});

const env = (extra: Record<string, string> = {}) => ({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info', ...extra });

function agro(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, env: env(), encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Starts a long-running agro command; resolves once `ready` matches its stdout. */
function start(args: string[], ready: RegExp, extra: Record<string, string> = {}): Promise<{ child: ChildProcess; out: () => string; err: () => string; match: RegExpMatchArray }> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: env(extra), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = out.match(ready);
      if (m) resolve({ child, out: () => out, err: () => err, match: m });
    });
    child.on('exit', (code) => reject(new Error(`agro ${args.join(' ')} exited ${code}: ${err.slice(-2000)}`)));
  });
}

function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  return new Promise((resolve) => {
    child.removeAllListeners('exit');
    child.on('exit', (code) => resolve(code));
    child.kill(signal);
  });
}

describe('agro keys', () => {
  test('create prints the key once; list shows prefix and last four, never the key; revoke', () => {
    const c = agro(['keys', 'create', '--env', 'live', '--plan', 'professional', '--name', 'Banco X', '--json']);
    expect(c.code).toBe(0);
    const k = JSON.parse(c.stdout);
    expect(Object.keys(k).sort()).toEqual(['env', 'id', 'key', 'name', 'plan']);
    expect(k).toMatchObject({ env: 'live', plan: 'professional', name: 'Banco X' });
    expect(k.key).toMatch(/^ck_live_[0-9A-Za-z]{38}$/);
    expect(k.id).toMatch(/^key_/);
    const t = JSON.parse(agro(['keys', 'create', '--env', 'test', '--plan', 'starter', '--json']).stdout);
    expect(t.key).toMatch(/^ck_test_/);
    expect(t.name).toBeNull();

    const l = agro(['keys', 'list', '--json']);
    expect(l.code).toBe(0);
    expect(l.stdout).not.toContain(k.key);
    expect(l.stdout).not.toContain(k.key.slice(12, 40));
    const keys = JSON.parse(l.stdout).keys;
    const mine = keys.find((x: { id: string }) => x.id === k.id);
    expect(mine).toMatchObject({ name: 'Banco X', env: 'live', plan: 'professional', prefix: k.key.slice(0, 12), last4: k.key.slice(-4), revoked_at: null });
    expect(Date.parse(mine.created_at)).toBeGreaterThan(Date.now() - 120_000);
    const human = agro(['keys', 'list']).stdout;
    expect(human).toContain(`${k.key.slice(0, 12)}…${k.key.slice(-4)}`);

    const r = agro(['keys', 'revoke', k.id, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).id).toBe(k.id);
    const after = JSON.parse(agro(['keys', 'list', '--json']).stdout).keys.find((x: { id: string }) => x.id === k.id);
    expect(Date.parse(after.revoked_at)).toBeGreaterThan(0);
    expect(agro(['keys', 'list']).stdout).toMatch(/REVOKED/);
  }, 300_000);

  test('usage errors exit 2; an unknown id exits 1', () => {
    expect(agro(['keys', 'create', '--env', 'prod', '--plan', 'starter']).code).toBe(2);
    expect(agro(['keys', 'create', '--env', 'live', '--plan', 'gold']).code).toBe(2);
    expect(agro(['keys', 'create', '--env', 'live']).code).toBe(2);
    expect(agro(['keys', 'revoke']).code).toBe(2);
    expect(agro(['keys', 'frobnicate']).code).toBe(2);
    const missing = agro(['keys', 'revoke', 'key_nope', '--json']);
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.stdout).error.code).toBe('key_not_found');
  }, 300_000);
});

describe('agro demo and agro serve', () => {
  test('demo loads the fixtures, serves the API and prints three curl lines that answer', async () => {
    const demo = await start(['demo', '--port', '0'], /Ctrl-C to stop/);
    try {
      const out = demo.out();
      const lines = out.split('\n').filter((l) => l.trim().startsWith('curl '));
      expect(lines).toHaveLength(3);
      for (const line of lines) {
        const key = /Bearer (ck_test_\w+)/.exec(line)![1];
        const url = /'(http:\/\/127\.0\.0\.1:\d+\/v1\/[^']+)'$/.exec(line)![1];
        const body = /-d '(.+)' '/.exec(line)?.[1];
        const res = await fetch(url, { method: body ? 'POST' : 'GET', headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body });
        expect(res.status, line).toBe(200);
        const j = await res.json();
        if (url.includes('by-document') || url.includes('by-geometry')) expect(j.count, line).toBeGreaterThan(0);
        else expect(j.car).toMatch(/^[A-Z]{2}-\d{7}-[0-9A-F]{32}$/);
      }
    } finally {
      expect(await stop(demo.child, 'SIGINT')).toBe(0);
    }
  }, 180_000);

  test('serve: the request log carries no Authorization header and no CPF in clear', async () => {
    const k = JSON.parse(agro(['keys', 'create', '--env', 'live', '--plan', 'growth', '--json']).stdout).key as string;
    const s = await start(['serve', '--port', '0', '--json'], /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
    const base = s.match[1];
    try {
      const r = await fetch(`${base}/v1/car/by-document/529.982.247-25`, { headers: { authorization: `Bearer ${k}`, 'x-lgpd-base-legal': 'consentimento' } });
      expect(r.status).toBe(200);
      const bad = await fetch(`${base}/v1/car/by-document/52998224724`, { headers: { authorization: `Bearer ${k}` } });
      expect(bad.status).toBe(400);
      expect(await bad.text()).not.toContain('52998224724');
      await fetch(`${base}/v1/car/by-document/52998224725`, { headers: { authorization: `Bearer ${k}x` } });
    } finally {
      expect(await stop(s.child)).toBe(0);
    }
    const log = s.err();
    expect(log).toMatch(/"msg":"request"/);
    expect(log).toContain('***.982.247-**');
    for (const secret of ['52998224725', '529.982.247-25', '52998224724', k, k.slice(8, 40)]) expect(log).not.toContain(secret);
  }, 120_000);

  test('serve at a terminal: readable log lines, as every other command (JSON when stderr is not a terminal, or with LOG_FORMAT=json)', async () => {
    // It wrote JSON lines at a terminal too: its logger ignored the terminal (README: "At a terminal … log lines are readable").
    const served = async (extra: Record<string, string>) => {
      // exec: script runs the command through $SHELL -c, and dash (the /bin/sh of a CI machine, whose
      // SHELL may be unset) forks for it where bash execs; the SIGTERM below must reach agro, not a shell.
      const child = spawn('script', scriptArgs(`exec ${shellLine([process.execPath, BIN, 'serve', '--port', '0'])}`), { cwd: ROOT, env: env({ ...TERMINAL_ENV, ...extra }), stdio: ['ignore', 'pipe', 'pipe'] });
      let screen = '';
      child.stderr!.on('data', (d) => (screen += d));
      const base = await new Promise<string>((resolve, reject) => {
        child.stdout!.on('data', (d) => {
          screen += d;
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(screen);
          if (m) resolve(m[1]);
        });
        child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${screen.slice(-2000)}`)));
      });
      expect((await fetch(`${base}/v1/car/by-document/52998224725`)).status).toBe(401);
      // SIGTERM to agro itself (script's child), which flushes its log and exits; script then ends with it.
      const agroPid = Number(spawnSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).stdout.trim());
      expect(agroPid).toBeGreaterThan(0);
      const exited = new Promise<number | null>((resolve) => {
        child.removeAllListeners('exit');
        child.on('exit', (code) => resolve(code));
      });
      process.kill(agroPid, 'SIGTERM');
      expect(await exited).toBe(0);
      return screen;
    };
    const tty = await served({});
    expect(tty).toMatch(/ request {2}.*method=GET url=\/v1\/car\/by-document\/\*\*\*\.982\.247-\*\* status=401/);
    expect(tty).not.toMatch(/\{"level":/);
    expect(tty).not.toContain('52998224725');
    const json = await served({ LOG_FORMAT: 'json' });
    expect(json).toMatch(/\{"level":30,.*"msg":"request"/);
    expect(json).not.toContain('52998224725');
  }, 120_000);
});
