// Change events after an upgrade in place: the current SICAR snapshot was loaded by a release
// whose snap.car_imovel_rejeitados__s<id> held only the CAR number (b026559 to f271bff, before
// the status column). The first publish of that state under this release compares against it:
// it must publish (it failed: column "situacao" does not exist, in the publish transaction, for
// every later load of the state while a CAR monitor existed), announce a monitored property gone
// from the registry as before, and claim no status change for a property whose old status that
// table never kept. Real pipeline runs on a real PostGIS.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildSicarState, GO9 } from '../fixtures/sicar.ts';
import { qualifiedSnapshotTable, REJECTED_PROPERTIES } from '../src/etl/names.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { carOf, pipelineRunner } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
const run = pipelineRunner(() => db);
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-upgrade-'));
}, 300_000);

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

test("a SICAR snapshot whose rejected-properties table is the old one (car only): the next publish succeeds, gone is announced, an unknown old status is no change", async () => {
  const old = await run('sicar', path.join(ROOT_DIR, 'fixtures/sicar/GO'), { uf: 'GO' });
  expect(old.status).toBe('published');
  // The table as the older release wrote it: GO9's rows were rejected in that load (status not kept).
  const rejected = qualifiedSnapshotTable(REJECTED_PROPERTIES, old.snapshot_id!);
  await q(`DROP TABLE ${rejected}`);
  await q(`CREATE TABLE ${rejected} (car text PRIMARY KEY)`);
  await q(`INSERT INTO ${rejected} (car) VALUES ($1)`, [GO9.attributes.cod_imovel]);
  const key = (await createKey(db.pool, { env: 'live', plan: 'growth', name: 'old' })).id;
  for (const c of [carOf('GO8'), GO9.attributes.cod_imovel]) await addMonitor(db.pool, key, 'car', c);

  // The new release's first load of GO: GO8 gone from the registry, GO9 loaded (status 'pendente').
  const dir = path.join(work, 'GO');
  await buildSicarState('GO', dir, { filter: (r) => r.id !== 'GO8', extraAreaImovel: [GO9], mtime: new Date(Date.UTC(2025, 2, 1)) });
  const next = await run('sicar', dir, { uf: 'GO' });
  expect(next.status, JSON.stringify(next.error)).toBe('published');
  const events = await q(`SELECT body FROM events.outbox WHERE type = 'car.situacao.alterada'`);
  expect(events.map((e) => [e.body.data.car, e.body.data.motivo])).toEqual([[carOf('GO8'), 'saiu_do_registro']]);
});
