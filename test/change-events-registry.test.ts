// Change events when a monitored record enters or leaves its registry (contract §5): a CAR
// property missing from its state's newly published snapshot is announced as gone
// (car.situacao.alterada with situacao null), one that appears (a monitor added before the
// property was published) as entered (situacao_anterior null); another state's publish and a
// WFS-route snapshot after a zip-route one announce nothing. Real pipeline runs, a real WFS
// server and a real webhook receiver on loopback.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ibamaCsv, RIO_VERDE_NEW_TERM } from '../fixtures/ibama-embargos.ts';
import { buildSicarState, GO9, SICAR_FIXTURES, type SicarPropertyRow } from '../fixtures/sicar.ts';
import { wfsFeatures } from '../fixtures/sicar-wfs.ts';
import { sicarWfsLayer } from '../pipelines/sicar/wfs-route.ts';
import type { RunOutcome } from '../src/etl/run.ts';
import { drainOnce } from '../src/events/delivery.ts';
import { addEndpoint } from '../src/events/endpoints.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { carOf, pipelineRunner, sicarRow } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { startWfsServer, type WfsServer } from './helpers/wfs-server.ts';

let db: TestDb;
let work: string;
let wfs: WfsServer | undefined;
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;
const run = pipelineRunner(() => db);
const car = carOf;
const MT = SICAR_FIXTURES.MT.areaImovel;

let n = 0;
/** The state's fixture without `without` and with `extra` rows, in zips of another day (new bytes). */
async function state(uf: 'GO' | 'MT', opts: { without?: string[]; extra?: SicarPropertyRow[] } = {}) {
  const dir = path.join(work, `${uf}-${++n}`);
  await buildSicarState(uf, dir, { filter: (r) => !(opts.without ?? []).includes(r.id), extraAreaImovel: opts.extra ?? [], mtime: new Date(Date.UTC(2025, 2, n)) });
  return dir;
}

async function situacaoEvents() {
  const r = await q(`SELECT id, key_id, body FROM events.outbox WHERE type = 'car.situacao.alterada' ORDER BY created_at, id`);
  return r.map((e) => ({ id: e.id as string, key: e.key_id as string, data: e.body.data }));
}

async function published(o: Promise<RunOutcome>) {
  const r = await o;
  expect(r.status, JSON.stringify(r.gate ?? r.error)).toBe('published');
  return r;
}

const keys = { k1: '', k2: '' };
let goA: RunOutcome;
let goB: RunOutcome;
/** The published status of GO8 and GO2 (first load). */
const was: Record<string, string> = {};

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-registry-'));
  goA = await published(run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/GO'), { uf: 'GO' }));
  await published(run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/MT'), { uf: 'MT' }));
  for (const r of await q(`SELECT car, situacao FROM serving.car_imovel WHERE car = ANY ($1)`, [[car('GO8'), car('GO2')]])) was[r.car] = r.situacao;
  expect(Object.keys(was)).toHaveLength(2);
  for (const k of ['k1', 'k2'] as const) keys[k] = (await createKey(db.pool, { env: 'live', plan: 'growth', name: k })).id;
  // k1 watches GO8 (it will leave the registry), GO2 (stays) and GO9 (not published yet);
  // k2 watches an MT property (MT is published again, unchanged) and GO8.
  await addMonitor(db.pool, keys.k1, 'car', car('GO8'));
  await addMonitor(db.pool, keys.k1, 'car', car('GO2'));
  await addMonitor(db.pool, keys.k1, 'car', GO9.attributes.cod_imovel);
  await addMonitor(db.pool, keys.k2, 'car', car(MT[0].id));
  await addMonitor(db.pool, keys.k2, 'car', car('GO8'));
}, 300_000);

