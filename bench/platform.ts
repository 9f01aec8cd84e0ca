// Benchmark: the cost of the platform layer (issue 10) on the hottest route. The same lookup,
// GET /v1/car/{numero} with live keys, through auth + rate limit + quota + history, against
// the same server with those checks bypassed (benchBypassMetering, a switch only this script
// sets), same concurrency, one run, alternating sides to cancel drift.
//
//   node bin/run-ts.mjs bench/platform.ts [--concurrency 16] [--duration 10] [--rounds 2] [--keys 128] [--keep] [--db NAME]
//
// Data: the bundled fixtures loaded through the pipelines into a fresh database (the lookup's
// own cost is the same as in bench/api; what is measured here is the per-request overhead).
// Keys: --keys live enterprise keys used in turn, as many customers would, so that no key
// reaches its 600/minute or 700/month limit during the run (a 429 or 402 would be a cheaper
// answer), nor 70 % of the month (past it, each counted answer also queues threshold events).
// Target: metered rate ≥ 0.8 of the bypassed rate. A missed target is reported, not failed.
// Beside the rates, the CPU each side spends per request (the server process, and the database
// backends serving its pool, read from /proc): on a machine shared with other work the rates
// move with the neighbours' load, the CPU per request much less.
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import type pg from 'pg';
import { findPipeline } from '../pipelines/registry.ts';
import { fixtureRuns } from '../src/cli/main.ts';
import { loadConfig } from '../src/config.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool } from '../src/db/pool.ts';
import { runPipeline } from '../src/etl/run.ts';
import { createLogger } from '../src/log.ts';
import { createKey } from '../src/platform/keys.ts';
import { BENCH_DATA_DIR, ROOT_DIR, benchServerUrl, createDatabase, dropDatabase, log, machineInfo, parseFlags, processCpuMs, table, withDatabase, writeResult } from './lib.ts';

const flags = parseFlags(process.argv.slice(2), { concurrency: 16, duration: 10, rounds: 2, keys: 128, keep: false, db: '' });
const TARGET_RATIO = 0.8;

function startServer(url: string, bypass: boolean): Promise<{ base: string; child: ChildProcess }> {
  // The warm-up drives one key at full concurrency: the per-key in-flight limit (half the pool) would refuse half of it.
  const child = spawn(process.execPath, [path.join(ROOT_DIR, 'bin', 'run-ts.mjs'), 'bench/platform-server.ts', ...(bypass ? ['--bypass'] : [])], {
    cwd: ROOT_DIR, env: { ...process.env, DATABASE_URL: url, AGRO_API_POOL: String(flags.concurrency), AGRO_API_KEY_MAX_IN_FLIGHT: String(flags.concurrency) }, stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /\{"url":"([^"]+)"\}/.exec(out);
      if (m) resolve({ base: m[1], child });
    });
    child.on('exit', (code) => reject(new Error(`bench server exited ${code}`)));
  });
}

const stopServer = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.removeAllListeners('exit');
    child.on('exit', () => resolve());
    child.kill('SIGTERM');
  });

interface Side {
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  requests: number;
  /** CPU per request in µs: the server process and the database backends of its pool (null without /proc). */
  cpu: { server: number; db: number } | null;
  load: number;
}


/** CPU (ms) of the server and of its pool's backends (application_name agro-api) so far. */
async function cpuOf(pool: pg.Pool, db: string, serverPid: number): Promise<{ server: number | null; backends: Map<number, number> }> {
  const pids = (await pool.query(`SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'agro-api'`, [db])).rows.map((r) => r.pid as number);
  const backends = new Map<number, number>();
  for (const pid of pids) {
    const ms = processCpuMs(pid);
    if (ms !== null) backends.set(pid, ms);
  }
  return { server: processCpuMs(serverPid), backends };
}

async function drive(base: string, cars: string[], keys: string[], amount?: number): Promise<Omit<Side, 'cpu' | 'load'>> {
  let i = 0;
  const r = await autocannon({
    url: base,
    connections: flags.concurrency,
    ...(amount ? { amount } : { duration: flags.duration }),
    requests: [{
      method: 'GET',
      setupRequest: (req: Record<string, unknown>) => {
        i++;
        return { ...req, path: `/v1/car/${cars[i % cars.length]}`, headers: { authorization: `Bearer ${keys[i % keys.length]}` } };
      },
    }],
  });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, bad: r.errors + r.non2xx, requests: r.requests.total };
}

