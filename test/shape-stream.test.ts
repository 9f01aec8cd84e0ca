// The streamed route of the one shape (src/etl/shape-stream.ts) is the engine's, not Receita's:
// a small source declared here — two families (people across two zips, accounts) and one
// lookup (cities), header-less latin1 `;` records in real zips — loaded end to end on a real
// PostGIS by `shapedPipeline({ …, stream })` with only its own line builder, table facts,
// gate, comparison and report. The engine checks the declarations first, copies each relation
// into its own snapshot table, loads the families at the same time, indexes each table as
// declared before its facts hook runs, and counts the malformed record with its number.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { copyLine } from '../src/etl/copy.ts';
import { fetchSource, type FetchedFile } from '../src/etl/download.ts';
import type { RunContext } from '../src/etl/pipeline.ts';
import { defineRelation, type ColumnDef } from '../src/etl/relation.ts';
import { runPipeline } from '../src/etl/run.ts';
import { shapedPipeline } from '../src/etl/shape.ts';
import { streamColumns, streamedRelation, type RelationRead, type StreamedRelation, type StreamRun, type StreamStep } from '../src/etl/shape-stream.ts';
import { qualifiedSnapshotTable } from '../src/etl/names.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const tail: ColumnDef[] = [{ name: 'extra', type: 'jsonb', role: 'extra' }, { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' }];
const text = (at: number, name: string): ColumnDef => ({ name, type: 'text', cell: 'text', at, counted: true });

const PESSOAS = streamedRelation(defineRelation({
  name: 'strm_pessoas',
  columns: [text(0, 'id'), text(1, 'nome'), text(2, 'cidade'), { name: 'nome_maiusculo', type: 'text', cell: 'derived' }, ...tail],
  indexes: { btree: ['id', 'cidade'], trigram: [{ name: 'nome_trgm', on: 'lower(nome)' }] },
}), { zips: ['Pessoas0', 'Pessoas1'], member: /\.PESSOAS$/i });
const CONTAS = streamedRelation(defineRelation({
  name: 'strm_contas',
  columns: [text(0, 'conta'), text(1, 'pessoa'), { name: 'saldo', type: 'numeric', cell: 'money', at: 2 }, ...tail],
  indexes: { btree: ['conta', { name: 'por_pessoa', columns: ['pessoa'] }] },
}), { zips: ['Contas'], member: /\.CONTAS$/i });
const CIDADES = streamedRelation(defineRelation({
  name: 'strm_cidades',
  columns: [text(0, 'codigo'), text(1, 'nome'), ...tail],
  indexes: { btree: ['codigo'] },
}), { zips: ['Cidades'], member: /\.CIDADES$/i });

const TEMPLATES = `
  CREATE TABLE snap.strm_pessoas__template (id text, nome text, cidade text, nome_maiusculo text, extra jsonb, snapshot_id bigint);
  CREATE TABLE snap.strm_contas__template (conta text, pessoa text, saldo numeric, extra jsonb, snapshot_id bigint);
  CREATE TABLE snap.strm_cidades__template (codigo text, nome text, extra jsonb, snapshot_id bigint);`;

/** One latin1 record, every field quoted (the layout the route reads). */
const rec = (...f: string[]) => f.map((x) => `"${x.replace(/"/g, '""')}"`).join(';') + '\n';
const CITIES: [string, string][] = [['7107', 'SÃO PAULO'], ['9701', 'BRASÍLIA'], ['9067', 'CUIABÁ']];
/** 150 people: ids 1‥80 in Pessoas0, 81‥150 in Pessoas1; every 50th in a city no lookup has. */
const person = (i: number) => rec(String(i), `JOSÉ ${i} D'ÁVILA`, i % 50 === 0 ? '0001' : CITIES[i % 3][0]);

async function writeZip(file: string, members: Record<string, string>): Promise<void> {
  const zip = new yazl.ZipFile();
  for (const [name, body] of Object.entries(members)) zip.addBuffer(Buffer.from(body, 'latin1'), name);
  zip.end();
  await pipeline(zip.outputStream, fs.createWriteStream(file));
}

