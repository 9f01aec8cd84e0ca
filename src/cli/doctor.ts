// `agro doctor`: checks the installation and how it runs (dead runs, the schedule), and says
// what to do about each problem.
// Exit 1 when a check fails (warnings alone exit 0). Nothing is changed: no migration, no start.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Config } from '../config.ts';
import { databaseUrl } from '../db/cluster.ts';
import { listMigrations } from '../db/migrate.ts';
import { formatBytes } from '../progress.ts';
import { AgroError } from '../errors.ts';
import { PIPELINES } from '../../pipelines/registry.ts';
import { loadSchedule, type ScheduleConfig } from '../schedule/config.ts';
import { JOB_LOCK, lastSlots } from '../schedule/claims.ts';
import { advisoryHeld } from '../etl/run-locks.ts';
import { deadRuns } from './runs.ts';
import { print, type Env } from './context.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do, when the status is not ok. */
  fix?: string;
  /** dead runs: the runs left `running` by a process that died. */
  run_ids?: number[];
  /** stuck slots, last slots: the slots in question. */
  slots?: { job: string; slot: string; status: string; owner: string; error: string | null }[];
}

const REQUIRED_DRIVERS = ['ESRI Shapefile', 'CSV', 'GeoJSON'];
const MIN_FREE_BYTES = 2e9;
const WARN_FREE_BYTES = 20e9;

function checkNode(): Check {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 20
    ? { name: 'node', status: 'ok', detail: `Node.js ${process.versions.node}` }
    : { name: 'node', status: 'fail', detail: `Node.js ${process.versions.node}`, fix: 'install Node.js 20 or newer' };
}

async function checkGdal(): Promise<Check[]> {
  let gdal: typeof import('gdal-async');
  try {
    gdal = (await import('gdal-async')).default;
  } catch (e) {
    return [{ name: 'gdal', status: 'fail', detail: `gdal-async does not load: ${(e as Error).message}`, fix: 'install libgdal-dev and rebuild: ./dev setup (it runs npm ci with npm_config_build_from_source=gdal-async npm_config_shared_gdal=true)' }];
  }
  const names = new Set(gdal.drivers.getNames());
  const missing = REQUIRED_DRIVERS.filter((d) => !names.has(d));
  return [
    { name: 'gdal', status: 'ok', detail: `GDAL ${gdal.version} (${gdal.bundled ? 'bundled with gdal-async' : 'system library'}), ${names.size} drivers` },
    missing.length
      ? { name: 'gdal drivers', status: 'fail', detail: `missing ${missing.join(', ')}`, fix: 'install a GDAL build with these drivers (Debian: libgdal-dev gdal-bin) and rebuild gdal-async (./dev setup)' }
      : { name: 'gdal drivers', status: 'ok', detail: REQUIRED_DRIVERS.join(', ') },
  ];
}

