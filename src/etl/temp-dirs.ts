// Folders a process makes in os.tmpdir() are named after it (agro-<what>-<host>-<pid>-XXXXXX):
// a process killed with SIGKILL runs no `finally`, and what it wrote there (the road-distance
// rows of a national derive: hundreds of MB) would stay for ever. Every run removes first the
// folders of this machine's processes that are gone (cleanupDeadRuns). The host tag keeps a
// machine from taking the folders of another one that shares the same /tmp. A read that shows GDAL
// a shapefile's parts under other names makes its folder beside the source, named the same way
// with a dot (.agro-parts-…): whoever next needs one there sweeps the dead ones first.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const HOST = crypto.createHash('sha1').update(os.hostname()).digest('hex').slice(0, 8);
const OWNED = /^\.?agro-[a-z]+-([0-9a-f]{8})-(\d+)-[A-Za-z0-9]{6}$/;

/** The name of a folder of process `pid` before mkdtemp's six characters. */
export const tempDirPrefix = (what: string, pid = process.pid): string => `agro-${what}-${HOST}-${pid}-`;

/** A new folder of this process in os.tmpdir(); the caller removes it when done. */
export function agroTempDir(what: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), tempDirPrefix(what)));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // another user's process: alive
  }
}

/** Removes the temporary folders (in `parent`) of this machine's processes that are gone; their names. */
export function sweepDeadTempDirs(parent = os.tmpdir()): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(parent);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const m = OWNED.exec(name);
    if (!m || m[1] !== HOST || alive(Number(m[2]))) continue;
    try {
      fs.rmSync(path.join(parent, name), { recursive: true, force: true });
      removed.push(name);
    } catch {
      // another user's folder (sticky /tmp): theirs to sweep; a run does not fail over it
    }
  }
  return removed;
}