afterAll(async () => {
  await wfs?.close();
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('monitored properties entering and leaving the registry', () => {
  test("a property missing from its state's new snapshot: car.situacao.alterada with situacao null, per key", async () => {
    goB = await published(run('sicar', await state('GO', { without: ['GO8'] }), { uf: 'GO' }));
    const e = await situacaoEvents();
    expect(e.map((x) => x.key).sort()).toEqual([keys.k1, keys.k2].sort());
    for (const x of e) expect(x.data).toEqual({ car: car('GO8'), situacao_anterior: was[car('GO8')], situacao: null, snapshot_anterior: goA.snapshot_id, snapshot: goB.snapshot_id, motivo: 'saiu_do_registro' });
  });

  test("another state's publish makes no property of GO look gone (nor any of its own, unchanged)", async () => {
    const before = await situacaoEvents();
    await published(run('sicar', await state('MT'), { uf: 'MT' }));
    expect(await situacaoEvents()).toEqual(before);
  });

  test('a property that enters the registry (and one that comes back): situacao_anterior null', async () => {
    const before = await situacaoEvents();
    const goC = await published(run('sicar', await state('GO', { extra: [GO9] }), { uf: 'GO' }));
    const added = (await situacaoEvents()).slice(before.length);
    const seen = added.map((x) => [x.key, x.data.car, x.data.situacao_anterior, x.data.situacao, x.data.snapshot_anterior, x.data.snapshot, x.data.motivo]);
    expect(seen.sort()).toEqual([
      [keys.k1, car('GO8'), null, was[car('GO8')], goB.snapshot_id, goC.snapshot_id, 'entrou_no_registro'],
      [keys.k1, GO9.attributes.cod_imovel, null, 'pendente', goB.snapshot_id, goC.snapshot_id, 'entrou_no_registro'],
      [keys.k2, car('GO8'), null, was[car('GO8')], goB.snapshot_id, goC.snapshot_id, 'entrou_no_registro'],
    ].sort());
  });

  test('a WFS-route snapshot after a zip-route one: the same properties, nothing gone; one the WFS lacks is gone', async () => {
    const layer = sicarWfsLayer('GO');
    const features = wfsFeatures('GO');
    // the zips held GO9 too: the WFS layer serves the fixture state plus GO9
    const withGo9 = [...features, { ...features[0], id: 'sicar_imoveis_go.9999', geometry: GO9.geometry, properties: { ...features[0].properties, cod_imovel: GO9.attributes.cod_imovel, status_imovel: 'PE' } }];
    wfs = await startWfsServer({ [layer]: { features: withGo9 } });
    const before = await situacaoEvents();
    const viaWfs = await published(run('sicar', wfs.endpoint, { uf: 'GO' }));
    const [{ source }] = await q(`SELECT source FROM etl.snapshots WHERE snapshot_id = $1`, [viaWfs.snapshot_id]);
    expect(source.route).toBe('wfs');
    expect(await situacaoEvents()).toEqual(before);

    await wfs.close();
    wfs = await startWfsServer({ [layer]: { features: withGo9.filter((f) => f.properties.cod_imovel !== car('GO2')) } });
    const lacking = await published(run('sicar', wfs.endpoint, { uf: 'GO' }));
    const added = (await situacaoEvents()).slice(before.length);
    expect(added.map((x) => x.data)).toEqual([{ car: car('GO2'), situacao_anterior: was[car('GO2')], situacao: null, snapshot_anterior: viaWfs.snapshot_id, snapshot: lacking.snapshot_id, motivo: 'saiu_do_registro' }]);
  });

  test('the gone event reaches the subscribed endpoint with situacao null', async () => {
    const got: { id: string; body: { data: Record<string, unknown> } }[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        got.push({ id: String(req.headers['webhook-id']), body: JSON.parse(body) });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      await addEndpoint(db.pool, { keyId: keys.k2, url, events: 'car.situacao.alterada', allowPrivate: true });
      const cfg = { ...db.cfg, webhooks: { allowPrivate: true, pollMs: 1000 } };
      while ((await drainOnce({ pool: db.pool, cfg })).attempted > 0);
      const mine = (await situacaoEvents()).filter((e) => e.key === keys.k2);
      expect(got.map((g) => g.id).sort()).toEqual(mine.map((e) => e.id).sort());
      const gone = got.find((g) => g.body.data.situacao === null)!;
      expect(gone.body.data).toEqual({ car: car('GO8'), situacao_anterior: was[car('GO8')], situacao: null, snapshot_anterior: goA.snapshot_id, snapshot: goB.snapshot_id, motivo: 'saiu_do_registro' });
      expect(Object.keys(gone.body.data).sort()).toEqual(['car', 'motivo', 'situacao', 'situacao_anterior', 'snapshot', 'snapshot_anterior']);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('a property whose row the load rejects is not gone from the registry', () => {
  test('GO8 with a polygon outside Brazil (rejected, published with --force): no event for it, nor when it loads again', async () => {
    const before = (await situacaoEvents()).filter((e) => e.data.car === car('GO8'));
    const outside: SicarPropertyRow = {
      ...sicarRow('GO8'), id: 'GO8-outside',
      geometry: { type: 'Polygon', coordinates: [[[-20, 0], [-19.99, 0], [-19.99, 0.01], [-20, 0.01], [-20, 0]]] },
    };
    const rejected = await run('sicar', await state('GO', { without: ['GO8'], extra: [outside, GO9] }), { uf: 'GO', force: true });
    expect(rejected.status).toBe('published');
    expect(rejected.rows_rejected).toBeGreaterThan(0);
    expect(await q(`SELECT 1 FROM serving.car_imovel WHERE car = $1`, [car('GO8')])).toEqual([]);
    expect((await situacaoEvents()).filter((e) => e.data.car === car('GO8'))).toEqual(before);
    await published(run('sicar', await state('GO', { extra: [GO9] }), { uf: 'GO' }));
    expect((await situacaoEvents()).filter((e) => e.data.car === car('GO8'))).toEqual(before);
  });

  test('a property rejected in one snapshot and gone from the next is announced as gone; one back only as rejected rows has entered', async () => {
    // Rejected, the property is still in the registry: what happens to it next is a change like any other.
    const outside: SicarPropertyRow = {
      ...sicarRow('GO8'), id: 'GO8-outside',
      geometry: { type: 'Polygon', coordinates: [[[-20, 0], [-19.99, 0], [-19.99, 0.01], [-20, 0.01], [-20, 0]]] },
    };
    const start = (await situacaoEvents()).length;
    const rejected = await run('sicar', await state('GO', { without: ['GO8'], extra: [outside, GO9] }), { uf: 'GO', force: true });
    expect(rejected.status).toBe('published');
    expect((await situacaoEvents()).length).toBe(start);
    const gone = await run('sicar', await state('GO', { without: ['GO8'], extra: [GO9] }), { uf: 'GO', force: true });
    expect(gone.status).toBe('published');
    const left = (await situacaoEvents()).slice(start);
    expect(left.map((e) => e.key).sort()).toEqual([keys.k1, keys.k2].sort());
    for (const e of left) expect(e.data).toEqual({ car: car('GO8'), situacao_anterior: was[car('GO8')], situacao: null, snapshot_anterior: rejected.snapshot_id, snapshot: gone.snapshot_id, motivo: 'saiu_do_registro' });
    const back = await run('sicar', await state('GO', { without: ['GO8'], extra: [outside, GO9] }), { uf: 'GO', force: true });
    expect(back.status).toBe('published');
    const entered = (await situacaoEvents()).slice(start + left.length);
    expect(entered.map((e) => e.key).sort()).toEqual([keys.k1, keys.k2].sort());
    for (const e of entered) expect(e.data).toEqual({ car: car('GO8'), situacao_anterior: null, situacao: was[car('GO8')], snapshot_anterior: gone.snapshot_id, snapshot: back.snapshot_id, motivo: 'entrou_no_registro' });
    // Its polygon repaired, the same status: nothing more.
    const count = (await situacaoEvents()).length;
    await published(run('sicar', await state('GO', { extra: [GO9] }), { uf: 'GO' }));
    expect((await situacaoEvents()).length).toBe(count);
  });
});

describe('an embargo term whose polygon moves onto a monitored property', () => {
  test('the same term (numero_tad) redrawn to overlap GO8: car.embargo.criado for each key monitoring it', async () => {
    const far = { ...RIO_VERDE_NEW_TERM, GEOM_AREA_EMBARGADA: 'POLYGON ((-50.5750 -17.7760, -50.5650 -17.7760, -50.5650 -17.7700, -50.5750 -17.7700, -50.5750 -17.7760))' };
    for (const [i, rows] of [[far], [RIO_VERDE_NEW_TERM]].entries()) {
      const file = path.join(work, `ibama-${i}.csv`);
      fs.writeFileSync(file, ibamaCsv({ extraRows: rows }));
      await published(run('ibama-embargos', file));
      if (i === 0) expect(await q(`SELECT 1 FROM events.outbox WHERE type = 'car.embargo.criado'`)).toEqual([]);
    }
    const e = await q(`SELECT key_id, body FROM events.outbox WHERE type = 'car.embargo.criado'`);
    // GO9 (watched by k1) overlaps GO8: the term reaches it too
    expect(e.map((x) => [x.key_id, x.body.data.car, x.body.data.embargo.data_embargo]).sort()).toEqual(
      [[keys.k1, car('GO8')], [keys.k2, car('GO8')], [keys.k1, GO9.attributes.cod_imovel]].map((x) => [...x, '2026-09-15']).sort(),
    );
    for (const x of e) expect(x.body.data.embargo.numero_tad).toContain('990001');
  });
});
