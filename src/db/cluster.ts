// The embedded PostgreSQL 15 + PostGIS 3 cluster under <dataDir>/pg.
// PostgreSQL refuses to run as root, so as root the server runs as the `postgres`
// system user (created by the Debian package) and the cluster folder is handed to it.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Config } from '../config.ts';
import { AgroError } from '../errors.ts';

const run = promisify(execFile);
const PG_MAJOR = '15';
const APT_PACKAGES = [`postgresql-${PG_MAJOR}`, `postgresql-${PG_MAJOR}-postgis-3`, `postgresql-${PG_MAJOR}-postgis-3-scripts`];
const DB_NAME = 'agro';
const DB_USER = 'agro';

export interface ClusterStatus {
  running: boolean;
  dataDir: string;
  url: string;
  port: number;
  pid?: number;
  /** Set when start() had to move to another port (the configured one was taken). */
  note?: string;
}

/** One word for /bin/sh: pg_ctl runs postgres with its -o options through a shell (a checkout path may hold a space). */
const shWord = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

const isRoot = () => typeof process.getuid === 'function' && process.getuid() === 0;

function binDir(): string | null {
  const dir = `/usr/lib/postgresql/${PG_MAJOR}/bin`;
  return fs.existsSync(path.join(dir, 'initdb')) ? dir : null;
}

function postgisInstalled(): boolean {
  return fs.existsSync(`/usr/share/postgresql/${PG_MAJOR}/extension/postgis.control`);
}

/** Installs PostgreSQL + PostGIS from Debian's packages when they are missing and we are root. */
export async function ensureServerPackages(log: (m: string) => void = () => {}): Promise<string> {
  if (binDir() && postgisInstalled()) return binDir()!;
  if (!isRoot()) {
    throw new AgroError('cluster', `PostgreSQL ${PG_MAJOR} with PostGIS 3 is not installed; run as root or install ${APT_PACKAGES.join(' ')}`);
  }
  log(`installing ${APT_PACKAGES.join(' ')} with apt-get`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update', '-qq'], ['install', '-y', '-qq', ...APT_PACKAGES]]) {
    const r = spawnSync('apt-get', args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) throw new AgroError('cluster', `apt-get ${args[0]} failed with exit code ${r.status}`);
  }
  const dir = binDir();
  if (!dir || !postgisInstalled()) throw new AgroError('cluster', 'PostgreSQL/PostGIS still missing after apt-get');
  return dir;
}

/** Whether something already listens on 127.0.0.1:port. */
export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'EADDRINUSE' || e.code === 'EACCES'));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(false)));
  });
}

/** A port the system says is free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen({ port: 0, host: '127.0.0.1' }, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * The cluster's port: AGRO_DB_PORT when set; otherwise the one remembered in
 * <dataDir>/pg/port (written when the default was taken); otherwise the default.
 */
export class EmbeddedCluster {
  readonly dir: string;
  port: number;
  private readonly explicitPort: boolean;
  constructor(cfg: Config) {
    this.dir = path.join(cfg.dataDir, 'pg');
    this.explicitPort = cfg.embeddedPortExplicit;
    this.port = cfg.embeddedPort;
    if (!this.explicitPort) {
      const remembered = Number(fs.existsSync(this.portFile) ? fs.readFileSync(this.portFile, 'utf8').trim() : NaN);
      if (Number.isInteger(remembered) && remembered > 0 && remembered < 65536) this.port = remembered;
    }
  }

  get portFile() {
    return path.join(this.dir, 'port');
  }

  get pgdata() {
    return path.join(this.dir, 'data');
  }
  get socketDir() {
    return path.join(this.dir, 'run');
  }
  /**
   * The Unix socket's folder, or '' (TCP only: agro connects over 127.0.0.1) when the socket's
   * path would pass the 107 bytes a socket address holds: in a deep checkout the server
   * refused to start ("could not create any Unix-domain sockets").
   */
  socketDirFor(port: number): string {
    return Buffer.byteLength(path.join(this.socketDir, `.s.PGSQL.${port}`)) > 107 ? '' : this.socketDir;
  }
  get logFile() {
    return path.join(this.dir, 'server.log');
  }
  get url(): string {
    return `postgres://${DB_USER}@127.0.0.1:${this.port}/${DB_NAME}`;
  }

  /** Runs a server binary, as the postgres user when we are root. */
  private async exec(bin: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
    const dir = binDir();
    if (!dir) throw new AgroError('cluster', 'PostgreSQL binaries not found');
    const full = path.join(dir, bin);
    try {
      if (isRoot()) return await run('runuser', ['-u', 'postgres', '--', full, ...args], { cwd: '/' });
      return await run(full, args);
    } catch (e) {
      const err = e as { stderr?: string; message: string };
      throw new AgroError('cluster', `${bin} failed: ${(err.stderr || err.message).trim()}`);
    }
  }

