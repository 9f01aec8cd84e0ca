// Change events from snapshot diffs (contract §5): real pipeline runs over the bundled fixture
// generators (SICAR GO, IBAMA's CSV, Receita's monthly files) publish pairs of snapshots; the
// outbox must then hold exactly the expected events — one per monitoring key and change, none
// for records nobody monitors, none for a republish of the same data, none for a publish the
// quality gate refused — and they reach a subscribed endpoint signed.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ibamaCsv, RIO_VERDE_NEW_TERM as NEW_TERM } from '../fixtures/ibama-embargos.ts';
import { ALNUM, buildReceitaMonth, ENTERING_PARTNER, LEAVING_PARTNER } from '../fixtures/receita-cnpj.ts';
import { buildSicarState, type SicarPropertyRow } from '../fixtures/sicar.ts';
import { drainOnce } from '../src/events/delivery.ts';
import { addEndpoint } from '../src/events/endpoints.ts';
import { addMonitor } from '../src/events/monitors.ts';
import type { RunOutcome } from '../src/etl/run.ts';
import { createKey } from '../src/platform/keys.ts';
import { formatCnpj } from '../src/privacy.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { carOf, pipelineRunner, sicarRow, withStatus } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;
const run = pipelineRunner(() => db);
const row = sicarRow;
const car = carOf;

/** GO with some properties' status changed (the rows keep their place in the file as far as the builder allows). */
async function goWith(dir: string, changes: Record<string, SicarPropertyRow['attributes']['ind_status']>, extra: object = {}) {
  await buildSicarState('GO', dir, {
    filter: (r) => !(r.id in changes),
    extraAreaImovel: Object.entries(changes).map(([id, s]) => withStatus(row(id), s)),
    ...extra,
  });
  return dir;
}

/** Change events in the outbox: [type, key, record, data]. */
async function changeEvents() {
  const r = await q(`SELECT id, type, key_id, body FROM events.outbox WHERE type <> 'quota.threshold' ORDER BY type, key_id, id`);
  return r.map((e) => ({ id: e.id as string, type: e.type as string, key: e.key_id as string, body: e.body }));
}


