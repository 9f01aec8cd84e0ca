// The one shape with several inputs and several relations (InputsSpec, src/etl/shape.ts) is a
// declaration, not SICAR's own loop: a made-up source declared here — a required zip of
// parcels and two optional zips of features, two relations — loads end to end from real
// shapefiles into a real PostGIS. The engine reads each input into its own table, repairs it,
// runs each typed pass (the features' passes wait for the parcels' one to link to them),
// builds the features then the parcels (a per-parcel count beside the first build), indexes
// both and reports each input's layers, reader, verdicts (prefixed but for the first input)
// and repairs; the pipeline adds only its own facts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { PRJ_SIRGAS2000, ShapefileWriter, zipFiles, type DbfField, type WritableGeometry } from '../fixtures/lib/shapefile-writer.ts';
import { fetchSource, type FetchedFile } from '../src/etl/download.ts';
import type { RunContext } from '../src/etl/pipeline.ts';
import { defineRelation } from '../src/etl/relation.ts';
import { runPipeline } from '../src/etl/run.ts';
import { shapedPipeline, type PassStep, type ShapeInput } from '../src/etl/shape.ts';
import { sqlText, type Sql } from '../src/sql.ts';
import { AgroError } from '../src/errors.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const PARCELA = defineRelation({
  name: 'demo_parcela',
  columns: [
    { name: 'codigo', type: 'text', from: ['codigo', 'cod'], required: true, sql: 's.codigo' },
    { name: 'nome', type: 'text', from: ['nome'], sql: 's.nome', counted: true },
    { name: 'n_feicoes', type: 'integer', sql: 'coalesce(n.n, 0)' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 's.geom' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  indexes: { primaryKey: ['codigo'], gist: ['geom'] },
});

