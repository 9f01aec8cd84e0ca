// Bad input loses nothing: broken downloads, corrupt archives, drifted schemas, a
// source with half the rows, a killed process. The last good snapshot keeps serving
// and the next run recovers. Also rollback, retention, backfill and HTTP sources.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SICAR_FIXTURES, buildSicarState, carNumber } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { rollback } from '../src/etl/publish.ts';
import { runPipeline } from '../src/etl/run.ts';
import { writeBigState } from './helpers/big-state.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;
let goDir: string;

const run = (uf: string, source: string, extra = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf, source, ...extra });
const currentId = async (uf: string) =>
  (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = $1`, [uf])).rows[0]?.snapshot_id ?? null;
const servedCount = async (uf: string) => (await db.pool.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE uf = $1`, [uf])).rows[0].n as number;

/** A folder holding the GO fixture with AREA_IMOVEL replaced by `bytes`. */
function goWithMain(name: string, bytes: Buffer): string {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  for (const f of fs.readdirSync(goDir)) fs.copyFileSync(path.join(goDir, f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, 'GO_AREA_IMOVEL.zip'), bytes);
  return dir;
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'engine-fail-'));
  goDir = path.join(work, 'GO');
  await buildSicarState('GO', goDir);
  const o = await run('GO', goDir);
  expect(o.status).toBe('published');
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('broken sources fail clearly and keep the current snapshot', () => {
  const expectFailure = async (dir: string, code: string) => {
    const before = await currentId('GO');
    const count = await servedCount('GO');
    const o = await run('GO', dir);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe(code);
    expect(await currentId('GO')).toBe(before);
    expect(await servedCount('GO')).toBe(count);
    // nothing left behind
    const staged = await db.pool.query(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'stage'`);
    expect(staged.rows[0].n).toBe(0);
    const run_ = await db.pool.query(`SELECT status, error_code FROM etl.runs WHERE run_id = $1`, [o.run_id]);
    expect(run_.rows[0]).toEqual({ status: 'failed', error_code: code });
    return o;
  };

  test('an HTML error page saved as the zip', async () => {
    const html = Buffer.from('<!DOCTYPE html><html><head><title>Erro</title></head><body>Serviço indisponível</body></html>');
    await expectFailure(goWithMain('html', html), 'html_instead_of_archive');
  });

  test('a truncated zip', async () => {
    const full = fs.readFileSync(path.join(goDir, 'GO_AREA_IMOVEL.zip'));
    await expectFailure(goWithMain('truncated', full.subarray(0, Math.floor(full.length * 0.6))), 'corrupt_archive');
  });

  test('a zip without the .dbf', async () => {
    const dir = path.join(work, 'nodbf');
    await buildSicarState('GO', dir, { omitMembers: ['GO_AREA_IMOVEL_2.dbf'] });
    const o = await expectFailure(dir, 'missing_layer_part');
    expect(o.error?.message).toMatch(/GO_AREA_IMOVEL_2\.shp has no \.dbf/);
  });

  test('a layer without the required cod_imovel is blocked before loading anything, with or without --force', async () => {
    const dir = path.join(work, 'nokey');
    await buildSicarState('GO', dir, { dropFields: ['cod_imovel'] });
    const before = await currentId('GO');
    const count = await servedCount('GO');
    for (const force of [false, true]) {
      const o = await run('GO', dir, { force });
      // contract §2: required fields missing is a gate refusal; --force cannot override it (nothing was loaded)
      expect(o).toMatchObject({ status: 'blocked', forced: false, rows_loaded: 0, error: { code: 'required_field_missing' }, gate: { passed: false, forced: false } });
      expect(o.gate?.failures).toMatchObject([{ rule: 'required_field_missing', forceable: false, fields: ['car'], looked_for: { car: ['cod_imovel'] } }]);
      if (force) expect(o.message).toMatch(/--force cannot override this rule/);
      expect(await currentId('GO')).toBe(before);
      expect(await servedCount('GO')).toBe(count);
      const staged = await db.pool.query(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'stage'`);
      expect(staged.rows[0].n).toBe(0);
      const ledger = await db.pool.query(`SELECT status, error_code FROM etl.runs WHERE run_id = $1`, [o.run_id]);
      expect(ledger.rows[0]).toEqual({ status: 'blocked', error_code: 'required_field_missing' });
      const snap = await db.pool.query(`SELECT status, quality->'gate'->'failures'->0->>'rule' AS rule FROM etl.snapshots WHERE snapshot_id = $1`, [o.snapshot_id]);
      expect(snap.rows[0]).toEqual({ status: 'blocked', rule: 'required_field_missing' });
      const left = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'snap' AND tablename LIKE $1`, [`%\\_\\_s${o.snapshot_id}`]);
      expect(left.rows[0].n).toBe(0);
    }
  });

  test('a missing AREA_IMOVEL zip', async () => {
    const dir = path.join(work, 'nomain');
    await buildSicarState('GO', dir, { omitAreaImovel: true });
    await expectFailure(dir, 'source_not_found');
  });
});

describe('quality gate, force, rollback, retention, backfill', () => {
  test('half the rows is blocked; --force publishes and records it', async () => {
    const before = await currentId('GO');
    const dir = path.join(work, 'half');
    await buildSicarState('GO', dir, { dropEveryOther: true });
    const blocked = await run('GO', dir);
    expect(blocked.status).toBe('blocked');
    expect(blocked.gate?.failures.map((f) => f.rule)).toEqual(['row_drop']);
    expect(await currentId('GO')).toBe(before);
    const snap = await db.pool.query(`SELECT status FROM etl.snapshots WHERE snapshot_id = $1`, [blocked.snapshot_id]);
    expect(snap.rows[0].status).toBe('blocked');

    const forced = await run('GO', dir, { force: true });
    expect(forced.status).toBe('published');
    expect(forced.forced).toBe(true);
    expect(await currentId('GO')).toBe(forced.snapshot_id);
    const rec = await db.pool.query(`SELECT forced, quality->'gate'->>'forced' AS gate_forced FROM etl.snapshots WHERE snapshot_id = $1`, [forced.snapshot_id]);
    expect(rec.rows[0]).toEqual({ forced: true, gate_forced: 'true' });
  });

  test('rollback makes the previous snapshot current again, atomically', async () => {
    const cur = await currentId('GO');
    const r = await rollback(db.pool, sicar, 'GO');
    expect(r.from).toBe(cur);
    expect(await currentId('GO')).toBe(r.to);
    expect(await servedCount('GO')).toBe(SICAR_FIXTURES.GO.areaImovel.length - 2);
    const st = await db.pool.query(`SELECT snapshot_id, status FROM serving.snapshots WHERE snapshot_id = ANY($1) ORDER BY snapshot_id`, [[r.from, r.to]]);
    expect(st.rows).toEqual([
      { snapshot_id: r.to, status: 'current' },
      { snapshot_id: r.from, status: 'rolled_back' },
    ]);
  });

  test('retention keeps 3 snapshots with tables per state and drops the rest', async () => {
    for (let i = 0; i < 3; i++) {
      const dir = path.join(work, `ret${i}`);
      const skip = SICAR_FIXTURES.GO.areaImovel.filter((r) => r.role === 'plain')[i % 2];
      await buildSicarState('GO', dir, { filter: (r) => r !== skip, mtime: new Date(2024, 1, i + 1) });
      expect((await run('GO', dir, { asOf: `2025-0${i + 1}-01` })).status).toBe('published');
    }
    // Good snapshots count against retention; the latest blocked one is kept by its own rule (issue 6 B.1).
    const kept = await db.pool.query(`SELECT snapshot_id, tables FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'GO' AND status NOT IN ('dropped', 'failed', 'blocked')`);
    expect(kept.rowCount).toBe(3);
    const blocked = await db.pool.query(`SELECT tables FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'GO' AND status = 'blocked'`);
    expect(blocked.rowCount).toBe(1);
    for (const t of blocked.rows[0].tables) expect((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r).not.toBeNull();
    const dropped = await db.pool.query(`SELECT tables FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'GO' AND status = 'dropped'`);
    expect(dropped.rowCount).toBeGreaterThan(0);
    for (const d of dropped.rows) {
      for (const t of d.tables) expect((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r).toBeNull();
    }
  });

  test('a backfill older than the current snapshot is loaded but does not become current', async () => {
    const cur = await currentId('GO');
    const dir = path.join(work, 'old');
    await buildSicarState('GO', dir, { mtime: new Date(2023, 0, 1), filter: (r) => r.role !== 'hole' });
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: dir, asOf: '2020-01-01', backfill: true });
    // Contract §1: a backfill kept but not made current is `loaded` (was `published` / `superseded`).
    expect(o.status).toBe('loaded');
    expect(o.message).toMatch(/not made current/);
    expect(await currentId('GO')).toBe(cur);
    const s = await db.pool.query(`SELECT status, as_of::text FROM etl.snapshots WHERE snapshot_id = $1`, [o.snapshot_id]);
    expect(s.rows[0]).toEqual({ status: 'loaded', as_of: '2020-01-01' });
    const run_ = await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [o.run_id]);
    expect(run_.rows[0].status).toBe('loaded');
    const served = await db.pool.query(`SELECT status FROM serving.snapshots WHERE snapshot_id = $1`, [o.snapshot_id]);
    expect(served.rows[0].status).toBe('loaded');
  });
});

describe('HTTP source', () => {
  test('downloads the state zips from a URL prefix; absent optional themes are skipped', async () => {
    const dir = path.join(work, 'http-MT');
    await buildSicarState('MT', dir);
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      const f = path.join(dir, decodeURIComponent(path.basename(req.url ?? '')));
      if (!fs.existsSync(f)) {
        res.writeHead(404, { 'content-type': 'text/html' }).end('<html>not found</html>');
        return;
      }
      const body = fs.readFileSync(f);
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': body.length, etag: `"${body.length}"` }).end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const o = await run('MT', `http://127.0.0.1:${port}/sicar/`);
      expect(o.status).toBe('published');
      expect(o.rows_loaded).toBe(SICAR_FIXTURES.MT.areaImovel.length);
      expect(hits).toContain('GET /sicar/MT_AREA_IMOVEL.zip');
      expect(hits).toContain('GET /sicar/MT_RESERVA_LEGAL.zip');
      const again = await run('MT', `http://127.0.0.1:${port}/sicar/`);
      expect(again.status).toBe('unchanged');
    } finally {
      server.close();
    }
  });
});

