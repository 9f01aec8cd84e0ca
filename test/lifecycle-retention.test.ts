// A CAR state and a layer published at the same time leave no current pair without its overlaps.
// Rollback emits the change events a publish of the same snapshot would (monitors follow what is served).
// Retention after a publish, when it cannot drop what it planned to or the world changes
// under it: a run whose snapshot is published stays published (its snapshot is not
// discarded, nor marked failed), and a rollback during retention still has a snapshot to
// go back to afterwards.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState, SICAR_FIXTURES, type SicarUf } from '../fixtures/sicar.ts';
import { FUNAI_FIXTURE, buildFunaiZip } from '../fixtures/funai-tis.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { missingPairs } from '../src/etl/overlaps.ts';
import { publishSnapshot, rollback } from '../src/etl/publish.ts';
import { qualifiedSnapshotTable } from '../src/etl/names.ts';
import { runPipeline } from '../src/etl/run.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;

let variant = 0;
/** A state's AREA_IMOVEL zip with distinct bytes each call. */
async function source(uf: SicarUf): Promise<string> {
  const dir = path.join(work, `${uf}-${++variant}`);
  await buildSicarState(uf, dir, { mtime: new Date(2024, 2, 1, 0, variant), themes: [] });
  return dir;
}
const run = (uf: string, asOf: string, cfg = db.cfg) => source(uf as SicarUf).then((dir) => runPipeline({ cfg, pool: db.pool, log: db.log }, sicar, { uf, source: dir, asOf }));
const currentId = async (uf: string) =>
  (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = $1`, [uf])).rows[0]?.snapshot_id ?? null;
const statusOf = async (id: number) => (await db.pool.query(`SELECT status FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0].status as string;
const mainTable = (id: number) => qualifiedSnapshotTable(sicar.mainRelation, id);
const agro = (...args: string[]) =>
  spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, AGRO_RETENTION: '1' },
    encoding: 'utf8',
    timeout: 120_000,
  });

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'lifecycle-retention-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('retention that fails after the publish', () => {
  test('a view of an old snapshot that stops its DROP leaves the run published, exit 0', async () => {
    const cfg = { ...db.cfg, retention: 1 };
    const a = await run('DF', '2025-01-01', cfg);
    const b = await run('DF', '2025-02-01', cfg);
    expect([a.status, b.status]).toEqual(['published', 'published']);
    // A data engineer's view of the historical snapshot a: DROP TABLE refuses (2BP01).
    await db.pool.query(`CREATE VIEW public.bi_df_jan AS SELECT * FROM ${mainTable(a.snapshot_id!)}`);

    const r = agro('run', 'sicar', '--uf', 'DF', '--source', await source('DF'), '--as-of', '2025-03-01', '--json');
    const o = JSON.parse(r.stdout);
    expect({ code: r.status, status: o.status }).toEqual({ code: 0, status: 'published' });
    expect(await currentId('DF')).toBe(o.snapshot_id);
    expect(await statusOf(o.snapshot_id)).toBe('published');
    expect(await statusOf(a.snapshot_id!)).toBe('superseded'); // not dropped: a later retention tries again
    expect((await db.pool.query(`SELECT status, error FROM etl.runs WHERE run_id = $1`, [o.run_id])).rows[0]).toEqual({ status: 'published', error: null });
    expect(r.stderr).toMatch(/retention/);

    // Without the view, the next run's retention drops it.
    await db.pool.query(`DROP VIEW public.bi_df_jan`);
    const d = await run('DF', '2025-04-01', cfg);
    expect(d.status).toBe('published');
    expect(await statusOf(a.snapshot_id!)).toBe('dropped');
    expect((await rollback(db.pool, sicar, 'DF')).to).toBe(o.snapshot_id);
  });
});

describe('a rollback while retention waits for a reader', () => {
  test('the snapshot the new current one would roll back to is not dropped under it', async () => {
    const ids: number[] = [];
    for (const asOf of ['2025-01-01', '2025-02-01', '2025-03-01', '2025-04-01']) {
      const o = await run('MT', asOf);
      expect(o.status).toBe('published');
      ids.push(o.snapshot_id!);
    }
    const [, , c, d] = ids;
    // An as-of reader holds snapshot c: retention's DROP of it waits (up to the lock timeout).
    const reader = new pg.Client({ connectionString: db.url });
    await reader.connect();
    try {
      await reader.query('BEGIN');
      await reader.query(`SELECT count(*) FROM ${mainTable(c)}`);
      const cfg = { ...db.cfg, retention: 1, publishLockTimeoutMs: 20_000 };
      const e = run('MT', '2025-05-01', cfg);
      // Wait until retention's DROP of c is queued behind the reader.
      for (let i = 0; ; i++) {
        const w = await db.pool.query(`SELECT 1 FROM pg_locks WHERE NOT granted AND relation = to_regclass($1)`, [mainTable(c)]);
        if (w.rowCount) break;
        if (i > 1200) throw new Error('retention never tried to drop c');
        await new Promise((r) => setTimeout(r, 50));
      }
      // The operator rolls the new snapshot back: d is current, and c is what rollback returns to next.
      const back = rollback(db.pool, sicar, 'MT');
      await new Promise((r) => setTimeout(r, 300));
      await reader.query('COMMIT');
      const [eo, first] = await Promise.all([e, back]);
      expect(eo.status).toBe('published');
      expect(first).toEqual({ from: eo.snapshot_id, to: d });
    } finally {
      await reader.end();
    }
    expect(await currentId('MT')).toBe(d);
    // A second rollback still has somewhere to go (c was dropped before the rollback, so b).
    const second = await rollback(db.pool, sicar, 'MT');
    expect(second.from).toBe(d);
    expect([c, ids[1]]).toContain(second.to);
  });
});