const FEICAO = defineRelation({
  name: 'demo_feicao',
  columns: [
    { name: 'id', type: 'text', from: ['id'], required: true, sql: 's.id' },
    { name: 'tipo', type: 'text', sql: 's.tipo' },
    { name: 'parcela', type: 'text', sql: 's.parcela' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 's.geom' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  indexes: { gist: ['geom'], btree: ['parcela'] },
});

const TEMPLATES = `
  CREATE TABLE snap.demo_parcela__template (codigo text, nome text, n_feicoes integer, geom geometry(MultiPolygon,4326), extra jsonb, snapshot_id bigint);
  CREATE TABLE snap.demo_feicao__template (id text, tipo text, parcela text, geom geometry(MultiPolygon,4326), extra jsonb, snapshot_id bigint);`;

/** Verdict and geometry of a staged row repaired in place, in EPSG:4326 (the pipelines' typed passes do the same). */
const GEOM_VERDICT = `CASE WHEN s.geom IS NULL THEN 'no_geometry' WHEN s.repair IN ('rejected', 'empty') THEN 'geometry_unrepairable'`;
const GEOM = 'ST_Multi(ST_Transform(ST_SetSRID(s.geom, s.src_srid), 4326))';

/** Each zip of the source folder, named <PREFIX>_<INPUT>.zip. */
async function fetchFolder(ctx: RunContext): Promise<FetchedFile[]> {
  const dir = ctx.source!;
  const out: FetchedFile[] = [];
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.zip')).sort()) {
    const f = await fetchSource(path.join(dir, name), { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, expect: 'zip', zipLimits: ctx.cfg.zip });
    if (f) out.push(f);
  }
  return out;
}

interface DemoLoad {
  features: string[];
  counts: Sql | null;
}

const feicoes = (name: string): ShapeInput<DemoLoad> => ({
  name,
  relation: FEICAO,
  file: (f) => f.name.endsWith(`_${name}.zip`),
  read: { srid: 4674 },
  dropStaged: true,
  async typed({ client, t, passed, inputs, live, steps, state }: PassStep<DemoLoad>) {
    // Linked to the typed parcels: waits for their pass.
    await passed('PARCELAS');
    live();
    await steps.time(`typed ${name}`, () => client.query(`CREATE UNLOGGED TABLE ${t.classified} AS
      SELECT s.src_seq, ${GEOM_VERDICT} WHEN nullif(btrim(s.id), '') IS NULL THEN 'no_key' ELSE 'ok' END AS verdict,
             btrim(s.id) AS id, ${`'${name.toLowerCase()}'`} AS tipo, p.codigo AS parcela, ${GEOM} AS geom, s.extra
        FROM ${t.stage} s
        LEFT JOIN LATERAL (SELECT p.codigo FROM ${inputs('PARCELAS')!.t.classified} p
                            WHERE p.verdict = 'ok' AND ST_Contains(p.geom, ST_PointOnSurface(${GEOM})) LIMIT 1) p ON true`));
    state.features.push(name);
  },
});

const demo = shapedPipeline<DemoLoad>({
  name: 'demo-inputs',
  inputs: [
    {
      name: 'PARCELAS',
      relation: PARCELA,
      required: true,
      file: (f) => f.name.endsWith('_PARCELAS.zip'),
      read: { srid: 4674 },
      typed: ({ client, t }) => client.query(`CREATE UNLOGGED TABLE ${t.classified} AS
        SELECT s.src_seq, ${GEOM_VERDICT} WHEN nullif(btrim(s.codigo), '') IS NULL THEN 'no_key' ELSE 'ok' END AS verdict,
               btrim(s.codigo) AS codigo, s.nome, ${GEOM} AS geom, s.extra
          FROM ${t.stage} s`).then(() => undefined),
      counted: async ({ client, t }: PassStep<DemoLoad>) => (await client.query(`SELECT count(*)::int AS n FROM ${t.classified} WHERE nome IS NULL`)).rows[0].n as number,
    },
    feicoes('FEICOES_A'),
    feicoes('FEICOES_B'),
  ],
  relations: [
    {
      relation: FEICAO,
      async from({ client, ctx, inputs, state }) {
        const typed = inputs.filter((d) => state.features.includes(d.name)).map((d) => `SELECT * FROM ${d.t.classified} WHERE verdict = 'ok'`);
        if (!typed.length) return null;
        const kept = sqlText(`(${typed.join(' UNION ALL ')}) s`);
        const counts = (state.counts = sqlText(ctx.stagingTable('counts')));
        await client.query(`CREATE UNLOGGED TABLE ${counts} (parcela text, n int)`);
        // Beside the build, on the other connection: features per parcel, from the same rows.
        return { from: kept, beside: [{ label: 'counts', task: (c: pg.ClientBase) => c.query(`INSERT INTO ${counts} SELECT parcela, count(*) FROM ${kept} WHERE parcela IS NOT NULL GROUP BY 1`) }] };
      },
    },
    {
      relation: PARCELA,
      async from({ inputs, state }) {
        const counts = state.counts ? `LEFT JOIN ${state.counts} n ON n.parcela = s.codigo` : 'CROSS JOIN (SELECT NULL::int AS n) n';
        return { from: sqlText(`(SELECT * FROM ${inputs[0].t.classified} WHERE verdict = 'ok') s ${counts}`) };
      },
    },
  ],
  mainRelation: 'demo_parcela',
  fetch: fetchFolder,
  state: () => ({ features: [], counts: null }),
  async counted({ facts, inputs }) {
    facts.notes.push(`${inputs[0].counted as number} parcels without a name`);
  },
  async checked({ client, facts, built }) {
    const n = (await client.query(`SELECT count(*)::int AS n FROM ${built.demo_feicao.table} WHERE parcela IS NULL`)).rows[0].n;
    facts.notes.push(`${n} features in no parcel`);
  },
  async facts({ inputs, built }) {
    return { demo: { inputs: inputs.map((d) => d.name), feicoes: built.demo_feicao.rows } };
  },
});

const sq = (x: number, y: number, d: number): WritableGeometry => ({ type: 'Polygon', coordinates: [[[x, y], [x + d, y], [x + d, y + d], [x, y + d], [x, y]]] });
/** A bow-tie: invalid, repaired by the engine. */
const bowtie = (x: number, y: number, d: number): WritableGeometry => ({ type: 'Polygon', coordinates: [[[x, y], [x + d, y + d], [x + d, y], [x, y + d], [x, y]]] });

async function writeZip(dir: string, name: string, fields: DbfField[], rows: { geom: WritableGeometry; props: Record<string, string> }[]) {
  const base = path.join(dir, name);
  const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', fields, encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_SIRGAS2000 });
  for (const r of rows) await w.write(r.geom, r.props);
  const { files } = await w.close();
  await zipFiles(`${base}.zip`, files.map((f) => ({ path: f, name: path.basename(f) })));
  for (const f of files) fs.rmSync(f);
}

let db: TestDb;
let work: string;
const run = (source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, demo, { source, asOf: '2025-06-01', force: true });

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(TEMPLATES);
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'shape-inputs-'));
  const all = path.join(work, 'all');
  fs.mkdirSync(all);
  const C = (n: string, l = 40): DbfField => ({ name: n, type: 'C', length: l });
  await writeZip(all, 'X_PARCELAS', [C('cod'), C('nome')], [
    { geom: sq(-50, -15, 0.1), props: { cod: 'P1', nome: 'Fazenda Um' } },
    { geom: bowtie(-49.8, -15, 0.1), props: { cod: 'P2', nome: 'Sítio Dois' } },
    { geom: sq(-49.6, -15, 0.1), props: { cod: 'P3', nome: '' } },
    { geom: sq(-49.4, -15, 0.1), props: { cod: '', nome: 'sem código' } },
  ]);
  await writeZip(all, 'X_FEICOES_A', [C('id')], [
    { geom: sq(-49.99, -14.99, 0.02), props: { id: 'a1' } },
    { geom: sq(-49.97, -14.97, 0.02), props: { id: 'a2' } },
    { geom: sq(-49.59, -14.99, 0.02), props: { id: '' } },
  ]);
  await writeZip(all, 'X_FEICOES_B', [C('id')], [
    { geom: sq(-49.59, -14.99, 0.02), props: { id: 'b1' } },
    { geom: sq(-45, -10, 0.02), props: { id: 'b2' } },
  ]);
  // The same source without the optional FEICOES_B, and one without the required parcels.
  for (const [dir, zips] of [['partial', ['X_PARCELAS', 'X_FEICOES_A']], ['headless', ['X_FEICOES_A']]] as const) {
    fs.mkdirSync(path.join(work, dir));
    for (const z of zips) fs.copyFileSync(path.join(all, `${z}.zip`), path.join(work, dir, `${z}.zip`));
  }
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

