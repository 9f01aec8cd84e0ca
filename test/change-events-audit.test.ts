// Change events across publish histories (contract §5): a change that goes back and forth,
// a rollback and a republish of the rolled-back snapshot, an embargo lifted and imposed again,
// another state's publish, a revoked key. Each announcement of a change is a new event (a new
// id: receivers deduplicate on it), and one publish writes it once.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ibamaCsv, RIO_VERDE_NEW_TERM } from '../fixtures/ibama-embargos.ts';
import { ALNUM, buildReceitaMonth, ENTERING_PARTNER, LEAVING_PARTNER } from '../fixtures/receita-cnpj.ts';
import { buildSicarState, SICAR_FIXTURES, type SicarPropertyRow } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { publishSnapshot, rollback } from '../src/etl/publish.ts';
import type { RunOutcome } from '../src/etl/run.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey, revokeKey } from '../src/platform/keys.ts';
import { formatCnpj } from '../src/privacy.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { carOf, pipelineRunner, sicarRow, withStatus } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;
const run = pipelineRunner(() => db);
const MT = SICAR_FIXTURES.MT.areaImovel;
const row = sicarRow;
const car = carOf;

let n = 0;
async function stateWith(uf: 'GO' | 'MT', changes: Record<string, SicarPropertyRow['attributes']['ind_status']>) {
  const dir = path.join(work, `${uf}-${++n}`);
  // zips of another day each time: new bytes (identical ones would be 'unchanged', or refused as a rolled-back snapshot's)
  await buildSicarState(uf, dir, {
    filter: (r) => !(r.id in changes), extraAreaImovel: Object.entries(changes).map(([id, s]) => withStatus(row(id), s)), mtime: new Date(Date.UTC(2025, 1, n)),
  });
  return dir;
}

/** Events of a type, oldest first; the revoked key's only when asked (its test is the first one). */
async function events(type: string, withRevoked = false) {
  const r = await q(`SELECT id, key_id, body FROM events.outbox WHERE type = $1 AND ($2 OR key_id <> $3) ORDER BY created_at, id`, [type, withRevoked, keys.gone]);
  return r.map((e) => ({ id: e.id as string, key: e.key_id as string, data: e.body.data }));
}

// the change-events term inside GO8 (Rio Verde), active or lifted (SIT_CANCELADO)
const term = (lifted: boolean) => ({ ...RIO_VERDE_NEW_TERM, SIT_CANCELADO: lifted ? 'S' : 'N' });
let ibamaN = 0;
async function ibama(extraRows: object[]) {
  const file = path.join(work, `ibama-${ibamaN++}.csv`);
  fs.writeFileSync(file, ibamaCsv({ extraRows: extraRows as never }));
  const o = await run('ibama-embargos', file);
  expect(o.status, JSON.stringify(o.gate ?? o.error)).toBe('published');
  return o;
}

const keys = { k1: '', k2: '', gone: '', sandbox: '' };
let goA: RunOutcome;
let goB: RunOutcome;

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-audit-'));
  goA = await run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/GO'), { uf: 'GO' });
  expect(goA.status).toBe('published');
  expect((await run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/MT'), { uf: 'MT' })).status).toBe('published');
  await ibama([]);
  for (const k of ['k1', 'k2', 'gone'] as const) keys[k] = (await createKey(db.pool, { env: 'live', plan: 'growth', name: k })).id;
  await addMonitor(db.pool, keys.k1, 'car', car('GO1').toLowerCase());
  await addMonitor(db.pool, keys.k1, 'car', car('GO8'));
  await addMonitor(db.pool, keys.k2, 'car', ` ${car('GO1')} `);
  await addMonitor(db.pool, keys.k2, 'car', car(MT[0].id));
  await addMonitor(db.pool, keys.gone, 'car', car('GO1'));
  await addMonitor(db.pool, keys.gone, 'car', car('GO8'));
  await revokeKey(db.pool, keys.gone);
  // A sandbox key reads fixtures only, never live data: live publishes tell it nothing.
  keys.sandbox = (await createKey(db.pool, { env: 'test', plan: 'growth', name: 'sandbox' })).id;
  await addMonitor(db.pool, keys.sandbox, 'car', car('GO1'));
  await addMonitor(db.pool, keys.sandbox, 'car', car('GO8'));
}, 300_000);