describe('rollback and change events', () => {
  test('a rollback tells monitors what changed back, as `publish <older id>` does', async () => {
    const go1 = SICAR_FIXTURES.GO.areaImovel.find((r) => r.id === 'GO1')!;
    const key = (await createKey(db.pool, { env: 'live', plan: 'growth', name: 'rollback-events' })).id;
    await addMonitor(db.pool, key, 'car', go1.attributes.cod_imovel);
    const a = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: await source('GO'), asOf: '2025-01-01' });
    const dir = path.join(work, 'GO-cancelled');
    await buildSicarState('GO', dir, {
      themes: [], filter: (r) => r.id !== 'GO1',
      extraAreaImovel: [{ ...go1, id: 'GO1-CA', attributes: { ...go1.attributes, ind_status: 'CA' } }],
    });
    const b = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: dir, asOf: '2025-02-01' });
    expect([a.status, b.status]).toEqual(['published', 'published']);
    const events = async () =>
      (await db.pool.query(`SELECT body->'data' AS data FROM events.outbox WHERE type = 'car.situacao.alterada' AND key_id = $1 ORDER BY created_at, id`, [key])).rows.map((r) => r.data);
    expect(await events()).toHaveLength(1);
    const [changed] = await events();

    expect(await rollback(db.pool, sicar, 'GO')).toEqual({ from: b.snapshot_id, to: a.snapshot_id });
    const after = await events();
    expect(after).toHaveLength(2);
    expect(after[1]).toEqual({
      car: go1.attributes.cod_imovel, situacao_anterior: changed.situacao, situacao: changed.situacao_anterior,
      snapshot_anterior: b.snapshot_id, snapshot: a.snapshot_id, motivo: 'situacao',
    });
  });
});

describe('a CAR state and a layer published at the same time', () => {
  test('every current (state, layer) pair has its overlaps', async () => {
    const deps = { cfg: db.cfg, pool: db.pool, log: db.log };
    const f1 = await runPipeline(deps, funaiTis, { source: await buildFunaiZip(path.join(work, 'funai-1'), { rows: FUNAI_FIXTURE.slice(1) }), asOf: '2025-06-01' });
    const s1 = await runPipeline(deps, sicar, { uf: 'GO', source: await source('GO'), asOf: '2025-06-01' });
    // Older as-of: both loaded, not current; published below, at the same time.
    const f2 = await runPipeline(deps, funaiTis, { source: await buildFunaiZip(path.join(work, 'funai-2')), asOf: '2025-05-01', backfill: true });
    const s2 = await runPipeline(deps, sicar, { uf: 'GO', source: await source('GO'), asOf: '2025-05-01', backfill: true });
    expect([f1.status, s1.status, f2.status, s2.status]).toEqual(['published', 'published', 'loaded', 'loaded']);
    expect(await missingPairs(db.pool)).toEqual([]);

    // A reader of the CAR views holds the state's publish in its view rewrite, after it filled its pairs.
    const reader = new pg.Client({ connectionString: db.url });
    await reader.connect();
    try {
      await reader.query('BEGIN');
      await reader.query('SELECT 1 FROM current.car_imovel LIMIT 1');
      const carPublish = publishSnapshot(db.pool, sicar, s2.snapshot_id!, { budget: { lockTimeoutMs: 20_000, maxWaitMs: 30_000 } });
      const layerPublish = publishSnapshot(db.pool, funaiTis, f2.snapshot_id!, { budget: { lockTimeoutMs: 20_000, maxWaitMs: 30_000 } });
      for (let i = 0; ; i++) {
        const w = await db.pool.query(`SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'current.car_imovel'::regclass`);
        if (w.rowCount) break;
        if (i > 1200) throw new Error('the CAR publish never reached its view rewrite');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 500)); // the layer's publish: done, or waiting for the CAR's
      await reader.query('COMMIT');
      expect((await Promise.all([carPublish, layerPublish])).map((o) => o.status)).toEqual(['published', 'published']);
    } finally {
      await reader.end();
    }
    expect(await currentId('GO')).toBe(s2.snapshot_id);
    const missing = await missingPairs(db.pool);
    expect(missing.map((p) => [p.carSnapshotId, p.layerSnapshotId, p.overlay.camada])).toEqual([]);
  });
});