  async status(): Promise<ClusterStatus> {
    const pidFile = path.join(this.pgdata, 'postmaster.pid');
    let pid: number | undefined;
    if (fs.existsSync(pidFile)) {
      pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
      try {
        process.kill(pid, 0);
      } catch {
        pid = undefined;
      }
    }
    return { running: pid !== undefined, dataDir: this.pgdata, url: this.url, port: this.port, pid };
  }

  /**
   * Before starting: a port another program holds (a second checkout's cluster) is an error
   * when AGRO_DB_PORT named it, otherwise a reason to pick a free one and remember it.
   */
  private async choosePort(log: (m: string) => void): Promise<string | undefined> {
    if (!(await portInUse(this.port))) return undefined;
    if (this.explicitPort) {
      throw new AgroError(
        'port_in_use',
        `127.0.0.1:${this.port} (AGRO_DB_PORT) is used by another program, perhaps the cluster of another checkout; set AGRO_DB_PORT to a free port, or unset it to let agro choose one`,
      );
    }
    const taken = this.port;
    this.port = await freePort();
    fs.mkdirSync(this.dir, { recursive: true });
    fs.writeFileSync(this.portFile, `${this.port}\n`);
    const note = `port ${taken} is used by another program (another checkout's cluster?); this cluster uses port ${this.port}, remembered in ${this.portFile} (AGRO_DB_PORT overrides it)`;
    log(note);
    return note;
  }

  async start(log: (m: string) => void = () => {}): Promise<ClusterStatus> {
    await ensureServerPackages(log);
    fs.mkdirSync(this.socketDir, { recursive: true });
    if (isRoot()) {
      spawnSync('chown', ['-R', 'postgres:postgres', this.dir]);
      // The server user must be able to walk down to the cluster folder.
      for (let d = path.dirname(this.dir); d !== path.dirname(d); d = path.dirname(d)) {
        const mode = fs.statSync(d).mode;
        if ((mode & 0o001) === 0) fs.chmodSync(d, mode | 0o001);
      }
    }
    if (!fs.existsSync(path.join(this.pgdata, 'PG_VERSION'))) {
      log(`initialising cluster in ${this.pgdata}`);
      await this.exec('initdb', ['-D', this.pgdata, '-U', DB_USER, '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
      fs.appendFileSync(path.join(this.pgdata, 'postgresql.conf'), TUNING);
    }
    const st = await this.status();
    let note: string | undefined;
    if (!st.running) {
      note = await this.choosePort(log);
      log(`starting PostgreSQL on 127.0.0.1:${this.port}`);
      try {
        await this.exec('pg_ctl', ['-D', this.pgdata, '-l', this.logFile, '-w', '-t', '120', '-o', `-p ${this.port} -k ${shWord(this.socketDirFor(this.port))} -c listen_addresses=127.0.0.1`, 'start']);
      } catch (e) {
        throw new AgroError('cluster', `${(e as Error).message}\n${this.logTail()}`);
      }
    }
    await this.ensureDatabase();
    return { ...(await this.status()), ...(note ? { note } : {}) };
  }

  /** The server log's last lines: what pg_ctl's "Examine the log output" refers to. */
  private logTail(lines = 8): string {
    try {
      return fs.readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-lines).join('\n');
    } catch {
      return `(no server log at ${this.logFile})`;
    }
  }

  async stop(): Promise<ClusterStatus> {
    if ((await this.status()).running) await this.exec('pg_ctl', ['-D', this.pgdata, '-w', '-m', 'fast', 'stop']);
    return this.status();
  }

  private async ensureDatabase() {
    const client = new pg.Client({ connectionString: `postgres://${DB_USER}@127.0.0.1:${this.port}/postgres` });
    client.on('error', () => {}); // the query in flight rejects; the event must not crash the process
    await client.connect();
    try {
      const r = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [DB_NAME]);
      if (r.rowCount === 0) {
        try {
          await client.query(`CREATE DATABASE ${DB_NAME}`);
        } catch (e) {
          if ((e as { code?: string }).code !== '42P04') throw e; // created meanwhile by another process
        }
      }
    } finally {
      await client.end();
    }
  }
}

// Settings for a loader's cluster on a 2-core, 24 GB machine: bulk loads, big sorts for index builds.
const TUNING = `
# agro embedded cluster
shared_buffers = 1GB
maintenance_work_mem = 1GB
work_mem = 64MB
max_wal_size = 8GB
checkpoint_timeout = 15min
wal_compression = on
max_parallel_workers_per_gather = 2
max_parallel_maintenance_workers = 2
max_connections = 200
synchronous_commit = off
jit = off
`;

/** The URL every command uses: DATABASE_URL when set, otherwise the embedded cluster. */
export function databaseUrl(cfg: Config): string {
  return cfg.databaseUrl ?? new EmbeddedCluster(cfg).url;
}
