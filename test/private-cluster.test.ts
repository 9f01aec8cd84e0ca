// Operations on a PRIVATE embedded cluster (its own data folder and ports; the shared
// cluster is never touched): a taken port (issue 6 B.6) and the database stopped with
// `agro db stop` in the middle of a run (C.5).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster, freePort } from '../src/db/cluster.ts';
import { writeBigState } from './helpers/big-state.ts';

const ROOT = path.resolve(__dirname, '..');
let dataDir: string;
let blocker: net.Server;
let blockedPort: number;

function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'info', ...extra };
  delete env.DATABASE_URL; // the embedded (private) cluster, not the shared one
  if (!extra.AGRO_DB_PORT) delete env.AGRO_DB_PORT;
  return env;
}
function agro(args: string[], extra: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], { env: baseEnv(extra), encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
function oneObject(r: { stdout: string }) {
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  expect(lines, r.stdout).toHaveLength(1);
  return JSON.parse(lines[0]);
}

beforeAll(async () => {
  // A space and non-ASCII letters in the path, as a checkout may have: pg_ctl hands its -o options to a shell.
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro private cluster ção-'));
  // Another program on a port of our own: stands for a second checkout's cluster.
  blockedPort = await freePort();
  blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(blockedPort, '127.0.0.1', r));
});
afterAll(async () => {
  agro(['db', 'stop']);
  await new Promise((r) => blocker.close(r));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('a deep checkout', () => {
  test('a data folder whose socket path passes the 107 bytes a Unix socket address holds: the cluster starts, over TCP only', async () => {
    // The server refused to start there: "could not create any Unix-domain sockets".
    const deep = path.join(dataDir, 'a folder nested deep enough'.repeat(3), '.data');
    expect(Buffer.byteLength(path.join(deep, 'pg', 'run', '.s.PGSQL.65535'))).toBeGreaterThan(107);
    const port = String(await freePort());
    const env = { AGRO_DATA_DIR: deep, AGRO_DB_PORT: port };
    try {
      const r = agro(['db', 'start', '--json'], env);
      expect(r.code, r.stderr).toBe(0);
      expect(oneObject(r)).toMatchObject({ running: true, port: Number(port) });
      const c = new pg.Client({ connectionString: `postgres://agro@127.0.0.1:${port}/agro` });
      await c.connect();
      expect((await c.query(`SELECT current_setting('unix_socket_directories') AS d`)).rows[0].d).toBe('');
      await c.end();
    } finally {
      agro(['db', 'stop'], env);
    }
  }, 240_000);
});

describe('B.6 a taken port', () => {
  test('AGRO_DB_PORT naming a taken port: says what is wrong and what to do', () => {
    const r = agro(['db', 'start', '--json'], { AGRO_DB_PORT: String(blockedPort) });
    expect(r.code).toBe(1);
    const o = oneObject(r);
    expect(o.error.code).toBe('port_in_use');
    expect(o.error.message).toContain(`127.0.0.1:${blockedPort}`);
    expect(o.error.message).toMatch(/set AGRO_DB_PORT to a free port/);
    expect(r.stderr).not.toMatch(/Examine the log output/);
  });

  test('a remembered port that another program took: a free one is chosen, remembered and reported', () => {
    // The port file a previous start wrote; now someone else listens there.
    fs.mkdirSync(path.join(dataDir, 'pg'), { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'pg', 'port'), `${blockedPort}\n`);
    const r = agro(['db', 'start', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const o = oneObject(r);
    expect(o.running).toBe(true);
    expect(o.port).not.toBe(blockedPort);
    expect(o.note).toMatch(new RegExp(`port ${blockedPort} is used by another program.*uses port ${o.port}`));
    expect(fs.readFileSync(path.join(dataDir, 'pg', 'port'), 'utf8').trim()).toBe(String(o.port));
    expect(oneObject(agro(['db', 'url', '--json']))).toEqual({ url: `postgres://agro@127.0.0.1:${o.port}/agro` });
    const st = agro(['db', 'status', '--json']);
    expect(st.code).toBe(0);
    expect(oneObject(st)).toMatchObject({ running: true, port: o.port });
    // A second start finds it running on the remembered port.
    expect(oneObject(agro(['db', 'start', '--json']))).toMatchObject({ running: true, port: o.port });
  }, 240_000);
});

describe('C.5 the database stopped in the middle of a run', () => {
  test('`agro db stop` during normalise: a failed result with database_unavailable, no stack trace', async () => {
    expect(agro(['migrate', '--json']).code).toBe(0);
    const url = oneObject(agro(['db', 'url', '--json'])).url as string;
    const big = path.join(dataDir, 'MT-big');
    await writeBigState(big, 30_000);

    const child = spawn(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'run', 'sicar', '--uf', 'MT', '--source', big, '--json'], { env: baseEnv() });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));

    // Wait until the run is normalising.
    const watcher = new pg.Client({ connectionString: url });
    watcher.on('error', () => {});
    await watcher.connect();
    const deadline = Date.now() + 120_000;
    let normalising = false;
    try {
      while (!normalising && Date.now() < deadline) {
        const r = await watcher.query(`SELECT 1 FROM etl.run_stages WHERE stage = 'normalise' AND status = 'running'`);
        normalising = (r.rowCount ?? 0) > 0;
        if (!normalising) await new Promise((res) => setTimeout(res, 50));
      }
    } finally {
      await watcher.end().catch(() => {});
    }
    expect(normalising).toBe(true);

    // What `agro db stop` does (cmdDb → EmbeddedCluster.stop), in-process: spawning the CLI
    // takes seconds on a loaded machine, and the run could finish meanwhile.
    const st = await new EmbeddedCluster(loadConfig({ AGRO_DATA_DIR: dataDir })).stop();
    expect(st.running).toBe(false);

    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 60_000))]);
    if (code === 'hung') child.kill('SIGKILL');
    expect(code, stdout).toBe(1);
    expect(stderr).not.toMatch(/Unhandled 'error' event/);
    expect(stderr).not.toMatch(/\n\s+at /); // no raw stack trace
    const o = oneObject({ stdout });
    expect(o).toMatchObject({ pipeline: 'sicar', uf: 'MT', status: 'failed', error: { code: 'database_unavailable', message: expect.stringMatching(/database/) } });

    // Back up: the next run cleans up after the interrupted one.
    expect(agro(['db', 'start']).code).toBe(0);
    const next = agro(['run', 'sicar', '--uf', 'MT', '--source', big, '--json']);
    expect(next.code, next.stderr).toBe(0);
    expect(oneObject(next)).toMatchObject({ status: 'published', rows_loaded: 30_000 });
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    try {
      const runs = await check.query(`SELECT status, (SELECT count(*)::int FROM etl.run_stages s WHERE s.run_id = r.run_id AND s.status = 'running') AS running_stages
                                        FROM etl.runs r WHERE run_id = $1`, [o.run_id]);
      expect(runs.rows[0]).toEqual({ status: 'killed', running_stages: 0 });
    } finally {
      await check.end();
    }
  }, 400_000);
});
