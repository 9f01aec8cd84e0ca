// Shared helpers of the benchmarks: a seeded PRNG, argument parsing, throwaway
// databases on the embedded cluster, timed child processes with peak RSS, and the
// output table / JSON. Benchmarks are not tests: they exit non-zero on errors only,
// never on a missed target.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BENCH_DATA_DIR = path.join(ROOT_DIR, '.data', 'bench');
export const BENCH_OUT_DIR = path.join(ROOT_DIR, 'bench', 'out');
export const AGRO_BIN = path.join(ROOT_DIR, 'bin', 'agro.mjs');

// ---------------------------------------------------------------------------------
// Deterministic randomness

/** sfc32: small, fast, good enough for synthetic data; the same seed gives the same stream. */
export function prng(seed: number): () => number {
  let a = 0x9e3779b9, b = 0x243f6a88, c = 0xb7e15162, d = seed >>> 0;
  const next = () => {
    a >>>= 0; b >>>= 0; c >>>= 0; d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 16; i++) next(); // decorrelate nearby seeds
  return next;
}

/** Picks from weighted choices with a uniform draw u in [0, 1). */
export function weighted<T>(u: number, choices: readonly (readonly [T, number])[]): T {
  const total = choices.reduce((s, [, w]) => s + w, 0);
  let x = u * total;
  for (const [v, w] of choices) {
    if (x < w) return v;
    x -= w;
  }
  return choices[choices.length - 1][0];
}

// ---------------------------------------------------------------------------------
// Arguments

/** `--name value` / `--flag` parsing with defaults; unknown options are an error. */
export function parseFlags<T extends Record<string, string | number | boolean>>(argv: string[], defaults: T): T {
  const out: Record<string, string | number | boolean> = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([\w-]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m || !(m[1] in defaults)) throw new Error(`unknown argument ${argv[i]} (known: ${Object.keys(defaults).map((k) => '--' + k).join(' ')})`);
    const key = m[1];
    const kind = typeof defaults[key];
    if (kind === 'boolean') {
      out[key] = m[2] === undefined ? true : m[2] !== 'false';
      continue;
    }
    const raw = m[2] ?? argv[++i];
    if (raw === undefined) throw new Error(`--${key} needs a value`);
    if (kind === 'number') {
      const n = Number(raw.replace(/_/g, ''));
      if (!Number.isFinite(n)) throw new Error(`--${key} must be a number, got ${raw}`);
      out[key] = n;
    } else out[key] = raw;
  }
  return out as T;
}

// ---------------------------------------------------------------------------------
// Databases

export function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = '/' + db;
  return u.toString();
}

/** Runs the agro CLI synchronously and returns its stdout (throws on a non-zero exit). */
export function agroSync(args: string[], env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(process.execPath, [AGRO_BIN, ...args], { env, encoding: 'utf8', cwd: ROOT_DIR });
  if (r.status !== 0) throw new Error(`agro ${args.join(' ')} exited ${r.status}: ${(r.stderr || r.stdout).trim().slice(-2000)}`);
  return r.stdout;
}

/**
 * The server benchmarks create their databases on: DATABASE_URL when set, otherwise the
 * embedded cluster, started with `agro db start` (a no-op when it runs).
 */
export function benchServerUrl(): string {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  agroSync(['db', 'start', '--json']);
  return JSON.parse(agroSync(['db', 'url', '--json'])).url as string;
}

export async function adminQuery<T extends pg.QueryResultRow = pg.QueryResultRow>(serverUrl: string, sql: string, db = 'postgres'): Promise<pg.QueryResult<T>> {
  const c = new pg.Client({ connectionString: withDatabase(serverUrl, db), application_name: 'agro-bench' });
  await c.connect();
  try {
    return await c.query<T>(sql);
  } finally {
    await c.end();
  }
}

export async function createDatabase(serverUrl: string, name: string): Promise<string> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
  await adminQuery(serverUrl, `CREATE DATABASE ${name}`);
  return withDatabase(serverUrl, name);
}