/** Free space where the data folder is (or would be created). */
function checkDisk(cfg: Config): Check {
  let dir = cfg.dataDir;
  while (!fs.existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  try {
    const st = fs.statfsSync(dir);
    const free = st.bavail * st.bsize;
    const detail = `${formatBytes(free)} free under ${cfg.dataDir}`;
    if (free < MIN_FREE_BYTES) return { name: 'disk', status: 'fail', detail, fix: `free space or point AGRO_DATA_DIR at a larger disk (≥ ${formatBytes(MIN_FREE_BYTES)}; a national load needs ≥ ${formatBytes(WARN_FREE_BYTES)})` };
    if (free < WARN_FREE_BYTES) return { name: 'disk', status: 'warn', detail, fix: `a national SICAR load needs about ${formatBytes(WARN_FREE_BYTES)} of raw files and work space` };
    fs.accessSync(dir, fs.constants.W_OK);
    return { name: 'disk', status: 'ok', detail };
  } catch (e) {
    return { name: 'disk', status: 'fail', detail: `${dir}: ${(e as Error).message}`, fix: 'make AGRO_DATA_DIR a writable folder' };
  }
}

async function checkDatabase(cfg: Config, schedule: ScheduleConfig | null): Promise<Check[]> {
  const url = databaseUrl(cfg);
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  const where = cfg.databaseUrl ? 'DATABASE_URL' : 'the embedded cluster';
  try {
    await client.connect();
  } catch (e) {
    return [{
      name: 'database', status: 'fail', detail: `${where} is unreachable: ${(e as Error).message}`,
      fix: cfg.databaseUrl ? 'start that server or correct DATABASE_URL' : 'run `agro db start` (or set DATABASE_URL)',
    }];
  }
  try {
    const checks: Check[] = [{ name: 'database', status: 'ok', detail: `reachable (${where})` }];
    const v = (await client.query(`SELECT current_setting('server_version_num')::int AS n, current_setting('server_version') AS s`)).rows[0];
    checks.push(v.n >= 150000
      ? { name: 'postgresql', status: 'ok', detail: `PostgreSQL ${v.s}` }
      : { name: 'postgresql', status: 'fail', detail: `PostgreSQL ${v.s}`, fix: 'use PostgreSQL 15 or newer' });
    const ext = (await client.query(`SELECT (SELECT extversion FROM pg_extension WHERE extname = 'postgis') AS installed,
                                            (SELECT default_version FROM pg_available_extensions WHERE name = 'postgis') AS available`)).rows[0];
    if (ext.installed) {
      const full = (await client.query('SELECT postgis_full_version() AS v')).rows[0].v as string;
      const major = Number(String(ext.installed).split('.')[0]);
      const proj = /PROJ="([^"]+)"/.exec(full)?.[1];
      checks.push(major >= 3
        ? { name: 'postgis', status: 'ok', detail: `PostGIS ${ext.installed}${proj ? `, PROJ ${proj}` : ''}` }
        : { name: 'postgis', status: 'fail', detail: `PostGIS ${ext.installed}`, fix: 'install PostGIS 3 (Debian: postgresql-15-postgis-3) and ALTER EXTENSION postgis UPDATE' });
    } else if (ext.available) {
      checks.push({ name: 'postgis', status: 'fail', detail: `PostGIS ${ext.available} is available but not installed in this database`, fix: 'run `agro migrate`' });
    } else {
      checks.push({ name: 'postgis', status: 'fail', detail: 'PostGIS is not installed on the server', fix: 'install postgresql-15-postgis-3 (apt-get), then `agro migrate`' });
    }
    const table = (await client.query(`SELECT to_regclass('agro_meta.migrations') IS NOT NULL AS ok`)).rows[0].ok;
    const done = new Set(table ? (await client.query('SELECT id FROM agro_meta.migrations')).rows.map((r) => r.id as number) : []);
    const pending = listMigrations().filter((m) => !done.has(m.id)).map((m) => `${String(m.id).padStart(4, '0')}_${m.name}`);
    checks.push(pending.length
      ? { name: 'migrations', status: 'fail', detail: `${pending.length} pending: ${pending.slice(0, 5).join(', ')}${pending.length > 5 ? ', …' : ''}`, fix: 'run `agro migrate`' }
      : { name: 'migrations', status: 'ok', detail: `all ${done.size} applied` });
    // The operating checks read etl.*: on a database not migrated yet there is nothing to read.
    const ready = (await client.query(`SELECT to_regclass('etl.runs') IS NOT NULL AND to_regclass('etl.schedule_slots') IS NOT NULL AS ok`)).rows[0].ok;
    if (ready) checks.push(...(await checkOperations(client, schedule)));
    return checks;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The schedule file `agro schedule` would run: one that does not validate stops the scheduler at its start. */
function checkScheduleFile(cfg: Config): { check: Check; schedule: ScheduleConfig | null } {
  try {
    const schedule = loadSchedule(cfg.scheduleFile, PIPELINES.map((p) => p.name), cfg.scheduleFileExplicit);
    const what = schedule.origin === 'defaults' ? `no ${cfg.scheduleFile}: the default jobs` : schedule.origin;
    return { schedule, check: { name: 'schedule file', status: 'ok', detail: `${what} (${schedule.jobs.length} jobs)` } };
  } catch (e) {
    if (!(e instanceof AgroError)) throw e;
    return { schedule: null, check: { name: 'schedule file', status: 'fail', detail: e.message, fix: 'correct the file (`agro schedule --check` validates it); `agro schedule` does not start with it' } };
  }
}

/**
 * What an on-call engineer looks at after a bad night: runs whose process died (warn: the
 * next run of any pipeline cleans up after them), slots left `running` by a scheduler that
 * died (fail: until a scheduler starts again nothing runs the schedule), and the last slot
 * of each job (failed: fail, its data did not load; skipped or interrupted: warn).
 */
async function checkOperations(db: pg.ClientBase, schedule: ScheduleConfig | null): Promise<Check[]> {
  const checks: Check[] = [];
  const dead = await deadRuns(db);
  checks.push(dead.length
    ? {
        name: 'dead runs', status: 'warn', run_ids: dead.map((r) => r.run_id),
        detail: `${dead.length} left running by a process that died: ${dead.map((r) => `run ${r.run_id} ${r.pipeline}${r.uf ? ' ' + r.uf : ''}${r.stage ? ` (during ${r.stage})` : ''}`).join(', ')}`,
        fix: 'the next run of any pipeline (agro run, nightly, the scheduler) cleans up after them (their tables, their scope); `agro runs` shows them as dead',
      }
    : { name: 'dead runs', status: 'ok', detail: 'no run left running by a dead process' });
  const slot = (s: { schedule: string; slot: Date; status: string; owner: string; error: string | null }) => ({ job: s.schedule, slot: s.slot.toISOString(), status: s.status, owner: s.owner, error: s.error });
  const stuck = (await stuckSlots(db)).map(slot);
  checks.push(stuck.length
    ? {
        name: 'stuck slots', status: 'fail', slots: stuck,
        detail: `${stuck.length} left running by a scheduler that is gone: ${stuck.map((s) => `${s.job} ${s.slot.slice(0, 16).replace('T', ' ')} UTC (${s.owner})`).join(', ')}`,
        fix: 'start `agro schedule` again: it marks them interrupted and runs the latest once',
      }
    : { name: 'stuck slots', status: 'ok', detail: 'no slot left running by a dead scheduler' });
  const jobs = schedule ? new Set(schedule.jobs.map((j) => j.name)) : null;
  const last = [...(await lastSlots(db)).values()].filter((s) => !jobs || jobs.has(s.schedule));
  const bad = last.filter((s) => s.status === 'failed' || s.status === 'skipped' || s.status === 'interrupted').map(slot);
  checks.push(bad.length
    ? {
        name: 'last slots', status: bad.some((s) => s.status === 'failed') ? 'fail' : 'warn', slots: bad,
        detail: bad.map((s) => `${s.job} ${s.slot.slice(0, 16).replace('T', ' ')} UTC ${s.status}${s.error ? ` (${s.error})` : ''}`).join('; '),
        fix: bad.some((s) => s.status === 'failed')
          ? 'read the error (`agro runs` has each attempt), fix the cause, then `agro run <pipeline>` or wait for the next fire time'
          : 'nothing is lost if the next fire time runs; `agro schedule --check` shows when that is',
      }
    : { name: 'last slots', status: 'ok', detail: last.length ? `the last slot of ${last.length} jobs ran` : 'no scheduled slot yet' });
  return checks;
}

/**
 * Slots `running` whose job's advisory lock nobody holds: the scheduler that claimed them died
 * (claims.ts). A slot claimed in the last minute is left out: a live scheduler skipping it
 * (the previous one still running, a nightly holding the night) claims it and marks it skipped
 * in two statements, unlocked in between.
 */
async function stuckSlots(db: pg.ClientBase) {
  const r = await db.query(
    `SELECT s.schedule, s.slot, s.status, s.owner, s.error FROM etl.schedule_slots s
      WHERE s.status = 'running' AND s.claimed_at < now() - interval '1 minute'
        AND NOT ${advisoryHeld('$1', 'hashtext(s.schedule)::bigint & 4294967295')}
      ORDER BY s.slot, s.schedule`,
    [JOB_LOCK],
  );
  return r.rows as { schedule: string; slot: Date; status: string; owner: string; error: string | null }[];
}

/** DATABASE_READ_URL, when set: reachable, a standby, and a standby of DATABASE_URL's server (same system identifier). */
async function checkReadReplica(cfg: Config): Promise<Check[]> {
  if (!cfg.databaseReadUrl) return [];
  const ask = async (url: string) => {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    await c.connect();
    try {
      return (await c.query(`SELECT pg_is_in_recovery() AS standby, (SELECT system_identifier::text FROM pg_control_system()) AS system`)).rows[0] as { standby: boolean; system: string };
    } finally {
      await c.end().catch(() => {});
    }
  };
  let replica: { standby: boolean; system: string };
  try {
    replica = await ask(cfg.databaseReadUrl);
  } catch (e) {
    return [{ name: 'read replica', status: 'fail', detail: `DATABASE_READ_URL is unreachable: ${(e as Error).message}`, fix: 'start the replica, correct DATABASE_READ_URL, or unset it to read from the primary' }];
  }
  const primary = await ask(databaseUrl(cfg)).catch(() => null);
  if (primary && primary.system !== replica.system) {
    return [{ name: 'read replica', status: 'fail', detail: 'DATABASE_READ_URL is not a replica of the DATABASE_URL server (another system identifier)', fix: 'point DATABASE_READ_URL at a streaming replica of the primary' }];
  }
  return replica.standby
    ? [{ name: 'read replica', status: 'ok', detail: 'DATABASE_READ_URL is a streaming standby of the primary (/v1/health reports its lag)' }]
    : [{ name: 'read replica', status: 'warn', detail: 'DATABASE_READ_URL is not a standby (it answers as a primary): the API reads there, no lag can be measured', fix: 'point DATABASE_READ_URL at a streaming replica, or unset it' }];
}

const MIN_HMAC_KEY_LENGTH = 32;

/**
 * AGRO_HMAC_KEY keys documento_hmac and signs the API's cursors. Unset, the development key
 * published in the source does both: anyone can invert a documento_hmac (a CPF has 9 free
 * digits) and forge a cursor naming their own key, which pages any document lookup unbilled.
 */
function checkHmacKey(cfg: Config): Check {
  const fix = `set AGRO_HMAC_KEY to a random secret of at least ${MIN_HMAC_KEY_LENGTH} characters (openssl rand -base64 32) before the first load: documento_hmac of the snapshots loaded before a change does not match the new key (reload them)`;
  if (cfg.hmacKeySource === 'development') {
    return { name: 'hmac key', status: 'warn', detail: 'AGRO_HMAC_KEY is not set: documento_hmac and the API cursors use the published development key', fix };
  }
  return cfg.hmacKey.length < MIN_HMAC_KEY_LENGTH
    ? { name: 'hmac key', status: 'warn', detail: `AGRO_HMAC_KEY is shorter than ${MIN_HMAC_KEY_LENGTH} characters`, fix }
    : { name: 'hmac key', status: 'ok', detail: 'AGRO_HMAC_KEY is set' };
}

export async function runChecks(cfg: Config): Promise<Check[]> {
  const file = checkScheduleFile(cfg);
  return [checkNode(), ...(await checkGdal()), checkDisk(cfg), checkHmacKey(cfg), file.check, ...(await checkDatabase(cfg, file.schedule)), ...(await checkReadReplica(cfg))];
}

export async function cmdDoctor(env: Env): Promise<number> {
  const checks = await runChecks(env.cfg);
  const ok = !checks.some((c) => c.status === 'fail');
  const mark = { ok: '✓', warn: '!', fail: '✗' } as const;
  print(env, { ok, checks }, () =>
    checks.map((c) => `${mark[c.status]} ${c.name.padEnd(13)} ${c.detail}${c.fix ? `\n  → ${c.fix}` : ''}`).join('\n') + `\n${ok ? 'everything needed is in place' : 'something needs attention (see → above)'}`);
  return ok ? 0 : 1;
}