test('three inputs, two relations: each input read, repaired, typed and reported; both relations built, linked and indexed', async () => {
  const o = await run(path.join(work, 'all'));
  expect([o.status, o.error]).toEqual(['published', undefined]);
  // The main input's rows are the snapshot's: 4 read, 1 rejected (no key); the features' own rejections carry their prefix.
  expect([o.rows_read, o.rows_loaded, o.rows_rejected]).toEqual([4, 3, 1]);
  const parcels = await db.pool.query(`SELECT codigo, nome, n_feicoes, ST_IsValid(geom) AS valid FROM "current".demo_parcela ORDER BY codigo`);
  expect(parcels.rows).toEqual([
    { codigo: 'P1', nome: 'Fazenda Um', n_feicoes: 2, valid: true },
    { codigo: 'P2', nome: 'Sítio Dois', n_feicoes: 0, valid: true },
    { codigo: 'P3', nome: null, n_feicoes: 1, valid: true },
  ]);
  const features = await db.pool.query(`SELECT id, tipo, parcela FROM "current".demo_feicao ORDER BY id`);
  expect(features.rows).toEqual([
    { id: 'a1', tipo: 'feicoes_a', parcela: 'P1' },
    { id: 'a2', tipo: 'feicoes_a', parcela: 'P1' },
    { id: 'b1', tipo: 'feicoes_b', parcela: 'P3' },
    { id: 'b2', tipo: 'feicoes_b', parcela: null },
  ]);
  // Every declared index of both relations.
  const ix = await db.pool.query(`SELECT tablename, indexname FROM pg_indexes WHERE schemaname = 'snap' AND indexname LIKE '%s${o.snapshot_id}%' ORDER BY 2`);
  expect(ix.rows.map((r) => r.indexname.replace(/__s\d+/, ''))).toEqual(['demo_feicao_geom', 'demo_feicao_parcela', 'demo_parcela_geom', 'demo_parcela_pk']);

  const { facts } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [o.snapshot_id])).rows[0].quality;
  expect(facts.layers.map((l: { name: string; features: number }) => [l.name, l.features])).toEqual([['X_PARCELAS', 4], ['X_FEICOES_A', 3], ['X_FEICOES_B', 2]]);
  expect(facts.rejected).toEqual({ no_key: 1, 'feicoes_a:no_key': 1 });
  expect(Object.keys(facts.examples).sort()).toEqual(['feicoes_a:no_key', 'no_key']);
  expect(facts.geometry).toMatchObject({ invalid: 1, repaired: 1, srid: 4674 });
  expect(facts.fields.empty).toEqual({ nome: 1 });
  expect(facts.notes).toEqual([
    '1 parcels without a name',
    '1 features in no parcel',
    'PARCELAS: read with the streaming shapefile reader (binary COPY)',
    'FEICOES_A: read with the streaming shapefile reader (binary COPY)',
    'FEICOES_B: read with the streaming shapefile reader (binary COPY)',
  ]);
  expect(facts.demo).toEqual({ inputs: ['PARCELAS', 'FEICOES_A', 'FEICOES_B'], feicoes: 4 });

  // The ledger speaks per input: rows and layers read, when each pass ran, the steps of the builds.
  const stages = Object.fromEntries((await db.pool.query(`SELECT stage, rows, detail FROM etl.run_stages WHERE run_id = $1`, [o.run_id])).rows.map((r) => [r.stage, r]));
  expect(Object.keys(o.stages)).toEqual(['download', 'read', 'normalise', 'index', 'quality', 'publish']);
  expect(stages.read.rows).toBe(9);
  expect(Object.fromEntries(Object.entries(stages.read.detail).map(([k, v]) => [k, (v as { layers: string[] }).layers]))).toEqual({
    PARCELAS: ['X_PARCELAS'], FEICOES_A: ['X_FEICOES_A'], FEICOES_B: ['X_FEICOES_B'],
  });
  expect(stages.normalise.detail.timeline.inputs.map((i: { input: string }) => i.input)).toEqual(['PARCELAS', 'FEICOES_A', 'FEICOES_B']);
  expect(Object.keys(stages.normalise.detail.steps)).toEqual(expect.arrayContaining(['repair PARCELAS', 'typed FEICOES_A', 'demo_feicao', 'counts', 'demo_parcela', 'demo_feicao index geom']));
  expect(stages.index.detail.built_during_normalise.sort()).toEqual(['demo_feicao index geom', 'demo_feicao index parcela']);
  // Nothing of the run is left behind (the features' staged rows were dropped in their pass).
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
  expect(db.pool.idleCount).toBe(db.pool.totalCount);
});

