// car.embargo.criado for ICMBio's embargoes (contract §5): a bank monitoring a property hears of
// a new ICMBio embargo over it as it hears of an IBAMA term, under the same rules — real runs of
// the SICAR, IBAMA and ICMBio pipelines on the bundled fixtures, a rollback and a republish, a
// SICAR snapshot that moves a property under an embargo of each agency bearing the same number
// (two events, two ids), and a real webhook receiver on loopback.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { Compile } from 'typebox/compile';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ibamaCsv } from '../fixtures/ibama-embargos.ts';
import { buildIcmbioZip, ICMBIO_FIXTURE, ICMBIO_RELEASE_DATE, icmbioRow, type IcmbioRow } from '../fixtures/icmbio-embargos.ts';
import { buildSicarState, type SicarPropertyRow } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { WEBHOOKS } from '../src/api/meta/openapi.ts';
import { publishSnapshot, rollback } from '../src/etl/publish.ts';
import type { RunOutcome } from '../src/etl/run.ts';
import { drainOnce } from '../src/events/delivery.ts';
import { addEndpoint } from '../src/events/endpoints.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey, revokeKey } from '../src/platform/keys.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { carOf, pipelineRunner, sicarRow } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { receiver } from './helpers/receiver.ts';

let db: TestDb;
let work: string;
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;
const run = pipelineRunner(() => db);
const car = carOf;

/** E01's person and document (a CPF), so the test can check neither reaches a payload. */
const E01 = icmbioRow('E01').attributes;
const embargo = (id: string, num: string, serie: string | null, coords: [number, number, number, number], data: string): IcmbioRow => {
  const [x0, y0, x1, y1] = coords;
  return {
    id, role: 'change-events',
    geometry: { type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] },
    attributes: { ...E01, num_emb: num, serie, data, ano: Number(data.slice(-4)), municipio: 'Rio Verde', uf: 'GO' },
  };
};
// Inside GO8 (Rio Verde: lon -50.98..-50.96, lat -17.78..-17.765), where IBAMA's change-events term lies too.
const GO8_EMBARGO = embargo('N01', '990001', 'A', [-50.975, -17.776, -50.965, -17.77], '15/09/2024');
// Number 574812 with no series: its key is IBAMA's T01's NUM_TAD. Inside T01 (lon -49.315..-49.295, lat -16.575..-16.565),
// east of GO1 (lon ..-49.305) and west of GO2 (lon -49.29..): no monitored property under it until GO2 is redrawn.
const T01_TWIN = embargo('N02', '574812', null, [-49.3, -16.575, -49.295, -16.567], '10/10/2024');

let icmbioN = 0;
async function icmbio(rows: readonly IcmbioRow[]): Promise<RunOutcome> {
  const dir = path.join(work, `icmbio-${++icmbioN}`);
  fs.mkdirSync(dir);
  await buildIcmbioZip(dir, { rows });
  const o = await run('icmbio-embargos', dir, { asOf: ICMBIO_RELEASE_DATE });
  expect(o.status, JSON.stringify(o.gate ?? o.error)).toBe('published');
  return o;
}

async function embargoEvents() {
  const r = await q(`SELECT id, key_id, dedupe, body FROM events.outbox WHERE type = 'car.embargo.criado' ORDER BY created_at, id`);
  return r.map((e) => ({ id: e.id as string, key: e.key_id as string, dedupe: e.dedupe as string, data: e.body.data }));
}
const lastPublication = async () => Number((await q(`SELECT max(publication_id) AS p FROM etl.publications`))[0].p);
const overlapHa = async (carNo: string, camada: string, feicao: string) =>
  (await q(`SELECT area_sobreposta_ha AS ha FROM serving.car_sobreposicoes WHERE car = $1 AND camada = $2 AND feicao_id = $3`, [carNo, camada, feicao]))[0]?.ha as number;

