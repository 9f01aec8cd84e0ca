// Historical snapshots as a data engineer backfilling and a bank asking "what did the
// registry say on date D" use them: backfills of past dates in any order, the same bytes on
// another date, and what as_of=D then answers.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState, type SicarUf } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import * as catalog from '../src/etl/catalog.ts';
import { applyRetention, publishSnapshot, rollback } from '../src/etl/publish.ts';
import { runPipeline } from '../src/etl/run.ts';
import { call, newKey, startApi } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const FIXTURES = path.resolve(__dirname, '../fixtures');
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2'; // a conservation unit and a polygon embargo
const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB'; // a point embargo

let db: TestDb;
let work: string;

let variant = 0;
/** A state's zips with distinct bytes each call (the zip entry time differs). */
async function source(uf: SicarUf): Promise<string> {
  const dir = path.join(work, `${uf}-${++variant}`);
  await buildSicarState(uf, dir, { mtime: new Date(2024, 2, 1, 0, variant) });
  return dir;
}
const backfill = (uf: string, dir: string, asOf: string) =>
  runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf, source: dir, asOf, backfill: true });
const currentId = async (uf: string) =>
  (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = $1`, [uf])).rows[0]?.snapshot_id ?? null;
/** The snapshot an as_of=D read answers from (the API's rule, over serving.snapshots_legiveis). */
const answeringOn = async (uf: string, d: string) =>
  (await db.pool.query(
    `SELECT snapshot_id, to_char(as_of, 'YYYY-MM-DD') AS as_of FROM serving.snapshots_legiveis
      WHERE dataset = 'sicar' AND uf = $1 AND as_of <= $2 ORDER BY as_of DESC, is_current DESC, snapshot_id DESC LIMIT 1`, [uf, d])).rows[0] ?? null;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'history-backfill-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('a backfill whose bytes are those of a snapshot of another date', () => {
  test('the date gets a snapshot unless the one answering for it already has those bytes', async () => {
    const jan = await source('DF');
    const mar = await source('DF');
    const a = await backfill('DF', jan, '2025-01-01');
    const c = await backfill('DF', mar, '2025-03-01');
    expect([a.status, c.status]).toEqual(['published', 'published']);

    // February's file is March's: the registry said March's data on 2025-02-01 already.
    const b = await backfill('DF', mar, '2025-02-01');
    expect(b).toMatchObject({ status: 'loaded', as_of: '2025-02-01' });
    expect(b.snapshot_id).not.toBe(c.snapshot_id);
    expect(await answeringOn('DF', '2025-02-15')).toEqual({ snapshot_id: b.snapshot_id, as_of: '2025-02-01' });

    // Run again, the date is unchanged (its own snapshot); so is a later date with the bytes
    // of the snapshot answering for it.
    expect(await backfill('DF', mar, '2025-02-01')).toMatchObject({ status: 'unchanged', snapshot_id: b.snapshot_id });
    expect(await backfill('DF', jan, '2025-01-20')).toMatchObject({ status: 'unchanged', snapshot_id: a.snapshot_id });

    // April's file is January's again, newer than the current one: it becomes current.
    const d = await backfill('DF', jan, '2025-04-01');
    expect(d).toMatchObject({ status: 'published', as_of: '2025-04-01' });
    expect(await currentId('DF')).toBe(d.snapshot_id);
    expect(await answeringOn('DF', '2025-04-15')).toEqual({ snapshot_id: d.snapshot_id, as_of: '2025-04-01' });
  });
});

describe('a date loaded again with other bytes', () => {
  test("as_of of the current snapshot's date answers what is served: the current snapshot, not the later load kept beside it", async () => {
    const served = await currentId('DF'); // as of 2025-04-01 (the first test)
    const again = await backfill('DF', await source('DF'), '2025-04-01');
    expect(again.status).toBe('loaded'); // not newer: kept, not current
    const [{ car }] = (await db.pool.query(`SELECT car FROM serving.car_imovel WHERE uf = 'DF' ORDER BY car LIMIT 1`)).rows;
    const api = await startApi(db.cfg, db.url, db);
    try {
      const key = await newKey(db);
      const get = (p: string) => call(api.base, p, { key });
      const today = new Date().toISOString().slice(0, 10);
      expect((await get(`/v1/car/${car}`)).body.snapshot_id).toBe(served);
      for (const d of ['2025-04-01', '2025-04-15', today]) expect({ d, id: (await get(`/v1/car/${car}?as_of=${d}`)).body.snapshot_id }).toEqual({ d, id: served });
    } finally {
      await api.close();
    }
  });
});

describe('as_of over backfilled CAR and layer snapshots', () => {
  test("the overlaps of the date's CAR and layer snapshots are computed by the backfill, in either order", async () => {
    const ibama = findPipeline('ibama-embargos')!;
    const layer = (asOf?: string) =>
      runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibama, { source: path.join(FIXTURES, 'ibama-embargos'), ...(asOf ? { asOf, backfill: true, force: true } : {}) });
    expect((await layer()).status).toBe('published');
    expect((await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: path.join(FIXTURES, 'sicar', 'GO') })).status).toBe('published');
    // the layer first, then the state
    expect((await layer('2025-01-01')).status).toBe('loaded');
    const go = await backfill('GO', await source('GO'), '2025-02-01');
    expect(go.status).toBe('loaded');
    // the state first (no IBAMA snapshot that old yet), then the layer
    const older = await backfill('GO', await source('GO'), '2024-06-01');
    expect(older.status).toBe('loaded');
    expect((await layer('2024-05-01')).status).toBe('loaded');

    const api = await startApi(db.cfg, db.url, db);
    try {
      const key = await newKey(db);
      const get = (p: string) => call(api.base, p, { key });
      const now = (await get(`/v1/car/${GO1}?include=embargos`)).body;
      expect(now.embargo_ibama).toBe(true);
      for (const [d, snapshot] of [['2025-03-01', go.snapshot_id], ['2024-07-01', older.snapshot_id]] as const) {
        const then = await get(`/v1/car/${GO1}?as_of=${d}&include=embargos`);
        expect(then.status, then.text).toBe(200);
        expect(then.body.snapshot_id).toBe(snapshot);
        expect(then.body.avisos ?? []).not.toContainEqual(expect.stringMatching(/ibama-embargos/));
        expect({ d, embargo_ibama: then.body.embargo_ibama, embargos: then.body.embargos }).toEqual({ d, embargo_ibama: true, embargos: now.embargos });
      }
    } finally {
      await api.close();
    }
  });
});

describe('as_of on a date whose snapshot retention dropped', () => {
  test('never answered from an older kept snapshot: the state is a 404 with the dates kept, a layer null with a note', async () => {
    const ibama = findPipeline('ibama-embargos')!;
    const mt: number[] = [];
    for (const d of ['2025-01-01', '2025-02-01', '2025-03-01', '2025-04-01', '2025-05-01']) {
      const o = await backfill('MT', await source('MT'), d);
      expect(o.status).toBe('published');
      mt.push(o.snapshot_id!);
      if (mt.length === 1) await catalog.setKept(db.pool, o.snapshot_id!, true); // January kept (historical series)
    }
    // February went with retention (3 kept by date: May, April, March; January exempt)
    expect((await catalog.getSnapshot(db.pool, mt[1]))!.status).toBe('dropped');
    // IBAMA: January kept, mid-March backfilled, then dropped by retention
    const [ibamaJan] = (await db.pool.query(`SELECT snapshot_id FROM etl.snapshots WHERE dataset = 'ibama-embargos' AND as_of = '2025-01-01' AND status <> 'dropped'`)).rows;
    await catalog.setKept(db.pool, ibamaJan.snapshot_id, true);
    // other bytes than January's (which answer on 2025-03-15): one more blank line at the end
    const changed = path.join(work, 'ibama-changed');
    fs.cpSync(path.join(FIXTURES, 'ibama-embargos'), changed, { recursive: true });
    fs.appendFileSync(path.join(changed, 'termo_embargo.csv'), '\n');
    const mar15 = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibama, { source: changed, asOf: '2025-03-15', backfill: true, force: true });
    expect(mar15.status).toBe('loaded');
    await applyRetention(db.pool, 'ibama-embargos', '', 1);
    expect((await catalog.getSnapshot(db.pool, mar15.snapshot_id!))!.status).toBe('dropped');

    const api = await startApi(db.cfg, db.url, db);
    try {
      const key = await newKey(db);
      const get = (p: string) => call(api.base, p, { key });
      const feb = await get(`/v1/car/${MT1}?as_of=2025-02-15`);
      expect(feb.status, feb.text).toBe(404);
      expect(feb.body.error.code).toBe('car_not_found');
      expect(feb.body.error.message).toMatch(/2025-02-01.*dropped by retention/);
      expect(feb.body.error.message).toContain('available as-of dates: 2025-01-01, 2025-03-01, 2025-04-01, 2025-05-01');
      // January itself is still answered from January
      expect((await get(`/v1/car/${MT1}?as_of=2025-01-20`)).body).toMatchObject({ snapshot_id: mt[0], as_of: '2025-01-01' });

      const mar = await get(`/v1/car/${MT1}?as_of=2025-03-20&include=embargos`);
      expect(mar.status, mar.text).toBe(200);
      expect(mar.body).toMatchObject({ snapshot_id: mt[2], as_of: '2025-03-01', embargo_ibama: null, embargos: null });
      expect(mar.body.avisos).toContainEqual(expect.stringMatching(/ibama-embargos: snapshot \d+ \(as of 2025-03-15\).*dropped by retention/));
    } finally {
      await api.close();
    }
  });
});

describe('as_of after a rollback', () => {
  test('a snapshot an operator rolled back answers no date (dropped or not) until it is published again', async () => {
    const served = await currentId('DF'); // as of 2025-04-01 (the first tests)
    const june = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: await source('DF'), asOf: '2025-06-01' });
    expect(june.status).toBe('published');
    await rollback(db.pool, sicar, 'DF');
    expect(await currentId('DF')).toBe(served);
    const [{ car }] = (await db.pool.query(`SELECT car FROM serving.car_imovel WHERE uf = 'DF' ORDER BY car LIMIT 1`)).rows;
    const api = await startApi(db.cfg, db.url, db);
    try {
      const key = await newKey(db);
      const get = async (d: string) => {
        const r = await call(api.base, `/v1/car/${car}?as_of=${d}`, { key });
        return { d, status: r.status, id: r.body.snapshot_id };
      };
      // /v1/sources lists the as-of dates as_of reads answer from: not the rolled-back one's
      const listed = async () => ((await call(api.base, '/v1/sources', { key })).body.sources as { dataset: string; uf: string | null; as_of_disponiveis: string[] }[])
        .find((x) => x.dataset === 'sicar' && x.uf === 'DF')!.as_of_disponiveis;
      const today = new Date().toISOString().slice(0, 10);
      // what the operator took back is not what the registry said on its date: the date reads what is served
      for (const d of ['2025-06-01', '2025-06-15', today]) expect(await get(d)).toEqual({ d, status: 200, id: served });
      expect(await listed()).not.toContain('2025-06-01');
      // published again, it answers again
      expect((await publishSnapshot(db.pool, sicar, june.snapshot_id!)).status).toBe('published');
      expect(await get('2025-06-15')).toEqual({ d: '2025-06-15', status: 200, id: june.snapshot_id });
      expect(await listed()).toContain('2025-06-01');
      await rollback(db.pool, sicar, 'DF');
      expect(await get('2025-06-15')).toEqual({ d: '2025-06-15', status: 200, id: served });
      expect(await listed()).not.toContain('2025-06-01');
      // dropped by retention after the rollback: still no 404 for a date it no longer answers
      await applyRetention(db.pool, 'sicar', 'DF', 1);
      expect((await catalog.getSnapshot(db.pool, june.snapshot_id!))!.status).toBe('dropped');
      expect(await get('2025-06-15')).toEqual({ d: '2025-06-15', status: 200, id: served });
    } finally {
      await api.close();
    }
  });
});
