// The snapshot lifecycle under the operations that broke it (issue 6 B and C.1–C.3):
// blocked runs then --force then rollback, publishing an older id then rolling back,
// retention by date with an old backfill, a rollback during a run, publishing a blocked
// snapshot, and a CSV header line that carries a CPF.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TITULARES_ROWS, titularesCsv } from '../fixtures/car-titulares.ts';
import { buildSicarState, type BuildSicarOptions, type SicarUf } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import * as catalog from '../src/etl/catalog.ts';
import { publishSnapshot, rollback, rollbackTarget } from '../src/etl/publish.ts';
import { runPipeline, type Deps } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;

let variant = 0;
/** A state's zips with distinct bytes each call (the zip entry time differs). */
async function source(uf: SicarUf, opts: BuildSicarOptions = {}): Promise<string> {
  const dir = path.join(work, `${uf}-${++variant}`);
  await buildSicarState(uf, dir, { mtime: new Date(2024, 2, 1, 0, variant), ...opts });
  return dir;
}
const run = (uf: string, dir: string, extra: object = {}, hooks?: Deps['hooks']) =>
  runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log, hooks }, sicar, { uf, source: dir, ...extra });
const currentId = async (uf: string) =>
  (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = $1`, [uf])).rows[0]?.snapshot_id ?? null;
const statusOf = async (id: number) => (await db.pool.query(`SELECT status FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0].status as string;
const tablesExist = async (id: number) => {
  const snap = (await db.pool.query(`SELECT tables FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0];
  if (snap.tables.length === 0) return false;
  for (const t of snap.tables) if ((await db.pool.query(`SELECT to_regclass($1) AS r`, [t])).rows[0].r === null) return false;
  return true;
};

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'lifecycle-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('B.1 retention never drops what rollback returns to', () => {
  test('three blocked runs, one --force, then rollback returns to the last good snapshot', async () => {
    const good = await run('DF', await source('DF'), { asOf: '2025-01-01' });
    expect(good.status).toBe('published');
    const half = await source('DF', { dropEveryOther: true });
    const blocked: number[] = [];
    for (let i = 0; i < 3; i++) {
      const b = await run('DF', half, { asOf: '2025-02-01' });
      expect(b.status).toBe('blocked');
      blocked.push(b.snapshot_id!);
    }
    const forced = await run('DF', half, { asOf: '2025-02-01', force: true });
    expect(forced).toMatchObject({ status: 'published', forced: true });
    // Blocked snapshots do not count against the good ones: the good one keeps its tables.
    expect(await tablesExist(good.snapshot_id!)).toBe(true);
    // Blocked ones have their own rule: the latest stays (report, publish --force), older ones go.
    expect(await tablesExist(blocked[2])).toBe(true);
    expect(await statusOf(blocked[0])).toBe('dropped');
    expect(await statusOf(blocked[1])).toBe('dropped');
    expect((await db.pool.query(`SELECT quality IS NOT NULL AS q FROM etl.snapshots WHERE snapshot_id = $1`, [blocked[0]])).rows[0].q).toBe(true);

    const r = await rollback(db.pool, sicar, 'DF');
    expect(r).toEqual({ from: forced.snapshot_id, to: good.snapshot_id });
    expect(await currentId('DF')).toBe(good.snapshot_id);
  });

  test('with keep = 1, the snapshot rollback returns to is still kept', async () => {
    const cfg = { ...db.cfg, retention: 1 };
    const a = await runPipeline({ cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source('DF'), asOf: '2025-03-01' });
    const b = await runPipeline({ cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source('DF'), asOf: '2025-04-01' });
    expect([a.status, b.status]).toEqual(['published', 'published']);
    expect(await tablesExist(a.snapshot_id!)).toBe(true);
    expect((await rollback(db.pool, sicar, 'DF')).to).toBe(a.snapshot_id);
  });
});

describe('B.2 rollback follows publication, not ids', () => {
  test('after publish <older id>, rollback returns to the snapshot current just before; again, further back', async () => {
    const ids: number[] = [];
    for (const asOf of ['2025-01-01', '2025-02-01', '2025-03-01']) {
      const o = await run('MT', await source('MT', { themes: [] }), { asOf });
      expect(o.status).toBe('published');
      ids.push(o.snapshot_id!);
    }
    const [a, b, c] = ids;
    expect((await publishSnapshot(db.pool, sicar, a)).status).toBe('published');
    expect(await currentId('MT')).toBe(a);
    expect(await rollback(db.pool, sicar, 'MT')).toEqual({ from: a, to: c });
    expect(await rollback(db.pool, sicar, 'MT')).toEqual({ from: c, to: b });
    expect(await rollback(db.pool, sicar, 'MT')).toEqual({ from: b, to: a });
    await expect(rollback(db.pool, sicar, 'MT')).rejects.toMatchObject({ code: 'nothing_to_rollback' });
    const hist = await db.pool.query(`SELECT snapshot_id, action FROM etl.publications WHERE dataset = 'sicar' AND scope = 'MT' ORDER BY publication_id`);
    expect(hist.rows).toEqual([
      { snapshot_id: a, action: 'publish' }, { snapshot_id: b, action: 'publish' }, { snapshot_id: c, action: 'publish' },
      { snapshot_id: a, action: 'publish' }, { snapshot_id: c, action: 'rollback' }, { snapshot_id: b, action: 'rollback' },
      { snapshot_id: a, action: 'rollback' },
    ]);
  });

  test('after a rollback, the same source bytes are not published again by the next run: unchanged, saying so; --force loads them', async () => {
    const before = await currentId('MT');
    const bad = await source('MT', { themes: [] });
    const d = await run('MT', bad, { asOf: '2025-06-01' });
    expect(d.status).toBe('published');
    expect(await rollback(db.pool, sicar, 'MT')).toEqual({ from: d.snapshot_id, to: before });
    // The next nightly downloads the same bytes. Before the fix: published again, undoing the rollback.
    const again = await run('MT', bad, { asOf: '2025-06-01' });
    // snapshot_id is what serves the source now; rolled_back names the snapshot of these bytes.
    expect(again).toMatchObject({ status: 'unchanged', snapshot_id: before, rolled_back: { snapshot_id: d.snapshot_id } });
    expect(again.message).toMatch(new RegExp(`snapshot ${d.snapshot_id}.*rolled back.*agro publish ${d.snapshot_id}`));
    const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'report', `r${again.run_id}`, '--json'], { env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir }, encoding: 'utf8' });
    expect(JSON.parse(r.stdout).facts.notes[0]).toMatch(new RegExp(`^run ${again.run_id} loaded nothing \\(source identical to snapshot ${d.snapshot_id} .*rolled back.*\\): this is the report of snapshot ${before}`));
    expect(await currentId('MT')).toBe(before);
    // Other bytes load as usual; an operator who wants the rolled-back data says so.
    const forced = await run('MT', bad, { asOf: '2025-06-01', force: true });
    expect(forced.status).toBe('published');
    expect(await rollback(db.pool, sicar, 'MT')).toEqual({ from: forced.snapshot_id, to: before });
    // Made current again by hand (`agro publish`): its bytes are no longer refused once newer data replaced it.
    expect((await publishSnapshot(db.pool, sicar, d.snapshot_id!)).status).toBe('published');
    expect((await run('MT', await source('MT', { themes: [] }), { asOf: '2025-07-01' })).status).toBe('published');
    expect((await run('MT', bad, { asOf: '2025-08-01' })).status).toBe('published');
  });

  test('the history is read as an undo stack; dropped snapshots are skipped', () => {
    const h = (rows: [number, 'publish' | 'rollback'][]) => rows.map(([snapshot_id, action], i) => ({ publication_id: i + 1, snapshot_id, action, at: new Date() }));
    expect(rollbackTarget(h([[1, 'publish'], [2, 'publish'], [3, 'publish']]), 3, new Set([1, 2, 3]))).toBe(2);
    expect(rollbackTarget(h([[1, 'publish'], [2, 'publish'], [3, 'publish']]), 3, new Set([1, 3]))).toBe(1);
    expect(rollbackTarget(h([[5, 'publish'], [9, 'publish'], [5, 'publish']]), 5, new Set([5, 9]))).toBe(9);
    expect(rollbackTarget(h([[1, 'publish'], [2, 'publish'], [1, 'rollback']]), 1, new Set([1, 2]))).toBeNull();
  });
});

describe('B.3 retention keeps by date; B.4 a non-current backfill is `loaded`', () => {
  test('an old backfill is dropped before newer snapshots; `kept` snapshots are exempt', async () => {
    const ids: number[] = [];
    for (const asOf of ['2025-01-01', '2025-02-01', '2025-03-01']) {
      const o = await run('GO', await source('GO'), { asOf });
      expect(o.status).toBe('published');
      ids.push(o.snapshot_id!);
    }
    const [a, b, c] = ids;
    const backfill = await run('GO', await source('GO'), { asOf: '2020-01-01', backfill: true });
    expect(backfill).toMatchObject({ status: 'loaded', snapshot_id: expect.any(Number) });
    expect(backfill.message).toMatch(/not made current/);
    expect(await currentId('GO')).toBe(c);
    expect(await statusOf(backfill.snapshot_id!)).toBe('loaded');
    expect(await tablesExist(backfill.snapshot_id!)).toBe(true); // kept until a later run's retention

    expect(await catalog.setKept(db.pool, a, true)).toBe(true);
    const d = await run('GO', await source('GO'), { asOf: '2025-04-01' });
    expect(d.status).toBe('published');
    // Keep 3 by date: d (current), c (rollback target), b; a is exempt; the 2020 backfill goes.
    expect(await statusOf(backfill.snapshot_id!)).toBe('dropped');
    for (const id of [a, b, c, d.snapshot_id!]) expect({ id, status: await statusOf(id), tables: await tablesExist(id) }).toEqual({ id, status: expect.any(String), tables: true });
    const served = await db.pool.query(`SELECT snapshot_id, status, kept FROM serving.snapshots WHERE snapshot_id = ANY($1) ORDER BY snapshot_id`, [[a, b, c, d.snapshot_id]]);
    expect(served.rows).toEqual([
      { snapshot_id: a, status: 'superseded', kept: true },
      { snapshot_id: b, status: 'superseded', kept: false },
      { snapshot_id: c, status: 'superseded', kept: false },
      { snapshot_id: d.snapshot_id, status: 'current', kept: false },
    ]);
  });
});

describe('C.1 the gate compares with what is current at publish time', () => {
  test('a rollback during the run: a big drop against the now-current snapshot is blocked', async () => {
    const full = await currentId('GO');
    const fullRows = (await db.pool.query(`SELECT rows FROM etl.snapshots WHERE snapshot_id = $1`, [full])).rows[0].rows;
    const half = await run('GO', await source('GO', { dropEveryOther: true }), { asOf: '2025-05-01', force: true });
    expect(half).toMatchObject({ status: 'published', forced: true });

    // Same size as the current (half) snapshot: passes the gate when the run starts ...
    let rolledBack: { from: number; to: number } | null = null;
    const o = await run('GO', await source('GO', { dropEveryOther: true }), { asOf: '2025-06-01' }, {
      // ... but someone rolls back to the full snapshot before it publishes.
      async beforePublish() {
        rolledBack = await rollback(db.pool, sicar, 'GO');
      },
    });
    expect(rolledBack).toEqual({ from: half.snapshot_id, to: full });
    expect(o.status).toBe('blocked');
    expect(o.gate?.failures.map((f) => f.rule)).toEqual(['row_drop']);
    expect(o.gate?.failures[0].message).toMatch(new RegExp(`against snapshot ${full} \\(${fullRows} →`));
    expect(await currentId('GO')).toBe(full);
    expect(await statusOf(o.snapshot_id!)).toBe('blocked');
    const q = (await db.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [o.snapshot_id])).rows[0].quality;
    expect(q.change.previous_snapshot_id).toBe(full);
    expect(q.gate).toMatchObject({ passed: false, forced: false });
    expect(q.facts.notes.join('\n')).toMatch(/evaluated again at publish time/);
    const runRow = await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [o.run_id]);
    expect(runRow.rows[0].status).toBe('blocked');
    const report = JSON.parse(fs.readFileSync(path.join(db.dataDir, 'reports', `${o.snapshot_id}.json`), 'utf8'));
    expect(report.change.previous_snapshot_id).toBe(full);
  });
});

describe('C.2 publishing a blocked snapshot needs --force', () => {
  test('refused without --force, naming the failed rules; with --force it publishes and records it', async () => {
    const blocked = (await db.pool.query(`SELECT snapshot_id FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'GO' AND status = 'blocked' ORDER BY snapshot_id DESC LIMIT 1`)).rows[0].snapshot_id;
    const before = await currentId('GO');
    await expect(publishSnapshot(db.pool, sicar, blocked)).rejects.toMatchObject({ code: 'quality_gate', message: expect.stringMatching(/row_drop/) });
    expect(await currentId('GO')).toBe(before);
    expect(await statusOf(blocked)).toBe('blocked');
  });

  test('a blocked snapshot with 0 rows is refused too', async () => {
    const before = await currentId('GO');
    const empty = await run('GO', await source('GO', { filter: () => false }), { asOf: '2025-07-01' });
    expect(empty.status).toBe('blocked');
    expect(empty.rows_loaded).toBe(0);
    expect(empty.gate?.failures.map((f) => f.rule)).toContain('empty');
    await expect(publishSnapshot(db.pool, sicar, empty.snapshot_id!)).rejects.toMatchObject({ code: 'quality_gate', message: expect.stringMatching(/empty/) });
    expect(await currentId('GO')).toBe(before);

    const forced = await publishSnapshot(db.pool, sicar, empty.snapshot_id!, { force: true });
    expect(forced).toMatchObject({ status: 'published', forced: true });
    expect(await currentId('GO')).toBe(empty.snapshot_id);
    const rec = await db.pool.query(`SELECT forced FROM etl.snapshots WHERE snapshot_id = $1`, [empty.snapshot_id]);
    expect(rec.rows[0].forced).toBe(true);
    // And it can be undone: rollback returns to what was current before.
    expect(await rollback(db.pool, sicar, 'GO')).toEqual({ from: empty.snapshot_id, to: before });
  });
});

describe('C.3 a CPF in a merged header line never reaches the report, the ledger or the logs', () => {
  test('car-titulares whose header lost its line break', () => {
    const first = TITULARES_ROWS[0];
    expect(first.documento).toBe('529.982.247-25');
    // The header line swallowed the first data line: its values become "column names".
    const csv = titularesCsv().replace(/\r\n/, ';');
    expect(csv.split('\r\n')[0]).toContain(';529.982.247-25;');
    const dir = path.join(work, 'titulares-merged');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'titulares.csv'), csv);

    const agro = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
        env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'debug' },
        encoding: 'utf8',
        timeout: 120_000,
      });
    const r = agro('run', 'car-titulares', '--source', dir, '--json');
    const o = JSON.parse(r.stdout);
    expect(o.snapshot_id).toEqual(expect.any(Number));
    const rep = agro('report', String(o.snapshot_id), '--json');
    const html = agro('report', String(o.snapshot_id), '--format', 'html');
    const files = ['json', 'html'].map((ext) => fs.readFileSync(path.join(db.dataDir, 'reports', `${o.snapshot_id}.${ext}`), 'utf8'));
    return (async () => {
      const ledger = await db.pool.query(
        `SELECT (SELECT quality::text FROM etl.snapshots WHERE snapshot_id = $1) AS quality,
                (SELECT string_agg(detail::text, ' ') FROM etl.run_stages WHERE run_id = $2) AS detail,
                (SELECT coalesce(error, '') FROM etl.runs WHERE run_id = $2) AS error`,
        [o.snapshot_id, o.run_id],
      );
      const texts = { stdout: r.stdout, stderr: r.stderr, report: rep.stdout, html: html.stdout, files: files.join('\n'), ...ledger.rows[0] };
      for (const [where, text] of Object.entries(texts)) {
        expect(text, where).not.toContain('529.982.247-25');
        expect(text, where).not.toContain('52998224725');
      }
      // The column is still reported, masked: nothing is silently dropped from the report.
      const q = JSON.parse(ledger.rows[0].quality);
      expect(q.facts.fields.unknown).toContain('***.982.247-**');
      expect(JSON.parse(rep.stdout).facts.fields.unknown).toContain('***.982.247-**');
      expect(ledger.rows[0].detail).toContain('***.982.247-**');
    })();
  });
});
