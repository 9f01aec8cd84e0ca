// socio.qsa.alterado across Receita months that are not adjacent (contract §5): a month never
// loaded, a backfilled older month (kept as `loaded`, silent), that month made current by hand
// while another is current, a rollback to a month it was never diffed against, a blocked month
// forced after a later one was published. Each publish must announce the partner-list change
// between the month it makes current and the month it replaces, whatever was loaded between.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ALNUM, buildReceitaMonth, type ReceitaVariant } from '../fixtures/receita-cnpj.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { publishSnapshot, rollback } from '../src/etl/publish.ts';
import type { RunOutcome } from '../src/etl/run.ts';
import { addMonitor } from '../src/events/monitors.ts';
import { createKey } from '../src/platform/keys.ts';
import { formatCnpj } from '../src/privacy.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { pipelineRunner } from './helpers/change-events.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let work: string;
const q = async (sql: string, params: unknown[] = []) => (await db.pool.query(sql, params)).rows;
const run = pipelineRunner(() => db);
const receita = () => findPipeline('receita-cnpj')!;

// partners of the monitored company besides the fixture's own, per month
const PARTNERS = { CARLOS: '111333', BEATRIZ: '222444', DANIEL: '333555', EDUARDO: '444666' } as const;
type Name = keyof typeof PARTNERS;
const partnerRow = (nome: Name) => '"' + [ALNUM.basico, '2', nome, `***${PARTNERS[nome]}**`, '22', '20260801', '', '***000000**', '', '00', '4'].join('";"') + '"';

/** Loads one month's folder with `names` as the extra partners; `opts` for a backfill. */
async function month(m: string, names: Name[], opts: object = {}, variant: ReceitaVariant = 'base'): Promise<RunOutcome> {
  await buildReceitaMonth(path.join(work, 'receita'), m, variant, { SOCIOCSV: names.map(partnerRow) });
  return run('receita-cnpj', path.join(work, 'receita', m), opts);
}

async function qsaEvents() {
  const r = await q(`SELECT id, body FROM events.outbox WHERE type = 'socio.qsa.alterado' ORDER BY created_at, id`);
  return r.map((e) => e.body.data as { cnpj: string; entraram: { nome: string }[]; sairam: { nome: string }[] });
}
/** The events after the first `from`, as [who entered, who left] (names sorted). */
const changes = async (from: number) =>
  (await qsaEvents()).slice(from).map((d) => {
    expect(d.cnpj).toBe(formatCnpj(ALNUM.cnpj));
    return [d.entraram.map((p) => p.nome).sort(), d.sairam.map((p) => p.nome).sort()];
  });

const snaps: Record<string, number> = {};

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-events-months-'));
  expect((await run('ibge-municipios', path.join(ROOT_DIR, 'fixtures', 'ibge-municipios'))).status).toBe('published');
  const key = (await createKey(db.pool, { env: 'live', plan: 'growth', name: 'bank' })).id;
  await addMonitor(db.pool, key, 'cnpj', formatCnpj(ALNUM.cnpj));
}, 120_000);

afterAll(async () => {
  await db?.drop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('socio.qsa.alterado between months that are not adjacent', () => {
  test('a month never loaded: the next one is compared with the last published month', async () => {
    const oct = await month('2026-10', ['CARLOS']);
    expect(oct.status).toBe('published');
    snaps.oct = oct.snapshot_id!;
    // 2026-11 failed to download: never loaded
    const dec = await month('2026-12', ['BEATRIZ', 'DANIEL']);
    expect(dec.status).toBe('published');
    snaps.dec = dec.snapshot_id!;
    expect(await changes(0)).toEqual([[['BEATRIZ', 'DANIEL'], ['CARLOS']]]);
  });

  test('the missing month backfilled later is kept as loaded and announces nothing', async () => {
    const nov = await month('2026-11', ['BEATRIZ'], { backfill: true, asOf: '2026-11-01' });
    expect(nov.status, JSON.stringify(nov.error ?? nov.gate)).toBe('loaded');
    snaps.nov = nov.snapshot_id!;
    expect(await qsaEvents()).toHaveLength(1);
  });

  test('the backfilled month made current by hand after a later month was published: announced against the month it replaces', async () => {
    const start = (await qsaEvents()).length;
    const jan = await month('2027-01', ['BEATRIZ', 'DANIEL', 'EDUARDO']);
    expect(jan.status).toBe('published');
    snaps.jan = jan.snapshot_id!;
    expect(await changes(start)).toEqual([[['EDUARDO'], []]]);
    expect((await publishSnapshot(db.pool, receita(), snaps.nov)).status).toBe('published');
    expect(await changes(start + 1)).toEqual([[[], ['DANIEL', 'EDUARDO']]]);
  });

  test('a rollback to a month the current one was never diffed against announces the way back', async () => {
    const start = (await qsaEvents()).length;
    const [{ scope }] = await q(`SELECT scope FROM etl.current WHERE dataset = 'receita-cnpj'`);
    expect(await rollback(db.pool, receita(), scope)).toEqual({ from: snaps.nov, to: snaps.jan });
    expect(await changes(start)).toEqual([[['DANIEL', 'EDUARDO'], []]]);
  });

  test('a blocked month forced after a later month was published: announced against the current month', async () => {
    const start = (await qsaEvents()).length;
    const feb = await month('2027-02', ['CARLOS'], {}, 'empty-names');
    expect(feb.status).toBe('blocked');
    const mar = await month('2027-03', ['DANIEL']);
    expect(mar.status).toBe('published');
    expect(await changes(start)).toEqual([[[], ['BEATRIZ', 'EDUARDO']]]);
    expect((await publishSnapshot(db.pool, receita(), feb.snapshot_id!, { force: true })).status).toBe('published');
    expect(await changes(start + 1)).toEqual([[['CARLOS'], ['DANIEL']]]);
  });
});
