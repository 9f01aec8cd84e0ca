// SIGKILL audit, what a killed process leaves outside the database: the temporary folders
// a run makes in os.tmpdir() (the road-distance rows of the derive stage: one row per property
// near a road, the whole country's on a national load) must not stay there for ever. The next
// ordinary command removes those of processes that are gone.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findPipeline } from '../pipelines/registry.ts';
import { runPipeline } from '../src/etl/run.ts';
import { writeBigState } from './helpers/big-state.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
let work: string;
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'kill-leftovers-'));
});
afterAll(() => {
  fs.rmSync(work, { recursive: true, force: true });
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('SIGKILL while the derive stage measures road distances', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test("the killed process's temporary folder is removed by the next run, not left to grow", async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    expect((await runPipeline(deps, findPipeline('dnit-snv')!, { source: path.join(ROOT, 'fixtures/dnit-snv') })).status).toBe('published');
    const big = path.join(work, 'MT-big');
    await writeBigState(big, 30_000);
    // The child's own temporary folder (TMPDIR): only its files are in it.
    const tmp = fs.mkdtempSync(path.join(work, 'tmp-'));
    const env = { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent', TMPDIR: tmp };
    const child = spawn(process.execPath, [AGRO, 'run', 'sicar', '--uf', 'MT', '--source', big, '--json'], { env, stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
    const roadDirs = () => fs.readdirSync(tmp).filter((n) => n.includes('road'));
    const deadline = Date.now() + 240_000;
    while (!roadDirs().some((d) => fs.existsSync(path.join(tmp, d, 'rows.tsv'))) && Date.now() < deadline && child.exitCode === null) await sleep(20);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(roadDirs(), 'the derive stage was measuring road distances when killed').toHaveLength(1);

    // The next ordinary command (any pipeline) cleans up after the dead process.
    const next = spawnSync(process.execPath, [AGRO, 'run', 'funai-tis', '--source', path.join(ROOT, 'fixtures/funai-tis'), '--json'], { env, encoding: 'utf8', timeout: 180_000 });
    expect(next.status, next.stderr).toBe(0);
    // (tsx keeps its compile cache there: not the run's)
    expect(fs.readdirSync(tmp).filter((n) => !n.startsWith('tsx-')), 'nothing of the dead process left in the temporary folder').toEqual([]);
  }, 400_000);
});