async function writeSource(dir: string, extraAccounts = 0, people = 150): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, k) => a + k);
  await writeZip(path.join(dir, 'Pessoas0.zip'), { 'K1.D1.PESSOAS': range(1, 80).map(person).join(''), 'LEIAME.TXT': 'not a member of any relation' });
  // Record 31 of this member has two fields: malformed, counted with its number, never copied.
  const second = range(81, people).map(person);
  second.splice(30, 0, rec('999', 'SEM CIDADE'));
  await writeZip(path.join(dir, 'Pessoas1.zip'), { 'K2.D1.PESSOAS': second.join('') });
  await writeZip(path.join(dir, 'Contas.zip'), { 'K1.D1.CONTAS': range(1, 120 + extraAccounts).map((i) => rec(`C${i}`, String((i % 150) + 1), `${i},50`)).join('') });
  await writeZip(path.join(dir, 'Cidades.zip'), { 'K1.D1.CIDADES': CITIES.map(([c, n]) => rec(c, n)).join('') });
}

/** What the test's hooks saw, per run. */
interface Seen {
  /** The indexes each table had when its facts hook ran. */
  indexesAtFacts: Record<string, string[]>;
  orphanCities: number;
  read: Record<string, RelationRead>;
  compared: number[];
}

/** Every zip of the source folder. */
async function fetchZips(ctx: RunContext): Promise<FetchedFile[]> {
  const names = fs.readdirSync(ctx.source!).filter((n) => n.endsWith('.zip')).sort();
  return Promise.all(names.map(async (n) => (await fetchSource(path.join(ctx.source!, n), { destDir: ctx.rawDir, userAgent: 'test', expect: 'zip', zipLimits: ctx.cfg.zip }))!));
}

/** A streamed source declared on the shape, the way a pipeline folder would. */
function streamedSource(opts: { name: string; families?: StreamedRelation[]; seen: Seen[]; barrier?: boolean }) {
  return declared(opts.name, opts.families ?? [PESSOAS, CONTAS], ({ tables, target }: StreamStep) => {
    const seen: Seen = { indexesAtFacts: {}, orphanCities: 0, read: {}, compared: [] };
    opts.seen.push(seen);
    // Both families' facts hooks wait here for each other: loaded one after the other,
    // the first would wait forever (a timeout fails the load).
    let arrived = 0;
    let release = () => {};
    const both = new Promise<void>((r) => (release = r));
    const meet = async () => {
      if (opts.barrier === false) return;
      if (++arrived === 2) release();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([both, new Promise((_r, reject) => (timer = setTimeout(() => reject(new Error('the families were not loaded at the same time')), 20_000)))]).finally(() => clearTimeout(timer));
    };
    const indexes = async (c: pg.ClientBase, table: string) =>
      (await c.query(`SELECT indexname FROM pg_indexes WHERE schemaname = 'snap' AND tablename = $1 ORDER BY 1`, [table.replace(/^snap\."?|"$/g, '')])).rows.map((r) => r.indexname.replace(/^.*__s\d+_/, ''));
    return {
      lines: (rel) => (fields) => {
        const v = fields.map((f) => (f.trim() === '' ? null : f.trim()));
        if (rel === CONTAS) v[2] = v[2] && v[2].replace(',', '.');
        if (rel === PESSOAS) v.push(v[1] && v[1].toUpperCase());
        return copyLine([...v, null, target.snapshotId]);
      },
      tableFacts: {
        strm_pessoas: async (c, table) => {
          seen.indexesAtFacts.strm_pessoas = await indexes(c, table);
          seen.orphanCities = (await c.query(`SELECT count(*)::int AS n FROM ${table} p WHERE NOT EXISTS (SELECT 1 FROM ${tables.get('strm_cidades')!} c WHERE c.codigo = p.cidade)`)).rows[0].n;
          await meet();
        },
        strm_contas: async (c, table) => {
          seen.indexesAtFacts.strm_contas = await indexes(c, table);
          await meet();
        },
      },
      facts: async (read) => void (seen.read = read),
      gate: () => (seen.orphanCities > 10 ? [{ rule: 'strm_orphans', message: `${seen.orphanCities} people in no known city` }] : []),
      compare: async (previous) => void seen.compared.push(previous.snapshot_id),
      report: (facts) => {
        facts.notes.push(`${seen.orphanCities} people in a city no lookup has`);
        return { strm: { cidades_orfas: seen.orphanCities } };
      },
    };
  });
}

