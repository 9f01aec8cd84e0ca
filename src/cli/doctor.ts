// `agro doctor`: checks the installation and says what to do about each problem.
// Exit 1 when a check fails (warnings alone exit 0). Nothing is changed: no migration, no start.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Config } from '../config.ts';
import { databaseUrl } from '../db/cluster.ts';
import { listMigrations } from '../db/migrate.ts';
import { formatBytes } from '../progress.ts';
import { print, type Env } from './context.ts';

export type CheckStatus = 'ok' | 'warn' | 'fail';

export interface Check {
  name: string;
  status: CheckStatus;
  detail: string;
  /** What to do, when the status is not ok. */
  fix?: string;
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

async function checkDatabase(cfg: Config): Promise<Check[]> {
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
    return checks;
  } finally {
    await client.end().catch(() => {});
  }
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

export async function runChecks(cfg: Config): Promise<Check[]> {
  return [checkNode(), ...(await checkGdal()), checkDisk(cfg), ...(await checkDatabase(cfg)), ...(await checkReadReplica(cfg))];
}

export async function cmdDoctor(env: Env): Promise<number> {
  const checks = await runChecks(env.cfg);
  const ok = !checks.some((c) => c.status === 'fail');
  const mark = { ok: '✓', warn: '!', fail: '✗' } as const;
  print(env, { ok, checks }, () =>
    checks.map((c) => `${mark[c.status]} ${c.name.padEnd(12)} ${c.detail}${c.fix ? `\n  → ${c.fix}` : ''}`).join('\n') + `\n${ok ? 'everything needed is in place' : 'something needs attention (see → above)'}`);
  return ok ? 0 : 1;
}
