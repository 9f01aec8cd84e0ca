// An API answer read in several statements never mixes two snapshots of a layer when a
// publish lands between them. The publish is forced between the request's statements:
// a second connection holds an ACCESS EXCLUSIVE lock on what the request reads after its
// first statement, the request is fired and seen waiting on it (pg_stat_activity), the new
// IBAMA snapshot (which lifts every active term over a property) is published through the
// real run and publish functions, then the lock is released. `embargo_ibama` must agree with
// `embargos[]`: the answer is entirely the old IBAMA snapshot's (the one its first statement
// read) or entirely the new one's. The same for the enrichment's `fontes` and its rows; and a
// snapshot that retention drops between two statements makes the answer a 503 to retry.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { beforeAll, expect, test } from 'vitest';
import { FUNAI_FIXTURE, buildFunaiZip } from '../fixtures/funai-tis.ts';
import { IBAMA_TERMS, ibamaCsv } from '../fixtures/ibama-embargos.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { setSnapshotFields } from '../src/etl/catalog.ts';
import { forgetOverlaps } from '../src/etl/overlaps.ts';
import { dropSnapshotTables, publishSnapshot } from '../src/etl/publish.ts';
import { runPipeline, type Deps } from '../src/etl/run.ts';
import { call, eventually, expectEnvelope, fixtureApi, newKey, type Reply } from './helpers/api.ts';

const fx = fixtureApi();
let key: string;
let car: string;
let lifted: Set<string>;
const q = async <T = any>(sql: string, params: unknown[] = []) => (await fx.db.pool.query(sql, params)).rows as T[]; // eslint-disable-line @typescript-eslint/no-explicit-any
const ibamaId = async () => (await q<{ id: number }>(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'ibama-embargos'`))[0].id;

beforeAll(async () => {
  key = await newKey(fx.db);
  // A property under an active embargo, and the numbers of the active terms over it.
  const [row] = await q<{ car: string; numeros: string[] }>(
    `SELECT car, array_agg(DISTINCT feicao_id) AS numeros FROM serving.car_sobreposicoes
      WHERE camada = 'embargo' AND ativo GROUP BY car ORDER BY car LIMIT 1`);
  car = row.car;
  lifted = new Set(row.numeros);
});

/** A new IBAMA snapshot through a real run: the fixture terms, those of `lifted` lifted on `liftedOn`. */
async function loadIbama(liftedOn: string, hooks?: Deps['hooks'], asOf?: string): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ibama-between-'));
  try {
    const terms = IBAMA_TERMS.map((t) => (lifted.has(t.row.NUM_TAD ?? '')
      ? { ...t, row: { ...t.row, SIT_DESEMBARGO: 'S', TIPO_DESEMBARGO: 'Total', DAT_DESEMBARGO: `${liftedOn} 00:00:00`, DES_DESEMBARGO: 'Desembargo' } }
      : t));
    fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), ibamaCsv({ terms }));
    const o = await runPipeline({ cfg: fx.db.cfg, pool: fx.db.pool, log: fx.db.log, hooks }, findPipeline('ibama-embargos')!, { source: dir, asOf });
    expect(o.status).toBe('published');
    return o.snapshot_id!;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Fires `apiPath` and waits until the request waits on a lock (the test's second connection holds it). */
async function fireAndWaitForLock(req: string | { path: string; body: unknown }): Promise<{ answer: Promise<Reply> }> {
  const answer = typeof req === 'string' ? call(fx.api.base, req, { key }) : call(fx.api.base, req.path, { key, body: req.body });
  await eventually(async () => {
    const waiting = await q(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query NOT ILIKE '%pg_stat_activity%'`);
    expect(waiting.length).toBeGreaterThan(0);
  }, 10_000);
  return { answer }; // wrapped: awaiting a bare promise here would wait for the answer
}

/**
 * Fires `path` while a second connection holds `lock` (statements run in an open transaction),
 * waits until the request waits on a lock, publishes a new IBAMA snapshot in which the terms of
 * `lifted` are lifted, releases the lock and returns the answer.
 */