const keys: Record<'k1' | 'k2' | 'k3', string> = { k1: '', k2: '', k3: '' };
let sicarA: RunOutcome;
let sicarB: RunOutcome;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-'));
  sicarA = await run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/GO'), { uf: 'GO' });
  expect(sicarA.status).toBe('published');
  fs.writeFileSync(path.join(work, 'ibama-v1.csv'), ibamaCsv());
  expect((await run('ibama-embargos', path.join(work, 'ibama-v1.csv'))).status).toBe('published');
  for (const k of ['k1', 'k2', 'k3'] as const) keys[k] = (await createKey(db.pool, { env: 'live', plan: 'growth', name: k })).id;
  // k1 watches GO1 (its status will change), GO8 (an embargo will be registered on it) and a
  // company; k2 watches GO1 and GO2 (unchanged); k3 watches nothing. GO3 changes, unwatched.
  await addMonitor(db.pool, keys.k1, 'car', car('GO1'));
  await addMonitor(db.pool, keys.k1, 'car', car('GO8').toLowerCase());
  await addMonitor(db.pool, keys.k1, 'cnpj', formatCnpj(ALNUM.cnpj));
  await addMonitor(db.pool, keys.k2, 'car', car('GO1'));
  await addMonitor(db.pool, keys.k2, 'car', car('GO2'));
}, 240_000);

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('change events from snapshot diffs', () => {
  test('first loads emit nothing; GO1 already lies under an active embargo (no event for it later)', async () => {
    expect(await changeEvents()).toEqual([]);
    const under = await q(`SELECT count(*)::int AS n FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo' AND ativo`, [car('GO1')]);
    expect(under[0].n).toBeGreaterThan(0);
    const go8 = await q(`SELECT count(*)::int AS n FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo'`, [car('GO8')]);
    expect(go8[0].n).toBe(0);
  });

  test('a new SICAR snapshot: one car.situacao.alterada per key monitoring a property whose status changed', async () => {
    sicarB = await run('sicar', await goWith(path.join(work, 'GO-b'), { GO1: 'CA', GO3: 'SU' }), { uf: 'GO' });
    expect(sicarB.gate?.failures ?? sicarB.error, JSON.stringify(sicarB.gate ?? sicarB.error)).toEqual([]);
    expect(sicarB.status).toBe('published');
    const events = await changeEvents();
    const expected = [keys.k1, keys.k2].sort().map((k) => ({
      type: 'car.situacao.alterada', key: k,
      body: {
        type: 'car.situacao.alterada', api_version: 'v1',
        data: { car: car('GO1'), situacao_anterior: 'ativo', situacao: 'cancelado', snapshot_anterior: sicarA.snapshot_id, snapshot: sicarB.snapshot_id },
      },
    }));
    expect(events).toMatchObject(expected);
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(e.body.id).toBe(e.id);
      expect(e.id).toMatch(/^evt_[0-9a-f]{24}$/);
      expect(Object.keys(e.body).sort()).toEqual(['api_version', 'created_at', 'data', 'id', 'type']);
      expect(e.body.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    }
    expect(events[0].id).not.toBe(events[1].id);
  });

  test('a new IBAMA snapshot: car.embargo.criado for the monitored property a new active term overlaps, and nothing else', async () => {
    fs.writeFileSync(path.join(work, 'ibama-v2.csv'), ibamaCsv({ extraRows: [NEW_TERM] }));
    const o = await run('ibama-embargos', path.join(work, 'ibama-v2.csv'));
    expect(o.status).toBe('published');
    const events = (await changeEvents()).filter((e) => e.type === 'car.embargo.criado');
    const [overlap] = await q(
      `SELECT feicao_id, area_sobreposta_ha FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo'`, [car('GO8')],
    );
    expect(overlap.area_sobreposta_ha).toBeGreaterThan(60);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      key: keys.k1,
      body: { type: 'car.embargo.criado', data: { car: car('GO8'), embargo: { numero_tad: overlap.feicao_id, data_embargo: '2026-09-15' } } },
    });
    expect(overlap.feicao_id).toContain('990001');
    expect(events[0].body.data.embargo.area_sobreposta_ha).toBeCloseTo(overlap.area_sobreposta_ha, 3);
    // the agency, so a receiver tells IBAMA's terms from ICMBio's embargoes
    expect(events[0].body.data.embargo.orgao).toBe('IBAMA');
    expect(Object.keys(events[0].body.data.embargo).sort()).toEqual(['area_sobreposta_ha', 'data_embargo', 'numero_tad', 'orgao']);
  });

  test('a republish of the same data (new bytes, same rows) emits nothing', async () => {
    const before = await changeEvents();
    // the same SICAR rows in zips with another timestamp; the same IBAMA rows without the BOM
    const again = await run('sicar', await goWith(path.join(work, 'GO-b2'), { GO1: 'CA', GO3: 'SU' }, { mtime: new Date(Date.UTC(2025, 0, 2)) }), { uf: 'GO' });
    expect(again.status).toBe('published');
    expect(again.snapshot_id).not.toBe(sicarB.snapshot_id);
    fs.writeFileSync(path.join(work, 'ibama-v2b.csv'), ibamaCsv({ extraRows: [NEW_TERM], bom: false }));
    expect((await run('ibama-embargos', path.join(work, 'ibama-v2b.csv'))).status).toBe('published');
    expect(await changeEvents()).toEqual(before);
  });

  test('a snapshot the quality gate blocks emits nothing (an event exists only if the publish does)', async () => {
    const before = await changeEvents();
    const blocked = await run('sicar', await goWith(path.join(work, 'GO-c'), { GO1: 'SU' }, { dropEveryOther: true }), { uf: 'GO' });
    expect(blocked.status).toBe('blocked');
    expect(await changeEvents()).toEqual(before);
  });

  test('a new SICAR snapshot where a monitored property now reaches an existing embargo: car.embargo.criado for it', async () => {
    const before = await changeEvents();
    // GO2 (watched by k2) redrawn to reach into T01's polygon, which already covered GO1
    const moved: SicarPropertyRow = {
      ...row('GO2'), id: 'GO2-moved',
      geometry: { type: 'Polygon', coordinates: [[[-49.3, -16.576], [-49.29, -16.576], [-49.29, -16.566], [-49.3, -16.566], [-49.3, -16.576]]] },
    };
    const dir = path.join(work, 'GO-d');
    await buildSicarState('GO', dir, {
      filter: (r) => !['GO1', 'GO2', 'GO3'].includes(r.id),
      extraAreaImovel: [withStatus(row('GO1'), 'CA'), withStatus(row('GO3'), 'SU'), moved],
    });
    expect((await run('sicar', dir, { uf: 'GO' })).status).toBe('published');
    const added = (await changeEvents()).filter((e) => !before.some((b) => b.id === e.id));
    const [overlap] = await q(`SELECT feicao_id, area_sobreposta_ha FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo' AND ativo`, [car('GO2')]);
    expect(overlap.area_sobreposta_ha).toBeGreaterThan(0);
    expect(added).toHaveLength(1);
    expect(added[0]).toMatchObject({
      type: 'car.embargo.criado', key: keys.k2,
      body: { data: { car: car('GO2'), embargo: { numero_tad: overlap.feicao_id, data_embargo: '2019-08-21' } } },
    });
    expect(added[0].body.data.embargo.area_sobreposta_ha).toBeCloseTo(overlap.area_sobreposta_ha, 3);
  });

  test('a new Receita month: socio.qsa.alterado with who entered and who left, CPFs masked', async () => {
    expect((await run('ibge-municipios', path.join(ROOT_DIR, 'fixtures', 'ibge-municipios'))).status).toBe('published');
    const root = path.join(work, 'receita');
    await buildReceitaMonth(root, '2026-10', 'base');
    expect((await run('receita-cnpj', root)).status).toBe('published');
    expect((await changeEvents()).filter((e) => e.type === 'socio.qsa.alterado')).toEqual([]);
    await buildReceitaMonth(root, '2026-11', 'next');
    expect((await run('receita-cnpj', root)).status).toBe('published');
    const events = (await changeEvents()).filter((e) => e.type === 'socio.qsa.alterado');
    expect(events).toHaveLength(1);
    const { data } = events[0].body;
    expect(events[0].key).toBe(keys.k1);
    expect(data.cnpj).toBe(formatCnpj(ALNUM.cnpj));
    expect(data.entraram.map((p: { nome: string }) => p.nome)).toEqual([ENTERING_PARTNER]);
    expect(data.sairam.map((p: { nome: string }) => p.nome)).toEqual([LEAVING_PARTNER]);
    expect(data.sairam[0].cpf_cnpj).toBe('***.654.321-**');
    for (const p of [...data.entraram, ...data.sairam]) {
      expect(Object.keys(p).sort()).toEqual(['cpf_cnpj', 'nome', 'qualificacao']);
      if (p.cpf_cnpj) expect(p.cpf_cnpj).toMatch(/^\*\*\*\.\d{3}\.\d{3}-\*\*$|^[0-9A-Z]{2}\.[0-9A-Z]{3}\.[0-9A-Z]{3}\/[0-9A-Z]{4}-\d{2}$/);
    }
    // no CPF in clear anywhere in the body
    expect(JSON.stringify(data)).not.toMatch(/(?<![\w*])\d{3}\.?\d{3}\.?\d{3}-?\d{2}(?!\w)/);
  });

  test('the events reach the endpoint k1 subscribed, signed; k2 subscribed only to quota events gets none', async () => {
    const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      // events are fanned out to the endpoints that exist when they are drained
      const ep = await addEndpoint(db.pool, { keyId: keys.k1, url, events: 'car.situacao.alterada,car.embargo.criado,socio.qsa.alterado', allowPrivate: true });
      await addEndpoint(db.pool, { keyId: keys.k2, url, events: 'quota.threshold', allowPrivate: true });
      const cfg = { ...db.cfg, webhooks: { allowPrivate: true, pollMs: 1000 } };
      while ((await drainOnce({ pool: db.pool, cfg })).attempted > 0);
      const expected = (await changeEvents()).filter((e) => e.key === keys.k1);
      expect(got.map((g) => g.headers['webhook-id']).sort()).toEqual(expected.map((e) => e.id).sort());
      for (const g of got) expect(new Webhook(ep.secret).verify(g.body, g.headers as Record<string, string>)).toMatchObject({ api_version: 'v1' });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