/** The declaration of the test's source: the families (the first leads), the cities as a lookup, the run's hooks. */
function declared(name: string, families: StreamedRelation[], begin: (step: StreamStep) => StreamRun) {
  return shapedPipeline({
    name,
    relation: families[0],
    fetch: fetchZips,
    stream: { families, lead: families[0], lookups: [CIDADES], progressMs: () => 100, begin },
  });
}

let db: TestDb;
let work: string;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(TEMPLATES);
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'shape-stream-'));
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

const quality = async (id: number) => (await db.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [id])).rows[0].quality;

describe('a streamed source declared on the shape', () => {
  const seen: Seen[] = [];
  const source = streamedSource({ name: 'strm-test', seen });

  test('loads every relation into its own snapshot table: the families at the same time, each indexed as declared before its facts, the malformed record counted', async () => {
    const dir = path.join(work, 'a');
    await writeSource(dir);
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, source, { source: dir });
    expect(out.error ?? null).toBeNull();
    expect(out.status).toBe('published');
    expect(source.relations).toEqual(['strm_pessoas', 'strm_contas', 'strm_cidades']);
    expect(source.mainRelation).toBe('strm_pessoas');
    // 150 people + 120 accounts + 3 cities well formed, one malformed record: read = loaded +
    // rejected over every relation; the snapshot's rows are the main relation's (150 people).
    expect([out.rows_read, out.rows_loaded, out.rows_rejected]).toEqual([274, 273, 1]);
    expect((await db.pool.query(`SELECT rows FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].rows).toBe(150);

    const sid = out.snapshot_id!;
    const rows = async (rel: string, order: string) => (await db.pool.query(`SELECT * FROM ${qualifiedSnapshotTable(rel, sid)} ORDER BY ${order}`)).rows;
    const people = await rows('strm_pessoas', 'id::int');
    expect(people).toHaveLength(150);
    expect(people[0]).toEqual({ id: '1', nome: "JOSÉ 1 D'ÁVILA", cidade: '9701', nome_maiusculo: "JOSÉ 1 D'ÁVILA", extra: null, snapshot_id: sid });
    expect(people.map((p) => p.id)).not.toContain('999');
    expect((await rows('strm_contas', 'conta'))[0]).toMatchObject({ conta: 'C1', pessoa: '2', saldo: 1.5 });
    expect((await rows('strm_cidades', 'codigo')).map((c) => c.nome)).toEqual(['SÃO PAULO', 'CUIABÁ', 'BRASÍLIA']);
    expect(streamColumns(PESSOAS)).toEqual(['id', 'nome', 'cidade', 'nome_maiusculo', 'extra', 'snapshot_id']);

    // Each table's declared indexes existed when its facts hook ran (right after its own COPY), and ANALYZE ran.
    const s = seen[0];
    expect(s.indexesAtFacts).toEqual({ strm_pessoas: ['cidade', 'id', 'nome_trgm'], strm_contas: ['conta', 'por_pessoa'] });
    const defs = (await db.pool.query(`SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = 'snap' AND tablename LIKE 'strm_%__s' || $1 ORDER BY 1, 2`, [String(sid)])).rows;
    expect(defs.map((d) => d.indexdef.replace(/__s\d+/g, '')).join('\n')).toMatch(/strm_pessoas_nome_trgm ON snap\.strm_pessoas USING gin \(lower\(nome\) gin_trgm_ops\)/);
    expect(defs.filter((d) => d.tablename.startsWith('strm_cidades'))).toHaveLength(1);
    for (const rel of ['strm_pessoas', 'strm_contas', 'strm_cidades']) {
      const analyzed = await db.pool.query(`SELECT count(*)::int AS n FROM pg_stats WHERE schemaname = 'snap' AND tablename = $1`, [`${rel}__s${sid}`]);
      expect(analyzed.rows[0].n, rel).toBeGreaterThan(0);
    }
    // The lookup was loaded (and queried by the families' facts) before the families: 3 people in no city.
    expect(s.orphanCities).toBe(3);

    // What the engine read, per relation and per zip; the malformed record by member and number.
    expect(s.read.strm_pessoas.files).toEqual([
      { file: 'Pessoas0.zip', members: ['K1.D1.PESSOAS'], records: 80 },
      { file: 'Pessoas1.zip', members: ['K2.D1.PESSOAS'], records: 70 },
    ]);
    expect(s.read.strm_pessoas).toMatchObject({ records: 150, malformed: 1, malformedSamples: [{ member: 'K2.D1.PESSOAS', record: 31, fields: 2 }] });
    expect(s.read.strm_contas).toMatchObject({ records: 120, malformed: 0 });
    expect(s.compared).toEqual([]);

    const q = await quality(sid);
    expect(q.facts.rejected).toEqual({ malformed_row: 1 });
    expect(q.facts.encoding).toEqual({ name: 'ISO-8859-1', assumed: false, replacementChars: 0 });
    expect(q.facts.strm).toEqual({ cidades_orfas: 3 });
    expect(q.facts.notes).toContain('3 people in a city no lookup has');

    // The ledger: load (with each relation's timings), then facts.
    const stages = (await db.pool.query(`SELECT stage, rows, detail FROM etl.run_stages WHERE run_id = $1 ORDER BY seq`, [q.run_id])).rows;
    expect(stages.map((x) => x.stage)).toEqual(['download', 'load', 'facts', 'quality', 'publish']);
    const load = stages.find((x) => x.stage === 'load');
    expect(load.rows).toBe(273);
    const t = load.detail.timings;
    expect(Object.keys(t).sort()).toEqual(['strm_cidades', 'strm_contas', 'strm_pessoas']);
    expect(Object.keys(t.strm_pessoas.indexes).sort()).toEqual(['cidade', 'id', 'nome_trgm']);
    for (const k of ['copy_done_ms', 'index_ms', 'facts_ms']) expect(typeof t.strm_pessoas[k], k).toBe('number');
    expect(t.strm_cidades.copy_done_ms).toBeUndefined(); // a lookup is copied before the families
  });

  test('the next load compares with the snapshot it replaces', async () => {
    const dir = path.join(work, 'b');
    await writeSource(dir, 5);
    const first = seen[0];
    const before = (await db.pool.query(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'strm-test'`)).rows[0].id;
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, source, { source: dir });
    expect(out.status).toBe('published');
    expect(seen[1].compared).toEqual([before]);
    expect(seen[1].read.strm_contas.records).toBe(125);
    expect(first.compared).toEqual([]);
  });

  test('a load whose main relation drops is blocked, however much its other relations load (the drop is judged on the main one)', async () => {
    const dir = path.join(work, 'b2');
    await writeSource(dir, 60, 90); // 90 people (was 150), 180 accounts (was 125)
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, source, { source: dir });
    expect(out.status).toBe('blocked');
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['row_drop']);
    expect(out.gate?.failures[0].message).toMatch(/rows dropped 40\.0 % .*\(150 → 90\)/);
    expect((await quality(out.snapshot_id!)).change).toMatchObject({ previous_rows: 150, rows: 90 });
    expect(out.rows_loaded).toBe(90 + 180 + 3);
  });

  test('a declaration its template does not match fails before any zip is read', async () => {
    const moved = streamedRelation(defineRelation({ ...CONTAS, columns: [CONTAS.columns[1], CONTAS.columns[0], ...CONTAS.columns.slice(2)] }), { zips: CONTAS.zips, member: CONTAS.member });
    const dir = path.join(work, 'c');
    await writeSource(dir, 9);
    const inflated: string[] = [];
    const onInflate = (m: unknown) => inflated.push((m as { member: string }).member);
    subscribe('agro:zip-inflate', onInflate);
    try {
      const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, streamedSource({ name: 'strm-test', families: [PESSOAS, moved], seen: [] }), { source: dir });
      expect(out.status).toBe('failed');
      expect(out.error?.message).toMatch(/snap\.strm_contas__template does not match its declaration/);
    } finally {
      unsubscribe('agro:zip-inflate', onInflate);
    }
    expect(inflated).toEqual([]);
  });

  test('a zip without the relation\'s member fails the load as malformed_source, naming it; the last good snapshot stays current', async () => {
    const dir = path.join(work, 'd');
    await writeSource(dir, 11);
    await writeZip(path.join(dir, 'Contas.zip'), { 'LEIAME.TXT': 'no accounts this time' });
    const before = (await db.pool.query(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'strm-test'`)).rows[0].id;
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, streamedSource({ name: 'strm-test', seen: [], barrier: false }), { source: dir });
    expect(out.status).toBe('failed');
    expect(out.error?.code).toBe('malformed_source');
    expect(out.error?.message).toMatch(/Contas\.zip holds no member named \*\.CONTAS/);
    expect((await db.pool.query(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'strm-test'`)).rows[0].id).toBe(before);
  });
});