async function answerAcrossPublish(apiPath: string, lock: (c: pg.Client, oldIbama: number) => Promise<void>): Promise<Reply> {
  const oldIbama = await ibamaId();
  const holder = new pg.Client({ connectionString: fx.db.url });
  await holder.connect();
  let answer: Promise<Reply> | null = null;
  try {
    // Loaded and its overlaps computed; the publish comes once the request waits.
    await loadIbama('2026-01-05', {
      beforePublish: async () => {
        await holder.query('BEGIN');
        await lock(holder, oldIbama);
        answer = (await fireAndWaitForLock(apiPath)).answer;
      },
    });
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
  expect(await ibamaId()).not.toBe(oldIbama);
  return await answer!;
}

/** What the request may read after its first statement: the snapshot list (resolving the context again) and the IBAMA snapshot's own table. */
async function lockLaterReads(c: pg.Client, oldIbama: number) {
  // A view alone (LOCK TABLE on a view would also lock etl.snapshots, which the publish writes).
  await c.query('ALTER VIEW serving.snapshots_legiveis RESET (security_barrier)');
  await c.query(`LOCK TABLE snap.ibama_embargos__s${oldIbama} IN ACCESS EXCLUSIVE MODE`);
}

test('GET /car/{numero}?include=embargos: embargo_ibama and embargos[] come from one IBAMA snapshot when a publish lands between the statements', async () => {
  const before = await call(fx.api.base, `/v1/car/${car}?include=embargos`, { key });
  expect(before.status).toBe(200);
  expect(before.body.embargo_ibama).toBe(true);
  expect(before.body.embargos.some((e: { ativo: boolean }) => e.ativo)).toBe(true);

  const r = await answerAcrossPublish(`/v1/car/${car}?include=embargos`, lockLaterReads);
  expect(r.status, r.text).toBe(200);
  const anyActive = r.body.embargos.some((e: { ativo: boolean }) => e.ativo);
  expect({ embargo_ibama: r.body.embargo_ibama, active_in_embargos: anyActive }).toEqual({ embargo_ibama: anyActive, active_in_embargos: anyActive });
  // The first statement read the old snapshot: the whole answer is the old one.
  expect(r.body).toEqual({ ...before.body, consultado_em: r.body.consultado_em });

  // Once published, the answer is the new one throughout.
  const after = await call(fx.api.base, `/v1/car/${car}?include=embargos`, { key });
  expect(after.body.embargo_ibama).toBe(false);
  expect(after.body.embargos.length).toBeGreaterThan(0);
  expect(after.body.embargos.every((e: { ativo: boolean }) => e.ativo === false)).toBe(true);
});

/**
 * Retention drops the IBAMA snapshot an as_of read chose while the request waits between two
 * statements (on `lockOf`): the answer is the retry 503 of the catalogue, never a partial answer
 * (the overlap rows gone: no embargo) nor a raw PostgreSQL error (the table gone under a statement).
 */
let drops = 0;
async function dropDuringAsOfRead(lockOf: (dropped: number) => string) {
  // A snapshot that is kept but not current: published, then the one before it published
  // again by hand (superseded; a rolled-back one would answer no date). Dated after the
  // current one (within one date an as_of read takes the current snapshot).
  const before = await ibamaId();
  const droppable = await loadIbama(`2026-02-0${++drops}`, undefined, `2026-11-0${drops}`); // each load's source differs
  expect((await publishSnapshot(fx.db.pool, findPipeline('ibama-embargos')!, before)).status).toBe('published');
  expect(await ibamaId()).toBe(before);
  const [{ d }] = await q<{ d: string }>(`SELECT to_char(max(as_of), 'YYYY-MM-DD') AS d FROM etl.snapshots`);
  const apiPath = `/v1/car/${car}?as_of=${d}&include=embargos`;
  const read = await call(fx.api.base, apiPath, { key });
  expect(read.status, read.text).toBe(200);
  expect(read.body.snapshot_id).toBeTypeOf('number');
  expect(read.body.embargos.length).toBeGreaterThan(0); // the as_of read chose the droppable snapshot (its terms, lifted)
  expect(read.body.embargos.every((e: { ativo: boolean }) => e.ativo === false)).toBe(true);

  const holder = new pg.Client({ connectionString: fx.db.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE ${lockOf(droppable)} IN ACCESS EXCLUSIVE MODE`);
    const { answer } = await fireAndWaitForLock(apiPath);
    // What retention does (applyRetention), in the transaction that holds the lock.
    const [{ tables }] = await q<{ tables: string[] }>(`SELECT tables FROM etl.snapshots WHERE snapshot_id = $1`, [droppable]);
    await dropSnapshotTables(holder, tables);
    await forgetOverlaps(holder, droppable);
    await setSnapshotFields(holder, droppable, { status: 'dropped' });
    await holder.query('COMMIT');
    const r = await answer;
    expect(expectEnvelope(r, 503, 'upstream_unavailable').message).toMatch(new RegExp(`snapshot ${droppable} was dropped .*retry`));
    expect(r.headers.get('retry-after')).not.toBeNull();
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
  // Asked again, the answer reads what is kept.
  const again = await call(fx.api.base, apiPath, { key });
  expect(again.status, again.text).toBe(200);
}

test('a snapshot dropped by retention between two statements (its overlap rows gone): a 503 to retry, not an answer without its embargoes', async () => {
  await dropDuringAsOfRead(() => 'derived.car_overlaps');
});

test('a snapshot table dropped under a statement: a 503 to retry, not a 500 with a PostgreSQL message', async () => {
  await dropDuringAsOfRead((id) => `snap.ibama_embargos__s${id}`);
});

test('POST /enriquecimento/territorial: `fontes` names the snapshot the rows come from when a publish lands between the statements', async () => {
  const [{ env }] = await q<{ env: string }>(`SELECT ST_AsGeoJSON(ST_Envelope(ST_Buffer(ST_PointOnSurface(geom), 0.001)), 7) AS env FROM serving.funai_tis WHERE codigo = '90101'`);
  const body = { geometry: JSON.parse(env), layers: ['ti'] };
  const before = await call(fx.api.base, '/v1/enriquecimento/territorial', { key, body });
  expect(before.status, before.text).toBe(200);
  expect(before.body.ti.map((t: { nome: string }) => t.nome)).toEqual(['Batovi']);
  const oldTis = before.body.fontes['funai-tis'].snapshot_id;

  // The territory renamed in a new FUNAI snapshot, published while the request waits on the
  // layer's serving view (a view alone: the statement that resolved the sources has run).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'funai-between-'));
  const holder = new pg.Client({ connectionString: fx.db.url });
  await holder.connect();
  let answer: Promise<Reply> | null = null;
  try {
    await buildFunaiZip(dir, { rows: FUNAI_FIXTURE.map((r) => (r.attributes.terrai_cod === 90101 ? { ...r, attributes: { ...r.attributes, terrai_nom: 'Batovi Renomeada' } } : r)) });
    const o = await runPipeline({
      cfg: fx.db.cfg, pool: fx.db.pool, log: fx.db.log,
      hooks: {
        beforePublish: async () => {
          await holder.query('BEGIN');
          await holder.query('ALTER VIEW serving.funai_tis RESET (security_barrier)');
          answer = (await fireAndWaitForLock({ path: '/v1/enriquecimento/territorial', body })).answer;
        },
      },
    }, findPipeline('funai-tis')!, { source: dir });
    expect(o.status).toBe('published');
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const newTis = (await q<{ id: number }>(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'funai-tis'`))[0].id;
  expect(newTis).not.toBe(oldTis);
  const r = await answer!;
  expect(r.status, r.text).toBe(200);
  const nome = r.body.ti[0].nome;
  expect({ nome, fonte: r.body.fontes['funai-tis'].snapshot_id }).toEqual(nome === 'Batovi' ? { nome, fonte: oldTis } : { nome: 'Batovi Renomeada', fonte: newTis });
});