async function main() {
  const server = benchServerUrl();
  // --db: a database kept by an earlier run (--keep), migrated again, fixtures already loaded.
  const name = flags.db || `bench_platform_${Date.now()}`;
  const url = flags.db ? withDatabase(server, name) : await createDatabase(server, name);
  const pool = createPool(url, 4);
  try {
    await migrate(pool);
    if (!flags.db) {
      log(`database ${name}: loading the fixtures`);
      const cfg = loadConfig({ ...process.env, DATABASE_URL: url, AGRO_DATA_DIR: path.join(BENCH_DATA_DIR, 'platform') });
      for (const r of fixtureRuns()) {
        const o = await runPipeline({ cfg, pool, log: createLogger('warn') }, findPipeline(r.pipeline)!, { source: r.source, uf: r.uf });
        if (o.status !== 'published' && o.status !== 'unchanged') throw new Error(`${r.pipeline} ${r.uf ?? ''}: ${o.status}`);
      }
    }
    const cars = (await pool.query(`SELECT car FROM serving.car_imovel ORDER BY car`)).rows.map((r) => r.car as string);
    const sides: Record<'bypassed' | 'metered', Side[]> = { bypassed: [], metered: [] };
    for (let round = 0; round < flags.rounds; round++) {
      for (const side of ['bypassed', 'metered'] as const) {
        // Fresh keys per run: each side starts with empty counters.
        const keys = await Promise.all(Array.from({ length: flags.keys + 1 }, () => createKey(pool, { env: 'live', plan: 'enterprise', name: 'bench' }).then((k) => k.key)));
        const warmKey = keys.pop()!;
        const s = await startServer(url, side === 'bypassed');
        try {
          await drive(s.base, cars, [warmKey], 200); // warm-up (its own key, within its limits): connections, prepared statements
          const before = await cpuOf(pool, name, s.child.pid!);
          const d = await drive(s.base, cars, keys);
          const after = await cpuOf(pool, name, s.child.pid!);
          // Backends opened during the run count from zero (their start-up is the run's too).
          const dbMs = [...after.backends].reduce((a, [pid, ms]) => a + ms - (before.backends.get(pid) ?? 0), 0);
          const cpu = before.server !== null && after.server !== null && after.backends.size > 0
            ? { server: ((after.server - before.server) * 1000) / d.requests, db: (dbMs * 1000) / d.requests } : null;
          const r: Side = { ...d, cpu, load: os.loadavg()[0] };
          log(`${side} round ${round + 1}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms, ${r.bad} non-2xx of ${r.requests}` +
            (cpu ? `; CPU per request: server ${cpu.server.toFixed(0)} µs, database ${cpu.db.toFixed(0)} µs` : '') + `; load ${r.load.toFixed(1)}`);
          sides[side].push(r);
        } finally {
          await stopServer(s.child);
        }
      }
    }
    const avg = (xs: Side[], f: (s: Side) => number) => xs.reduce((a, x) => a + f(x), 0) / xs.length;
    const bypassed = avg(sides.bypassed, (s) => s.rps);
    const metered = avg(sides.metered, (s) => s.rps);
    const ratio = metered / bypassed;
    const history = (await pool.query(`SELECT count(*)::int AS n FROM platform.requests`)).rows[0].n;
    const cpuKnown = [...sides.bypassed, ...sides.metered].every((s) => s.cpu !== null);
    const cpuOfSide = (k: 'bypassed' | 'metered') => avg(sides[k], (s) => s.cpu!.server + s.cpu!.db);
    const cpuRatio = cpuKnown ? cpuOfSide('bypassed') / cpuOfSide('metered') : null;
    process.stdout.write('\n' + table([
      ['side', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'server µs/req', 'db µs/req'],
      ...(['bypassed', 'metered'] as const).map((k) => [
        k, avg(sides[k], (s) => s.rps).toFixed(0), avg(sides[k], (s) => s.p50).toFixed(1), avg(sides[k], (s) => s.p99).toFixed(1), String(sides[k].reduce((a, s) => a + s.bad, 0)),
        cpuKnown ? avg(sides[k], (s) => s.cpu!.server).toFixed(0) : 'n/a', cpuKnown ? avg(sides[k], (s) => s.cpu!.db).toFixed(0) : 'n/a',
      ]),
    ]) + `\nmetered / bypassed: ${ratio.toFixed(2)} (target ≥ ${TARGET_RATIO}: ${ratio >= TARGET_RATIO ? 'met' : 'MISSED'}); history rows written: ${history}\n` +
      (cpuRatio !== null ? `CPU per request, bypassed / metered: ${cpuRatio.toFixed(2)} (the rate ratio the CPU alone allows)\n` : '') +
      `load average during the rounds: ${[...sides.bypassed, ...sides.metered].map((s) => s.load.toFixed(1)).join(', ')}\n`);
    const file = writeResult('platform', { machine: machineInfo(), flags, sides, ratio, cpu_ratio: cpuRatio, target: TARGET_RATIO, history_rows: history });
    log(`wrote ${file}`);
    if (sides.metered.some((s) => s.bad > 0) || sides.bypassed.some((s) => s.bad > 0)) process.exitCode = 1;
  } finally {
    await pool.end();
    if (!flags.keep && !flags.db) await dropDatabase(server, name);
    else log(`kept database ${name} (--db ${name} reuses it)`);
  }
}

await main();
