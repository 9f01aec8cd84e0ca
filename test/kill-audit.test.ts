// SIGKILL audit (no handler runs), what ops-recovery and engine-failures do not cover already:
// - the temporary folders a run makes in os.tmpdir() (the road-distance rows of the derive
//   stage: one row per property near a road, the whole country's on a national load) must not
//   stay there for ever: the next ordinary command removes those of processes that are gone;
// - a backfill killed after its publish committed, before it marked its snapshot kept: the
//   cleanup keeps it, or the next nightly's retention drops the past date it loaded;
// - what the API says of a killed run before any cleanup: `dead`, as `agro runs` says, not
//   `running` for as long as no other run comes (/metrics too);
// - the partial download a killed run leaves in the raw store: resumed by a run that asks for
//   the same file, removed by one that fetched another (the next month, a new name).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findPipeline } from '../pipelines/registry.ts';
import { runPipeline } from '../src/etl/run.ts';
import { writeBigState } from './helpers/big-state.ts';
import { call, eventually, newKey, startApi } from './helpers/api.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';
import { slowFileServer } from './helpers/slow-server.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
let work: string;
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'kill-audit-'));
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

describe('SIGKILL of a backfill after its publish committed', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test("the cleanup keeps the snapshot out of retention, as the backfill would have: the next nightly does not drop the past date", async () => {
    const env = { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent', AGRO_RETENTION: '1' };
    const csv = fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8');
    let n = 0;
    /** The fixture with n blank lines more: other bytes each time. */
    const file = () => {
      const f = path.join(work, `termo_embargo_${++n}.csv`);
      fs.writeFileSync(f, csv + '\n'.repeat(n));
      return f;
    };
    const snapshot = async (runId: number) => (await db.pool.query(`SELECT snapshot_id::int, status, kept FROM etl.snapshots WHERE run_id = $1`, [runId])).rows[0];
    // The window is a few statements long (retention, the run's last update, the keep): tried until a kill lands in it.
    let hit: { runId: number; snapshot_id: number } | null = null;
    for (let attempt = 0; attempt < 8 && !hit; attempt++) {
      const child = spawn(process.execPath, [AGRO, 'backfill', 'ibama-embargos', '--source', file(), '--as-of', '2026-10-29', '--json'], { env, stdio: 'ignore' });
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
      let s: { snapshot_id: number; status: string; kept: boolean } | undefined;
      let runId = 0;
      while (child.exitCode === null) {
        runId = (await db.pool.query(`SELECT coalesce(max(run_id), 0)::int AS id FROM etl.runs`)).rows[0].id;
        s = await snapshot(runId);
        if (s && ['published', 'loaded'].includes(s.status)) break;
      }
      child.kill('SIGKILL');
      const sig = await exited;
      s = await snapshot(runId);
      if (sig === 'SIGKILL' && s && ['published', 'loaded'].includes(s.status) && !s.kept) hit = { runId, snapshot_id: s.snapshot_id };
      await eventually(async () => expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`, [`agro ${child.pid}@%`])).rows[0].n).toBe(0), 10_000);
    }
    expect(hit, 'a kill between the publish and the keep').not.toBeNull();

    // The next ordinary commands: nightlies of later dates, retention 1 (the first keeps what a rollback returns to).
    for (const asOf of ['2026-11-10', '2026-11-11']) {
      const nightly = spawnSync(process.execPath, [AGRO, 'run', 'ibama-embargos', '--source', file(), '--as-of', asOf, '--json'], { env, encoding: 'utf8', timeout: 120_000 });
      expect(JSON.parse(nightly.stdout)).toMatchObject({ status: 'published' });
    }
    // The past date is still there, kept, readable as of its date.
    expect(await snapshot(hit!.runId)).toEqual({ snapshot_id: hit!.snapshot_id, status: expect.stringMatching(/^(superseded|loaded)$/), kept: true });
    // `agro runs` says what happened.
    const run = (await db.pool.query(`SELECT status, error FROM etl.runs WHERE run_id = $1`, [hit!.runId])).rows[0];
    expect(run).toEqual({ status: expect.stringMatching(/^(published|loaded)$/), error: expect.stringMatching(/the process died after snapshot \d+ was (published|loaded); it is kept out of retention/) });
  }, 300_000);
});

describe('SIGKILL during a download, before any cleanup', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test("GET /v1/sources, serving.source_runs and /metrics say the last run is dead, not running", async () => {
    const zip = path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip');
    expect((await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('ibge-municipios')!, { source: zip })).status).toBe('published');
    const server = await slowFileServer(zip, 'BR_Municipios_2024.zip');
    const api = await startApi(db.cfg, db.url, db);
    try {
      const child = spawn(process.execPath, [AGRO, 'run', 'ibge-municipios', '--source', server.url, '--json'], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' }, stdio: 'ignore',
      });
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
      await server.started;
      const lastRun = async () => {
        const r = await call(api.base, '/v1/sources', { key: await newKey(db) });
        return r.body.sources.find((x: { dataset: string }) => x.dataset === 'ibge-municipios').last_run;
      };
      const view = async () => (await db.pool.query(`SELECT last_status FROM serving.source_runs WHERE dataset = 'ibge-municipios'`)).rows[0].last_status;
      /** agro_etl_runs{pipeline="ibge-municipios",status} in the scraped text (0 when absent). */
      const metric = async (status: string) => {
        const r = await call(api.base, '/metrics');
        const m = new RegExp(`^agro_etl_runs\\{pipeline="ibge-municipios",status="${status}"\\} (\\d+)$`, 'm').exec(r.text);
        return m ? Number(m[1]) : 0;
      };
      expect((await lastRun()).status, 'while it downloads').toBe('running');
      expect(await view()).toBe('running');
      expect(await metric('running')).toBe(1);
      expect(await metric('dead')).toBe(0);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      // (its lock goes when the server notices the killed client's socket closed)
      await eventually(async () => expect(await view()).toBe('dead'), 10_000);
      expect(await lastRun()).toMatchObject({ run_id: 2, status: 'dead', finished_at: null });
      expect(await metric('dead')).toBe(1);
      expect(await metric('running')).toBe(0);
    } finally {
      server.release();
      await api.close();
      await server.close();
    }
  }, 120_000);
});

describe('SIGKILL during a download: the partial it leaves in the raw store', () => {
  let db: TestDb;
  usesTestDatabase((d) => (db = d));

  test('a run that fetches the same file resumes it; one that fetches another file removes it and says so in its log', async () => {
    const zip = path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip');
    const body = fs.readFileSync(zip);
    const half = Math.floor(body.length / 2);
    // A GET gets the first half and then nothing (the test kills the client); a Range request the rest at once.
    const ranges: (string | undefined)[] = [];
    const server = http.createServer((req, res) => {
      ranges.push(req.headers.range);
      const from = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      if (from) {
        const start = Number(from[1]);
        res.writeHead(206, { 'content-type': 'application/zip', 'content-length': String(body.length - start), 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
        res.end(body.subarray(start));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': String(body.length) });
      res.write(body.subarray(0, half));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/BR_Municipios_2024.zip`;
    const raw = path.join(db.dataDir, 'raw', 'ibge-municipios');
    const part = path.join(raw, 'BR_Municipios_2024.zip.part');
    const env = { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info', LOG_FORMAT: 'json' };
    /** A run killed halfway through BR_Municipios_2024.zip, its sessions gone. */
    const killedDownload = async () => {
      const child = spawn(process.execPath, [AGRO, 'run', 'ibge-municipios', '--source', url, '--json'], { env, stdio: 'ignore' });
      const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
      await eventually(async () => expect(fs.statSync(part, { throwIfNoEntry: false })?.size).toBe(half), 60_000);
      child.kill('SIGKILL');
      expect(await exited).toBe('SIGKILL');
      await eventually(async () => expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE $1`, [`agro ${child.pid}@%`])).rows[0].n).toBe(0), 10_000);
      expect(fs.existsSync(`${part}.json`)).toBe(true);
    };
    try {
      // The same file asked for again: resumed where the killed run stopped, not removed first.
      await killedDownload();
      const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
      expect((await runPipeline(deps, findPipeline('ibge-municipios')!, { source: url })).status).toBe('published');
      expect(ranges).toEqual([undefined, `bytes=${half}-`]);
      expect(fs.existsSync(part)).toBe(false);

      // Killed again; the next run asks for another file (the next mesh year): the partial would stay for ever.
      await killedDownload();
      const other = path.join(raw, '..', 'funai-tis', 'tis.zip.part'); // another pipeline's: not this run's to judge
      fs.mkdirSync(path.dirname(other), { recursive: true });
      fs.writeFileSync(other, 'x');
      const next = path.join(work, 'BR_Municipios_2025.zip');
      fs.copyFileSync(zip, next);
      const r = spawnSync(process.execPath, [AGRO, 'run', 'ibge-municipios', '--source', next, '--json'], { env, encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(fs.readdirSync(raw).filter((n) => n.includes('.part')), 'no partial left').toEqual([]);
      const said = r.stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l)).find((l) => /partial downloads/.test(l.msg));
      expect(said, 'the run says what it removed').toMatchObject({ removed: ['BR_Municipios_2024.zip.part', 'BR_Municipios_2024.zip.part.json'] });
      expect(said.bytes).toBeGreaterThan(half);
      expect(fs.existsSync(other)).toBe(true);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }, 300_000);
});