describe('change events across publish histories', () => {
  test('a status change: one event per active key monitoring it (input case and spaces do not matter), none for a revoked key or a sandbox (test) key', async () => {
    goB = await run('sicar', await stateWith('GO', { GO1: 'CA' }), { uf: 'GO' });
    expect(goB.status).toBe('published');
    const e = await events('car.situacao.alterada', true);
    expect(e.map((x) => x.key).sort()).toEqual([keys.k1, keys.k2].sort());
    for (const x of e) expect(x.data).toEqual({ car: car('GO1'), situacao_anterior: 'ativo', situacao: 'cancelado', snapshot_anterior: goA.snapshot_id, snapshot: goB.snapshot_id, motivo: 'situacao' });
  });

  test("another state's publish: events for its own monitored properties only", async () => {
    const before = (await events('car.situacao.alterada')).length;
    expect((await run('sicar', await stateWith('MT', { [MT[0].id]: 'SU' }), { uf: 'MT' })).status).toBe('published');
    const added = (await events('car.situacao.alterada')).slice(before);
    expect(added.map((x) => [x.key, x.data.car, x.data.situacao])).toEqual([[keys.k2, car(MT[0].id), 'suspenso']]);
  });

  test('rollback announces the way back; publishing the rolled-back snapshot again announces the change again, with new ids', async () => {
    const start = await events('car.situacao.alterada');
    const sicar = findPipeline('sicar')!;
    expect(await rollback(db.pool, sicar, 'GO')).toEqual({ from: goB.snapshot_id, to: goA.snapshot_id });
    const back = (await events('car.situacao.alterada')).slice(start.length);
    expect(back.map((x) => x.data)).toEqual([1, 2].map(() => ({ car: car('GO1'), situacao_anterior: 'cancelado', situacao: 'ativo', snapshot_anterior: goB.snapshot_id, snapshot: goA.snapshot_id, motivo: 'situacao' })));
    const [cur] = await q(`SELECT situacao FROM serving.car_imovel WHERE car = $1`, [car('GO1')]);
    expect(cur.situacao).toBe('ativo');

    expect((await publishSnapshot(db.pool, sicar, goB.snapshot_id!)).status).toBe('published');
    const all = await events('car.situacao.alterada');
    const again = all.slice(start.length + back.length);
    expect(again.map((x) => x.data.situacao)).toEqual(['cancelado', 'cancelado']);
    // receivers deduplicate on the id: a new announcement must not reuse the first one's
    expect(new Set(all.map((x) => x.id)).size).toBe(all.length);
    // the same snapshot again (a retried command): nothing more
    expect((await publishSnapshot(db.pool, sicar, goB.snapshot_id!)).status).toBe('published');
    expect(await events('car.situacao.alterada')).toHaveLength(all.length);
  });

  test('a status that changes and changes back over two publishes: two events each way', async () => {
    const start = (await events('car.situacao.alterada')).length;
    expect((await run('sicar', await stateWith('GO', {}), { uf: 'GO' })).status).toBe('published');
    expect((await run('sicar', await stateWith('GO', { GO1: 'CA' }), { uf: 'GO' })).status).toBe('published');
    const added = (await events('car.situacao.alterada')).slice(start);
    expect(added.map((x) => x.data.situacao)).toEqual(['ativo', 'ativo', 'cancelado', 'cancelado']);
    const all = await events('car.situacao.alterada');
    expect(new Set(all.map((x) => x.id)).size).toBe(all.length);
  });

  test('an embargo imposed, lifted, imposed again: announced each time it becomes active, with a new id, to active keys only', async () => {
    await ibama([term(false)]);
    const first = await events('car.embargo.criado');
    expect(first.map((x) => [x.key, x.data.car, x.data.embargo.data_embargo])).toEqual([[keys.k1, car('GO8'), '2026-09-15']]);
    await ibama([term(true)]);
    expect(await events('car.embargo.criado')).toEqual(first);
    await ibama([term(false)]);
    const after = await events('car.embargo.criado');
    expect(after).toHaveLength(2);
    expect(after[1].id).not.toBe(after[0].id);
    expect(after[1].data).toEqual(after[0].data);
    // the revoked key watched GO8 too
    expect((await events('car.embargo.criado', true)).map((x) => x.key)).toEqual([keys.k1, keys.k1]);
  });

  test('Receita: partners only reordered or in other letter case, no event; one leaves and one enters, one event; a rollback announces the way back', async () => {
    // k1 watches the company with its CNPJ in lower case and formatted
    await addMonitor(db.pool, keys.k1, 'cnpj', formatCnpj(ALNUM.cnpj).toLowerCase());
    // one the revoked key had added before its revocation
    await q(`INSERT INTO events.monitors (id, key_id, kind, record) VALUES ('mon_gone_cnpj', $1, 'cnpj', $2)`, [keys.gone, ALNUM.cnpj]);
    expect((await run('ibge-municipios', path.join(ROOT_DIR, 'fixtures', 'ibge-municipios'))).status).toBe('published');
    const root = path.join(work, 'receita');
    const partner = (nome: string, miolo: string) => ['"' + [ALNUM.basico, '2', nome, `***${miolo}**`, '22', '20260801', '', '***000000**', '', '00', '4'].join('";"') + '"'];
    const a = [...partner('CARLOS ALBERTO DIAS', '111333'), ...partner('BEATRIZ LOPES', '222444')];
    const b = [...partner('Beatriz  Lopes', '222444'), ...partner('carlos alberto dias', '111333')];
    await buildReceitaMonth(root, '2026-10', 'base', { SOCIOCSV: a });
    expect((await run('receita-cnpj', root)).status).toBe('published');
    await buildReceitaMonth(root, '2026-11', 'base', { SOCIOCSV: b });
    expect((await run('receita-cnpj', root)).status).toBe('published');
    expect(await events('socio.qsa.alterado', true)).toEqual([]);
    await buildReceitaMonth(root, '2026-12', 'next', { SOCIOCSV: b });
    expect((await run('receita-cnpj', root)).status).toBe('published');
    const [e] = await events('socio.qsa.alterado', true);
    expect(await events('socio.qsa.alterado', true)).toHaveLength(1);
    expect(e.key).toBe(keys.k1);
    expect(e.data.cnpj).toBe(formatCnpj(ALNUM.cnpj));
    expect([e.data.entraram.map((p: { nome: string }) => p.nome), e.data.sairam.map((p: { nome: string }) => p.nome)]).toEqual([[ENTERING_PARTNER], [LEAVING_PARTNER]]);

    const [{ scope }] = await q(`SELECT scope FROM etl.current WHERE dataset = 'receita-cnpj'`);
    await rollback(db.pool, findPipeline('receita-cnpj')!, scope);
    const all = await events('socio.qsa.alterado', true);
    expect(all).toHaveLength(2);
    expect(all[1]).toMatchObject({ key: keys.k1, data: { cnpj: formatCnpj(ALNUM.cnpj), entraram: e.data.sairam, sairam: e.data.entraram } });
  });

  test('a backfill older than the current snapshot is loaded without events; made current by hand, it announces its changes', async () => {
    const start = await events('car.situacao.alterada', true);
    const [cur] = await q(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`);
    const old = await run('sicar', await stateWith('GO', { GO1: 'SU' }), { uf: 'GO', backfill: true, asOf: '2020-01-01', force: true });
    expect(old.status, JSON.stringify(old.error ?? old.message)).toBe('loaded');
    expect(await events('car.situacao.alterada', true)).toEqual(start);
    expect((await publishSnapshot(db.pool, findPipeline('sicar')!, old.snapshot_id!)).status).toBe('published');
    const added = (await events('car.situacao.alterada', true)).slice(start.length);
    expect(added.map((x) => [x.key, x.data.situacao_anterior, x.data.situacao, x.data.snapshot_anterior, x.data.snapshot]).sort()).toEqual(
      [keys.k1, keys.k2].sort().map((k) => [k, 'cancelado', 'suspenso', Number(cur.snapshot_id), old.snapshot_id]),
    );
  });

  test('a status code none of the contract names: situacao null, motivo "situacao", never taken for a property gone', async () => {
    const before = (await events('car.situacao.alterada')).length;
    const o = await run('sicar', await stateWith('GO', { GO1: 'XX' as never }), { uf: 'GO', force: true });
    expect(o.status, JSON.stringify(o.error ?? o.message)).toBe('published');
    const [kept] = await q(`SELECT situacao, extra->>'situacao' AS raw FROM serving.car_imovel WHERE car = $1`, [car('GO1')]);
    expect(kept).toEqual({ situacao: null, raw: 'XX' });
    const added = (await events('car.situacao.alterada')).slice(before);
    expect(added.map((x) => [x.key, x.data.car, x.data.situacao_anterior, x.data.situacao, x.data.motivo]).sort()).toEqual(
      [keys.k1, keys.k2].sort().map((k) => [k, car('GO1'), 'suspenso', null, 'situacao']),
    );
  });
});
