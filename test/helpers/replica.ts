// A private primary cluster and a streaming standby made from it (pg_basebackup -R), each on
// its own free port under a temporary folder; the shared test cluster is never touched. For
// the tests of reading from a replica (DATABASE_READ_URL).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.ts';
import { EmbeddedCluster, freePort } from '../../src/db/cluster.ts';

const BIN = '/usr/lib/postgresql/15/bin';
const ROOT = path.resolve(__dirname, '../..');

/** Runs a server binary, as the postgres user when we are root (the server refuses root). */
const asServer = (bin: string, args: string[]) =>
  process.getuid?.() === 0
    ? execFileSync('runuser', ['-u', 'postgres', '--', path.join(BIN, bin), ...args], { cwd: '/', stdio: 'pipe' })
    : execFileSync(path.join(BIN, bin), args, { stdio: 'pipe' });

export interface ReplicaPair {
  /** The temporary folder holding both clusters. */
  dir: string;
  /** Config of the primary (its data folder, its port; no DATABASE_URL). */
  cfg: Config;
  primary: EmbeddedCluster;
  standbyUrl: string;
  /** Stops the standby now (fast shutdown), as a replica that goes away. */
  stopStandby(): void;
  /** Stops both and removes the folder. */
  close(): Promise<void>;
}

/**
 * Starts a primary, runs `prepare` on it (migrations, data: what the standby starts with), then
 * makes and starts the standby; `standbySettings` are server settings of the standby
 * (`-c name=value` each).
 */
export async function startReplicaPair(o: { prefix: string; prepare?: (primary: EmbeddedCluster, cfg: Config) => Promise<void>; standbySettings?: string[] }): Promise<ReplicaPair> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), o.prefix));
  const env: NodeJS.ProcessEnv = { ...process.env, AGRO_DATA_DIR: dir, AGRO_DB_PORT: String(await freePort()) };
  delete env.DATABASE_URL;
  const cfg = loadConfig(env, ROOT);
  const primary = new EmbeddedCluster(cfg);
  await primary.start();
  await o.prepare?.(primary, cfg);

  const standbyDir = path.join(dir, 'standby');
  fs.mkdirSync(standbyDir, { mode: 0o700 });
  if (process.getuid?.() === 0) execFileSync('chown', ['postgres:postgres', standbyDir]);
  // -c fast: an immediate checkpoint (the default spread one waits on checkpoint_timeout's pace)
  asServer('pg_basebackup', ['-D', standbyDir, '-R', '-X', 'stream', '-c', 'fast', '-h', '127.0.0.1', '-p', String(primary.port), '-U', 'agro']);
  const port = await freePort();
  const settings = ['listen_addresses=127.0.0.1', ...(o.standbySettings ?? [])].map((s) => `-c ${s}`).join(' ');
  asServer('pg_ctl', ['-D', standbyDir, '-l', path.join(standbyDir, 'standby.log'), '-w', '-t', '120', '-o', `-p ${port} -k ${standbyDir} ${settings}`, 'start']);

  const stop = (mode: 'fast' | 'immediate') => {
    try {
      asServer('pg_ctl', ['-D', standbyDir, '-w', '-m', mode, 'stop']);
    } catch {
      /* not running */
    }
  };
  return {
    dir, cfg, primary,
    standbyUrl: `postgres://agro@127.0.0.1:${port}/agro`,
    stopStandby: () => stop('fast'),
    async close() {
      stop('immediate');
      await primary.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