const keys = { k1: '', k2: '', gone: '', sandbox: '' };
let v1: RunOutcome;
let v2: RunOutcome;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-icmbio-'));
  for (const uf of ['DF', 'GO']) expect((await run('sicar', path.join(ROOT_DIR, 'fixtures/sicar', uf), { uf })).status).toBe('published');
  fs.writeFileSync(path.join(work, 'ibama.csv'), ibamaCsv());
  expect((await run('ibama-embargos', path.join(work, 'ibama.csv'))).status).toBe('published');
  for (const k of ['k1', 'k2', 'gone'] as const) keys[k] = (await createKey(db.pool, { env: 'live', plan: 'growth', name: k })).id;
  keys.sandbox = (await createKey(db.pool, { env: 'test', plan: 'growth', name: 'sandbox' })).id;
  // k1 watches DF1 (under E01 from ICMBio's first load), GO8 and GO2; k2 watches GO8; a revoked
  // key and a sandbox key watch GO8 and DF1 too. Monitors exist before ICMBio's first load.
  for (const c of ['DF1', 'GO8', 'GO2']) await addMonitor(db.pool, keys.k1, 'car', car(c));
  for (const k of [keys.k2, keys.gone, keys.sandbox]) await addMonitor(db.pool, k, 'car', car('GO8'));
  for (const k of [keys.gone, keys.sandbox]) await addMonitor(db.pool, k, 'car', car('DF1'));
  await revokeKey(db.pool, keys.gone);
  v1 = await icmbio(ICMBIO_FIXTURE);
}, 300_000);

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('car.embargo.criado for ICMBio embargoes', () => {
  test('a first load emits nothing; a new release emits one event per live key monitoring the property a new embargo overlaps', async () => {
    expect((await q(`SELECT count(*)::int AS n FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo_icmbio'`, [car('DF1')]))[0].n).toBe(1);
    expect(await embargoEvents()).toEqual([]);

    v2 = await icmbio([...ICMBIO_FIXTURE, GO8_EMBARGO, T01_TWIN]);
    const events = await embargoEvents();
    const ha = await overlapHa(car('GO8'), 'embargo_icmbio', '990001/A');
    expect(ha).toBeGreaterThan(60);
    // not the revoked key's, not the sandbox key's, nothing for DF1 (E01 was there before), nothing for T01's twin (no one's property yet)
    expect(events.map((e) => [e.key, e.data.car]).sort()).toEqual([[keys.k1, car('GO8')], [keys.k2, car('GO8')]].sort());
    for (const e of events) {
      expect(e.data).toMatchObject({ car: car('GO8'), embargo: { numero_tad: '990001/A', data_embargo: '2024-09-15', orgao: 'ICMBio' } });
      expect(Object.keys(e.data.embargo).sort()).toEqual(['area_sobreposta_ha', 'data_embargo', 'numero_tad', 'orgao']);
      expect(e.data.embargo.area_sobreposta_ha).toBeCloseTo(ha, 3);
      // never the embargoed person's document or name
      expect(JSON.stringify(e.data)).not.toContain(String(E01.cpf_cnpj));
      expect(JSON.stringify(e.data)).not.toContain(String(E01.autuado));
      expect(e.dedupe).toBe(`car.embargo.criado:embargo_icmbio:${e.key}:${car('GO8')}:990001/A:p${await lastPublication()}`);
    }
  });

  test('rollback of the ICMBio layer announces no new embargo; publishing the rolled-back release again announces it again, with new ids', async () => {
    const start = await embargoEvents();
    const pipeline = findPipeline('icmbio-embargos')!;
    expect(await rollback(db.pool, pipeline, '')).toEqual({ from: v2.snapshot_id, to: v1.snapshot_id });
    expect(await embargoEvents()).toEqual(start);
    expect((await publishSnapshot(db.pool, pipeline, v2.snapshot_id!)).status).toBe('published');
    const all = await embargoEvents();
    const again = all.slice(start.length);
    expect(again.map((e) => [e.key, e.data.embargo.numero_tad, e.data.embargo.orgao]).sort()).toEqual([[keys.k1, '990001/A', 'ICMBio'], [keys.k2, '990001/A', 'ICMBio']].sort());
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    // the same snapshot again (a retried command): nothing more
    expect((await publishSnapshot(db.pool, pipeline, v2.snapshot_id!)).status).toBe('published');
    expect(await embargoEvents()).toHaveLength(all.length);
  });

  test('a SICAR snapshot moving a monitored property under an IBAMA term and an ICMBio embargo of the same number: two events, two ids, each naming its agency', async () => {
    const start = await embargoEvents();
    // GO2 redrawn to reach into T01 (IBAMA, NUM_TAD 574812) where ICMBio's 574812 lies too
    const moved: SicarPropertyRow = {
      ...sicarRow('GO2'), id: 'GO2-moved',
      geometry: { type: 'Polygon', coordinates: [[[-49.3, -16.576], [-49.29, -16.576], [-49.29, -16.566], [-49.3, -16.566], [-49.3, -16.576]]] },
    };
    const dir = path.join(work, 'GO-moved');
    await buildSicarState('GO', dir, { filter: (r) => r.id !== 'GO2', extraAreaImovel: [moved], mtime: new Date(Date.UTC(2025, 3, 1)) });
    expect((await run('sicar', dir, { uf: 'GO' })).status).toBe('published');
    const pub = await lastPublication();
    const added = (await embargoEvents()).slice(start.length);
    expect(added.map((e) => [e.key, e.data.car, e.data.embargo.numero_tad, e.data.embargo.orgao]).sort()).toEqual([
      [keys.k1, car('GO2'), '574812', 'IBAMA'],
      [keys.k1, car('GO2'), '574812', 'ICMBio'],
    ]);
    expect(added[0].id).not.toBe(added[1].id);
    const ibama = added.find((e) => e.data.embargo.orgao === 'IBAMA')!;
    const icmbioEvent = added.find((e) => e.data.embargo.orgao === 'ICMBio')!;
    // IBAMA's id rule is the one already-sent ids were made with
    expect(ibama.dedupe).toBe(`car.embargo.criado:${keys.k1}:${car('GO2')}:574812:p${pub}`);
    expect(ibama.data.embargo).toMatchObject({ data_embargo: '2019-08-21' });
    expect(ibama.data.embargo.area_sobreposta_ha).toBeCloseTo(await overlapHa(car('GO2'), 'embargo', '574812'), 3);
    expect(icmbioEvent.data.embargo).toMatchObject({ data_embargo: '2024-10-10' });
    expect(icmbioEvent.data.embargo.area_sobreposta_ha).toBeCloseTo(await overlapHa(car('GO2'), 'embargo_icmbio', '574812'), 3);
  });

  test('the ICMBio events reach the endpoint k1 subscribed, signed, as the OpenAPI document describes them', async () => {
    const { url, got, close } = await receiver([200]);
    try {
      const ep = await addEndpoint(db.pool, { keyId: keys.k1, url, events: 'car.embargo.criado', allowPrivate: true });
      const cfg = { ...db.cfg, webhooks: { allowPrivate: true, pollMs: 1000 } };
      while ((await drainOnce({ pool: db.pool, cfg })).attempted > 0);
      const expected = (await embargoEvents()).filter((e) => e.key === keys.k1);
      expect(got.map((g) => g.headers['webhook-id']).sort()).toEqual(expected.map((e) => e.id).sort());
      const bodies = got.map((g) => new Webhook(ep.secret).verify(g.body, g.headers as Record<string, string>) as { data: { car: string; embargo: { orgao: string; numero_tad: string } } });
      // as the OpenAPI document describes them (orgao among the embargo's fields)
      const documented = WEBHOOKS['car.embargo.criado'].post.requestBody.content['application/json'].schema;
      expect(Object.keys((documented.properties.data as unknown as { properties: { embargo: { properties: object } } }).properties.embargo.properties)).toContain('orgao');
      const check = Compile(documented);
      for (const b of bodies) expect(check.Check(b), JSON.stringify(b)).toBe(true);
      expect(check.Check({ ...bodies[0], data: { ...bodies[0].data, embargo: { ...bodies[0].data.embargo, orgao: 'SEMA' } } })).toBe(false);
      expect(bodies.filter((b) => b.data.embargo.orgao === 'ICMBio').map((b) => [b.data.car, b.data.embargo.numero_tad]).sort()).toEqual([
        [car('GO2'), '574812'], [car('GO8'), '990001/A'], [car('GO8'), '990001/A'],
      ]);
    } finally {
      await close();
    }
  });
});
