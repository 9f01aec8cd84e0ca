// Sandbox (issue 10): `ck_test_` keys read their own database, loaded from the bundled fixtures
// by the real pipelines (`agro sandbox load`); never a live row, never billed.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { fixtureRuns } from '../src/cli/main.ts';
import { qualifiedSnapshotTable } from '../src/etl/names.ts';
import { createKey } from '../src/platform/keys.ts';
import { loadSandbox, sandboxUrl } from '../src/platform/sandbox.ts';
import { call, expectEnvelope, fixtureApi } from './helpers/api.ts';

const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB';
const MT_UNKNOWN = `MT-5107925-${'0'.repeat(32)}`;

const fx = fixtureApi();
let sandbox: pg.Pool;

beforeAll(async () => {
  const r = await loadSandbox({ cfg: fx.db.cfg, liveUrl: fx.db.url, log: fx.db.log, runs: fixtureRuns() });
  expect(r.published).toBe(fixtureRuns().length);
  sandbox = new pg.Pool({ connectionString: r.url, max: 2 });
  // pool.end() resolves before its sockets close; the DROP … WITH (FORCE) below then
  // terminates a backend whose client is still ending: its error must not be unhandled.
  sandbox.on('connect', (c) => c.on('error', () => {}));
}, 300_000);

afterAll(async () => {
  // The server holds sandbox connections: closed before the sandbox database is dropped under it.
  await fx.api?.close();
  await sandbox?.end();
  const name = new URL(sandboxUrl(fx.db.cfg, fx.db.url)).pathname.slice(1);
  // pool.end() resolves before the sockets are closed: a FORCE drop would then terminate a
  // backend whose client is still ending, and that error surfaces unhandled. Wait for them.
  const open = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`;
  for (const until = Date.now() + 10_000; (await fx.db.pool.query(open, [name])).rows[0].n > 0 && Date.now() < until; ) {
    await new Promise((r) => setTimeout(r, 50));
  }
  await fx.db.pool.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
});

/** The snapshot table holding a property in a database (its current SICAR snapshot). */
async function tableOf(pool: pg.Pool, car: string): Promise<string> {
  const id = (await pool.query(`SELECT snapshot_id FROM "current".car_imovel WHERE car = $1`, [car])).rows[0].snapshot_id;
  return qualifiedSnapshotTable('car_imovel', Number(id));
}

describe('sandbox', () => {
  test('the sandbox database is named after the live one and has its own snapshots', async () => {
    expect(sandboxUrl(fx.db.cfg, fx.db.url)).toBe(fx.db.url.replace(/\/([^/]+)$/, '/$1_sandbox'));
    const n = await sandbox.query(`SELECT count(*)::int AS n FROM serving.snapshots WHERE status = 'current'`);
    expect(n.rows[0].n).toBeGreaterThanOrEqual(fixtureRuns().length);
  });

  test('test keys read the sandbox, live keys the live snapshots; a live-only record is the 404 of an unknown one', async () => {
    const t = await createKey(fx.db.pool, { env: 'test', plan: 'starter' });
    const l = await createKey(fx.db.pool, { env: 'live', plan: 'starter' });
    // Make the two data sets differ: a changed name in the sandbox, a record only live.
    await sandbox.query(`UPDATE ${await tableOf(sandbox, GO1)} SET municipio = 'Cidade do Sandbox' WHERE car = $1`, [GO1]);
    await sandbox.query(`DELETE FROM ${await tableOf(sandbox, MT1)} WHERE car = $1`, [MT1]);

    const ts = await call(fx.api.base, `/v1/car/${GO1}`, { key: t.key });
    expect(ts.status).toBe(200);
    expect(ts.body.municipio).toBe('Cidade do Sandbox/GO');
    const lv = await call(fx.api.base, `/v1/car/${GO1}`, { key: l.key });
    expect(lv.body.municipio).not.toContain('Sandbox');

    expect((await call(fx.api.base, `/v1/car/${MT1}`, { key: l.key })).status).toBe(200);
    const liveOnly = expectEnvelope(await call(fx.api.base, `/v1/car/${MT1}`, { key: t.key }), 404, 'car_not_found');
    const unknown = expectEnvelope(await call(fx.api.base, `/v1/car/${MT_UNKNOWN}`, { key: t.key }), 404, 'car_not_found');
    expect(liveOnly.message.replace(MT1, '<car>')).toBe(unknown.message.replace(MT_UNKNOWN, '<car>'));

    // Searches too: by geometry over MT1 finds it live, not in the sandbox.
    const g = (await fx.db.pool.query(`SELECT ST_AsGeoJSON(ST_Envelope(geom))::json AS g FROM serving.car_imovel WHERE car = $1`, [MT1])).rows[0].g;
    const liveHits = await call(fx.api.base, '/v1/car/by-geometry', { key: l.key, body: { geometry: g } });
    expect(liveHits.body.results.map((r: { car: string }) => r.car)).toContain(MT1);
    const testHits = await call(fx.api.base, '/v1/car/by-geometry', { key: t.key, body: { geometry: g } });
    expect(testHits.status).toBe(200);
    expect(testHits.body.results.map((r: { car: string }) => r.car)).not.toContain(MT1);

    // Never billed, but in the key's history.
    expect(ts.headers.get('x-quota-used')).toBe('0');
    expect((await fx.db.pool.query(`SELECT count(*)::int AS n FROM platform.usage_months WHERE key_id = $1`, [t.id])).rows[0].n).toBe(0);
    const h = await call(fx.api.base, '/v1/car/history', { key: t.key });
    expect(h.body.results.map((x: { status: number; billable: boolean }) => [x.status, x.billable])).toEqual([[200, false], [404, false], [404, false], [200, false]]);
  });

  test('/v1/sources describes the data the key reads: the sandbox\'s snapshots for a test key, the live ones for a live key', async () => {
    const t = await createKey(fx.db.pool, { env: 'test', plan: 'starter' });
    const l = await createKey(fx.db.pool, { env: 'live', plan: 'starter' });
    // A live snapshot the sandbox does not have: published live after the sandbox was loaded.
    const ids = async (db: pg.Pool) =>
      (await db.query(`SELECT dataset || '|' || coalesce(uf, '') || '|' || snapshot_id AS k FROM serving.snapshots WHERE status = 'current' ORDER BY 1`)).rows.map((r) => r.k);
    await sandbox.query(`UPDATE etl.snapshots SET rows = 4242 WHERE snapshot_id = (SELECT snapshot_id FROM etl.current WHERE dataset = 'funai-tis')`);
    const keyOf = (s: { dataset: string; uf: string | null; snapshot_id: number }) => `${s.dataset}|${s.uf ?? ''}|${s.snapshot_id}`;
    const ts = await call(fx.api.base, '/v1/sources', { key: t.key });
    expect(ts.status).toBe(200);
    expect(ts.body.sources.map(keyOf).sort()).toEqual(await ids(sandbox));
    expect(ts.body.sources.find((s: { dataset: string }) => s.dataset === 'funai-tis').rows).toBe(4242);
    const lv = await call(fx.api.base, '/v1/sources', { key: l.key });
    expect(lv.body.sources.map(keyOf).sort()).toEqual(await ids(fx.db.pool));
    expect(lv.body.sources.find((s: { dataset: string }) => s.dataset === 'funai-tis').rows).not.toBe(4242);
  });
});