describe('a killed run', () => {
  test('SIGKILL mid-COPY: readers keep the current snapshot without errors; the next run cleans up and publishes', async () => {
    const small = path.join(work, 'MT-small');
    await buildSicarState('MT', small, { themes: [] });
    const first = await run('MT', small);
    expect(['published', 'unchanged']).toContain(first.status);
    const served = await servedCount('MT');

    const big = path.join(work, 'MT-big');
    await writeBigState(big, 30_000);
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'run', 'sicar', '--uf', 'MT', '--source', big, '--json'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'silent' },
      stdio: 'ignore',
    });
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));

    // Readers run all along: every answer is the current snapshot, none is an error.
    let reading = true;
    const answers: number[] = [];
    const reader = (async () => {
      while (reading) answers.push(await servedCount('MT'));
    })();

    const dbName = new URL(db.url).pathname.slice(1);
    const deadline = Date.now() + 60_000;
    let copying = false;
    while (!copying && Date.now() < deadline) {
      const p = await db.pool.query(`SELECT tuples_processed FROM pg_stat_progress_copy c JOIN pg_database d ON d.oid = c.datid WHERE d.datname = $1`, [dbName]);
      copying = p.rows.some((r) => Number(r.tuples_processed) > 1000);
      if (!copying) await new Promise((r) => setTimeout(r, 50));
    }
    expect(copying).toBe(true);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    reading = false;
    await reader;
    expect(answers.length).toBeGreaterThan(0);
    expect(new Set(answers)).toEqual(new Set([served]));

    const dead = await db.pool.query(`SELECT run_id FROM etl.runs WHERE pipeline = 'sicar' AND scope = 'MT' AND status = 'running'`);
    expect(dead.rowCount).toBe(1);
    const deadRun = dead.rows[0].run_id;
    expect((await db.pool.query(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE $1`, [`r${deadRun}\\_%`])).rows[0].n).toBeGreaterThan(0);

    const stagesRunning = `SELECT stage FROM etl.run_stages WHERE run_id = $1 AND status = 'running'`;
    expect((await db.pool.query(stagesRunning, [deadRun])).rowCount).toBeGreaterThan(0);

    // The next run cleans up after the dead one and publishes.
    const next = await run('MT', big);
    expect(next.status).toBe('published');
    expect(next.rows_loaded).toBe(30_000);
    const after = await db.pool.query(`SELECT status, error FROM etl.runs WHERE run_id = $1`, [deadRun]);
    expect(after.rows[0].status).toBe('killed');
    // Its stage rows do not stay `running` (issue 6 C.8).
    expect((await db.pool.query(stagesRunning, [deadRun])).rowCount).toBe(0);
    const failedStages = await db.pool.query(`SELECT detail->>'error' AS error FROM etl.run_stages WHERE run_id = $1 AND status = 'failed'`, [deadRun]);
    expect(failedStages.rows.map((r) => r.error)).toContainEqual(expect.stringMatching(/killed/));
    expect((await db.pool.query(`SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
    const orphan = await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE run_id = $1`, [deadRun]);
    expect(orphan.rowCount, 'the dead run registered its snapshot before reading').toBe(1);
    for (const s of orphan.rows) {
      expect(s.status).toBe('failed');
      for (const t of s.tables) expect((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r).toBeNull();
    }
    expect(await servedCount("MT")).toBe(30_000);
  }, 240_000);
});
