// `agro serve` as a real child process on a loopback port, for tests that need several
// server processes sharing one database.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin/agro.mjs');

export interface ServeProcess {
  base: string;
  stop(): Promise<number | null>;
}

/** Starts `agro serve --port 0` on the database; resolves with its URL once it listens. */
export function serveProcess(databaseUrl: string, dataDir: string, extraEnv: Record<string, string> = {}): Promise<ServeProcess> {
  const env = { ...process.env, DATABASE_URL: databaseUrl, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...extraEnv };
  const child: ChildProcess = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1', '--json'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const stop = () =>
    new Promise<number | null>((resolve) => {
      if (child.exitCode !== null) return resolve(child.exitCode);
      child.removeAllListeners('exit');
      child.on('exit', (code) => resolve(code));
      child.kill('SIGTERM');
    });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /\{"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
      if (m) resolve({ base: m[1], stop });
    });
    child.on('exit', (code) => reject(new Error(`agro serve exited ${code}: ${err.slice(-2000)}`)));
  });
}