/** The same source with only a line builder and a facts hook on the lookup. */
function plainSource(name: string, o: { families?: StreamedRelation[]; lookupFacts?: (c: pg.ClientBase) => Promise<void> } = {}) {
  return declared(name, o.families ?? [PESSOAS, CONTAS], ({ target }: StreamStep) => ({
    lines: (rel) => (fields) => {
      const v = fields.map((f) => (f.trim() === '' ? null : f.trim()));
      if (rel === CONTAS) v[2] = v[2] && v[2].replace(',', '.');
      if (rel.name === PESSOAS.name) v.push(v[1] && v[1].toUpperCase());
      return copyLine([...v, null, target.snapshotId]);
    },
    tableFacts: o.lookupFacts ? { strm_cidades: (c) => o.lookupFacts!(c) } : {},
    facts: async () => {},
    report: () => ({}),
  }));
}

/** Settles with the run's outcome, or says the run still waits after `ms`. */
const within = <T>(p: Promise<T>, ms: number): Promise<T | 'still waiting'> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<'still waiting'>((r) => (timer = setTimeout(() => r('still waiting'), ms)))]).finally(() => clearTimeout(timer));
};

test('the lead family failing to get its connection fails the load: the other families do not wait for its COPY forever', async () => {
  const dir = path.join(work, 'lead-connect');
  await writeSource(dir);
  // A real pool of five connections that gives up on a checkout after a second.
  const pool = new pg.Pool({ connectionString: db.url, max: 5, connectionTimeoutMillis: 1000 });
  pool.on('error', () => {});
  pool.on('connect', (c) => c.on('error', () => {}));
  const held: pg.PoolClient[] = [];
  // Once the lookup is loaded, every other connection is taken (and the lookup's own, as soon as
  // it is released): the lead's checkout times out. They are all given back 1.5 s later.
  const exhaust = async () => {
    while (pool.totalCount < 5 || pool.idleCount > 0) held.push(await pool.connect());
    void pool.connect().then((c) => held.push(c));
    setTimeout(() => { for (const c of held.splice(0)) c.release(); }, 1500);
  };
  try {
    const out = await within(runPipeline({ cfg: db.cfg, pool, log: db.log }, plainSource('strm-lead', { lookupFacts: exhaust }), { source: dir }), 30_000);
    expect(out).not.toBe('still waiting');
    if (out === 'still waiting') return;
    expect(out.status).toBe('failed');
    expect(out.error?.message).toMatch(/timeout exceeded when trying to connect/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.current WHERE dataset = 'strm-lead'`)).rows[0].n).toBe(0);
  } finally {
    for (const c of held.splice(0)) c.release();
    await within(pool.end(), 5_000);
  }
}, 60_000);

test('an index that fails leaves no statement of the load running: its table\'s other index builds end before their connections go back', async () => {
  const dir = path.join(work, 'index-fails');
  await writeSource(dir);
  // An index build that takes a few seconds (an immutable function that sleeps per row), beside a
  // primary key that fails at once (people share cities).
  await db.pool.query(`CREATE OR REPLACE FUNCTION strm_slow(t text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.02); RETURN t; END $$`);
  const people = streamedRelation(defineRelation({ ...PESSOAS, indexes: { primaryKey: ['cidade'], trigram: [{ name: 'slow', on: 'strm_slow(nome)' }] } }), { zips: PESSOAS.zips, member: PESSOAS.member });
  const source = plainSource('strm-index', { families: [people] });
  let running: string[] | null = null;
  const watched = {
    ...source,
    // What the database still runs for this load when the load fails.
    load: (...a: Parameters<typeof source.load>) => source.load(...a).catch(async (e) => {
      running = (await db.pool.query(`SELECT query FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid() AND query LIKE '%strm_slow%'`)).rows.map((r) => r.query);
      throw e;
    }),
  };
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, watched, { source: dir });
  expect(out.status).toBe('failed');
  expect(out.error?.message).toMatch(/could not create unique index/);
  expect(running).toEqual([]);
  expect(db.pool.idleCount).toBe(db.pool.totalCount);
}, 60_000);