export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad database name ${name}`);
  await adminQuery(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
}

// ---------------------------------------------------------------------------------
// Timed child processes

export interface TimedRun {
  command: string[];
  exitCode: number | null;
  signal: string | null;
  wallMs: number;
  /** Peak resident set size of the process in bytes (null when it could not be measured). */
  peakRssBytes: number | null;
  rssSource: '/usr/bin/time -v' | '/proc VmHWM' | null;
  /** CPU seconds of the process itself (user, system), from GNU time; null without it. */
  cpuUserS: number | null;
  cpuSysS: number | null;
  stdout: string;
  stderrFile: string;
}

const GNU_TIME = '/usr/bin/time';

function hasGnuTime(): boolean {
  if (!fs.existsSync(GNU_TIME)) return false;
  const r = spawnSync(GNU_TIME, ['-v', 'true'], { encoding: 'utf8' });
  return r.status === 0 && /Maximum resident set size/.test(r.stderr);
}

function vmHwmBytes(pid: number): number | null {
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time (user + system) of a process in ms, null when /proc cannot tell (gone, another host). */
export function processCpuMs(pid: number): number | null {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  } catch {
    return null;
  }
}

/**
 * Runs a command to completion, timing its wall clock and measuring its peak RSS
 * (GNU time's "Maximum resident set size" when available, else polling VmHWM).
 * stdout is captured; stderr goes to `stderrFile` (logs can be large).
 */
export async function timedRun(command: string[], opts: { env?: NodeJS.ProcessEnv; stderrFile: string; cwd?: string }): Promise<TimedRun> {
  fs.mkdirSync(path.dirname(opts.stderrFile), { recursive: true });
  const errFd = fs.openSync(opts.stderrFile, 'w');
  const gnu = hasGnuTime();
  const timeFile = path.join(os.tmpdir(), `agro-bench-time-${process.pid}-${Date.now()}.txt`);
  const argv = gnu ? [GNU_TIME, '-v', '-o', timeFile, ...command] : command;
  const t0 = process.hrtime.bigint();
  const child = spawn(argv[0], argv.slice(1), { env: opts.env ?? process.env, cwd: opts.cwd ?? ROOT_DIR, stdio: ['ignore', 'pipe', errFd] });
  let stdout = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  let polled: number | null = null;
  const poll = gnu
    ? null
    : setInterval(() => {
        const v = child.pid ? vmHwmBytes(child.pid) : null;
        if (v !== null && (polled === null || v > polled)) polled = v;
      }, 25);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c, s) => resolve({ code: c, signal: s }));
  });
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
  if (poll) clearInterval(poll);
  fs.closeSync(errFd);
  let peak: number | null = polled;
  let exitCode = code;
  let cpuUserS: number | null = null;
  let cpuSysS: number | null = null;
  if (gnu) {
    try {
      const text = fs.readFileSync(timeFile, 'utf8');
      const m = /Maximum resident set size \(kbytes\): (\d+)/.exec(text);
      peak = m ? Number(m[1]) * 1024 : null;
      const st = /Exit status: (\d+)/.exec(text);
      if (st) exitCode = Number(st[1]);
      if (/Command terminated by signal/.test(text)) exitCode = exitCode || 128;
      const user = /User time \(seconds\): ([\d.]+)/.exec(text);
      const sys = /System time \(seconds\): ([\d.]+)/.exec(text);
      cpuUserS = user ? Number(user[1]) : null;
      cpuSysS = sys ? Number(sys[1]) : null;
    } catch {
      /* time could not write its report: leave peak unknown */
    }
    fs.rmSync(timeFile, { force: true });
  }
  return {
    command, exitCode, signal: signal ?? null, wallMs, peakRssBytes: peak,
    rssSource: peak === null ? null : gnu ? '/usr/bin/time -v' : '/proc VmHWM',
    cpuUserS, cpuSysS, stdout, stderrFile: opts.stderrFile,
  };
}

/** The last `n` lines of a file, for error messages. */
export function tail(file: string, n = 20): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

// ---------------------------------------------------------------------------------
// Server-side statement profile (embedded cluster only)

/** The embedded cluster's server log, when readable (`agro db status` tells where the cluster lives). */
export function embeddedServerLog(): string | null {
  if (process.env.DATABASE_URL) return null;
  try {
    const st = JSON.parse(agroSync(['db', 'status', '--json']));
    const file = path.join(path.dirname(st.dataDir as string), 'server.log');
    fs.accessSync(file, fs.constants.R_OK);
    return file;
  } catch {
    return null;
  }
}

export interface StatementTiming {
  /** Statement text, whitespace collapsed, numbers of run/snapshot ids masked, cut at 140 chars. */
  statement: string;
  calls: number;
  total_ms: number;
  max_ms: number;
}

export interface StatementLog {
  file: string;
  db: string;
  offset: number;
  /** Backend pids seen connected to `db` (polled from pg_stat_activity). */
  pids: Set<string>;
  stop(): Promise<void>;
}

/**
 * Makes every new session of `db` log its statements with durations
 * (log_min_duration_statement = 0) and polls pg_stat_activity for the backends of `db`,
 * so that its statements can be told apart from other databases' in the shared log.
 */
export async function startStatementLog(serverUrl: string, db: string, logFile: string): Promise<StatementLog> {
  await adminQuery(serverUrl, `ALTER DATABASE ${db} SET log_min_duration_statement = 0`);
  const pids = new Set<string>();
  const c = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres'), application_name: 'agro-bench' });
  await c.connect();
  let stopped = false;
  const poll = async () => {
    while (!stopped) {
      const r = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [db]).catch(() => ({ rows: [] }));
      for (const row of r.rows) pids.add(String(row.pid));
      await new Promise((res) => setTimeout(res, 100));
    }
  };
  const loop = poll();
  return {
    file: logFile, db, offset: fs.statSync(logFile).size, pids,
    async stop() {
      stopped = true;
      await loop;
      await c.end();
    },
  };
}

/** Statement durations of the sessions of `db` logged since the start, most expensive first. */
export function readStatementLog(sl: StatementLog): StatementTiming[] {
  const { file: logFile, offset, pids } = sl;
  const fd = fs.openSync(logFile, 'r');
  let text: string;
  try {
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(Math.max(0, size - offset));
    fs.readSync(fd, buf, 0, buf.length, offset);
    text = buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
  const entries: { pid: string; ms: number; sql: string }[] = [];
  let cur: { pid: string; ms: number; sql: string } | null = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('\t') && cur) {
      cur.sql += '\n' + line.slice(1);
      continue;
    }
    cur = null;
    const d = /\[(\d+)\] LOG:  duration: ([\d.]+) ms  (?:statement|execute [^:]*): (.*)$/.exec(line);
    if (d) {
      cur = { pid: d[1], ms: Number(d[2]), sql: d[3] };
      entries.push(cur);
    }
  }
  const by = new Map<string, StatementTiming>();
  for (const e of entries) {
    if (!pids.has(e.pid)) continue;
    const key = e.sql.replace(/--[^\n]*/g, ' ').replace(/\s+/g, ' ').replace(/\br\d+_/g, 'r?_').replace(/__s\d+/g, '__s?').replace(/\$\d+|\b\d+\b/g, '?').trim().slice(0, 140);
    const t = by.get(key) ?? { statement: key, calls: 0, total_ms: 0, max_ms: 0 };
    t.calls++;
    t.total_ms += e.ms;
    t.max_ms = Math.max(t.max_ms, e.ms);
    by.set(key, t);
  }
  return [...by.values()].sort((a, b) => b.total_ms - a.total_ms).map((t) => ({ ...t, total_ms: Math.round(t.total_ms), max_ms: Math.round(t.max_ms) }));
}

// ---------------------------------------------------------------------------------
// Output

export const mb = (bytes: number | null | undefined): string => (bytes == null ? 'n/a' : `${(bytes / 1048576).toFixed(0)} MB`);
export const secs = (ms: number | null | undefined): string => (ms == null ? 'n/a' : `${(ms / 1000).toFixed(2)} s`);

/** A plain-text table: first row is the header, columns after the first right-aligned. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? (c ?? '').padEnd(widths[i]) : (c ?? '').padStart(widths[i]))).join('  ');
  return [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** Writes bench/out/<name>-<yyyy-mm-dd>.json (a second run the same day gets -2, -3, …). */
export function writeResult(name: string, data: unknown): string {
  fs.mkdirSync(BENCH_OUT_DIR, { recursive: true });
  const day = new Date().toISOString().slice(0, 10);
  let file = path.join(BENCH_OUT_DIR, `${name}-${day}.json`);
  for (let i = 2; fs.existsSync(file); i++) file = path.join(BENCH_OUT_DIR, `${name}-${day}-${i}.json`);
  fs.writeFileSync(file, JSON.stringify(data, null, 2) + '\n');
  return file;
}

/** Machine facts that matter when reading a benchmark's numbers. */
export function machineInfo() {
  return {
    node: process.version,
    cpus: os.cpus().length,
    cpu_model: os.cpus()[0]?.model ?? null,
    mem_total_mb: Math.round(os.totalmem() / 1048576),
    loadavg: os.loadavg().map((x) => Number(x.toFixed(2))),
    platform: `${os.platform()} ${os.release()}`,
  };
}

export const log = (msg: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
};