test('a relation\'s indexes start as soon as it is built, beside the pipeline\'s work for it; one failing fails the load cleanly', async () => {
  // The features' work beside their build waits (≤ 10 s) for their btree index to exist: it is
  // built on a connection of its own once the rows are in, not after that work.
  let seen: boolean | undefined;
  let wait = true;
  const [feicao, parcela] = demo.spec.relations;
  const early = shapedPipeline<DemoLoad>({
    ...demo.spec,
    name: 'demo-early-index',
    relations: [
      { ...feicao, async from(run, table) {
        const b = await feicao.from(run, table);
        const index = `${String(table).replace(/^snap\."?|"$/g, '')}_parcela`;
        return b && { ...b, beside: [...(b.beside ?? []), { label: 'waits for the index', task: async (c: pg.ClientBase) => {
          for (let i = 0; wait && i < 1000 && !seen; i++) {
            seen = (await c.query(`SELECT 1 FROM pg_indexes WHERE schemaname = 'snap' AND indexname = $1`, [index])).rowCount === 1;
            if (!seen) await new Promise((r) => setTimeout(r, 10));
          }
        } }] };
      } },
      parcela,
    ],
  });
  const runEarly = (dir: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, early, { source: path.join(work, dir), asOf: '2025-06-02', force: true });
  const ok = await runEarly('all');
  expect([ok.status, ok.error, seen]).toEqual(['published', undefined, true]);

  // The same index failing (raised by the database) fails the next load (another source): its error, nothing left behind, the snapshot before still current.
  const current = async () => (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'demo-early-index'`)).rows[0]?.snapshot_id;
  const before = await current();
  expect(before).toBe(ok.snapshot_id);
  await db.pool.query(`
    CREATE FUNCTION public.test_fail_index() RETURNS event_trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() WHERE object_identity ~ '^snap\\.demo_feicao__s\\d+_parcela$') THEN
        RAISE EXCEPTION 'injected failure in the features'' parcela index';
      END IF;
    END $$;
    CREATE EVENT TRIGGER test_fail_index ON ddl_command_end WHEN TAG IN ('CREATE INDEX') EXECUTE FUNCTION public.test_fail_index();`);
  try {
    wait = false;
    const failed = await runEarly('partial');
    expect([failed.status, failed.error?.message]).toEqual(['failed', expect.stringContaining("injected failure in the features' parcela index")]);
    const stages = (await db.pool.query(`SELECT stage, status FROM etl.run_stages WHERE run_id = $1 ORDER BY seq`, [failed.run_id])).rows;
    expect(stages.at(-1)).toEqual({ stage: 'normalise', status: 'failed' });
  } finally {
    await db.pool.query('DROP EVENT TRIGGER test_fail_index; DROP FUNCTION public.test_fail_index()');
  }
  expect(await current()).toBe(before);
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
  expect(db.pool.idleCount).toBe(db.pool.totalCount);
  const active = await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`);
  expect(active.rows[0].n).toBe(0);
}, 60_000);

test('an optional input without its file is skipped; a required one fails the load', async () => {
  const o = await run(path.join(work, 'partial'));
  expect([o.status, o.error]).toEqual(['published', undefined]);
  const { facts } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [o.snapshot_id])).rows[0].quality;
  expect(facts.demo.inputs).toEqual(['PARCELAS', 'FEICOES_A']);
  expect(facts.layers.map((l: { name: string }) => l.name)).toEqual(['X_PARCELAS', 'X_FEICOES_A']);
  expect((await db.pool.query(`SELECT codigo, n_feicoes FROM "current".demo_parcela ORDER BY codigo`)).rows.map((r) => r.n_feicoes)).toEqual([2, 0, 0]);

  const failed = await run(path.join(work, 'headless'));
  expect(failed.status).toBe('failed');
  expect(failed.error?.message).toMatch(/PARCELAS: no file among X_FEICOES_A\.zip/);
});

test('an input whose read fails while another input\'s pass waits for it fails the load; nothing waits forever', async () => {
  // FEICOES_A's pass waits for FEICOES_B's; FEICOES_B's own stager (as WFS pages are staged) fails once that pass has started.
  let started = () => {};
  const aStarted = new Promise<void>((r) => (started = r));
  const [parcelas, a, b] = demo.spec.inputs;
  const waits = shapedPipeline<DemoLoad>({
    ...demo.spec,
    name: 'demo-waits',
    inputs: [
      parcelas,
      { ...a, async typed({ passed }) { started(); await passed('FEICOES_B'); } },
      { ...b, async stage() {
        await Promise.race([aStarted, new Promise((r) => setTimeout(r, 10_000))]);
        throw new AgroError('malformed_source', 'FEICOES_B: page 3 of 5 is missing');
      } },
    ],
  });
  let timer: NodeJS.Timeout | undefined;
  const out = await Promise.race([
    runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, waits, { source: path.join(work, 'all'), asOf: '2025-06-01', force: true }),
    new Promise<'still waiting'>((r) => (timer = setTimeout(() => r('still waiting'), 30_000))),
  ]).finally(() => clearTimeout(timer));
  expect(out).not.toBe('still waiting');
  if (out === 'still waiting') return;
  expect([out.status, out.error?.code]).toEqual(['failed', 'malformed_source']);
  expect(out.error?.message).toMatch(/FEICOES_B: page 3 of 5 is missing/);
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
  expect(db.pool.idleCount).toBe(db.pool.totalCount);
}, 60_000);

test('a declaration whose main relation is none of its relations is refused, naming it', () => {
  expect(() => shapedPipeline<DemoLoad>({ ...demo.spec, name: 'demo-nomain', mainRelation: 'demo_parcelas' })).toThrow(/demo-nomain: the main relation demo_parcelas is none of its relations \(demo_/);
});

test('a declaration with two inputs of one name is refused, naming it', () => {
  const [first, ...rest] = demo.spec.inputs;
  expect(() => shapedPipeline<DemoLoad>({ ...demo.spec, name: 'demo-twice', inputs: [first, ...rest, { ...rest[0] }] })).toThrow(
    new RegExp(`demo-twice: input names must be unique; declared twice: ${rest[0].name}$`),
  );
  expect(() => shapedPipeline<DemoLoad>({ ...demo.spec, name: 'demo-once' })).not.toThrow();
});
