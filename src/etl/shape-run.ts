// The skeleton of every shaped load (src/etl/shape.ts compiles both forms of a declaration,
// one file and one relation or several inputs and relations, into one `Plan`):
//
//   read      each declared input in order: its file's layers (layersFromZip, an optional
//             layer check, stageLayers with its relation's staging fields), a delimited
//             text (read.csv), or its own stager (e.g. WFS pages); into its own table
//   (pass)    each input's pass: repair, the pipeline's typed pass, verdicts, its own counts.
//             With several inputs a pass starts on a second connection as soon as its input
//             is staged, while the next one is read (overlapOn), so both cores work
//   normalise the passes still waiting, on both connections; each relation built from the
//             typed rows and checked against its template, beside the previous relation's
//             indexes and the pipeline's own work (two connections)
//   index     the last relation's declared indexes on two connections, ANALYZE of each
//   facts     (shape-facts.ts) verdicts (a prefix per input besides the first), repairs,
//             layers, encodings, reader notes, missing and unknown fields, empty values,
//             conversions that failed, implausible dates, overflowed cells, U+FFFD; then the
//             pipeline's own
import type pg from 'pg';
import type { FetchedFile } from './download.ts';
import { layersFromZip } from './layers.ts';
import { checkSnapshotTable, countVerdicts } from './load-steps.ts';
import type { LoadResult, RunContext, SnapshotTarget } from './pipeline.ts';
import { addVerdicts, emptyFacts, sum, type QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import { repairInPlace, repairInvalidPolygons, type RepairResult } from './repair.ts';
import { placeCsvExamples, stageByContent, type ContentStaged, type CsvRead } from './shape-csv.ts';
import { commonFacts, inputPrefix, readDetail, singleReadDetail, timeline } from './shape-facts.ts';
import { stageLayers } from './stage-vector.ts';
import { stepTimer, type StepTimer } from './steps.ts';
import { createFromTemplate, dropRepairColumn, dropStagedTable, tableBytes, type CheckCounts, type ShapeTables } from './sql/shape.ts';
import { indexSnapshotTables, indexTasks, onTwoConnections, overlapOn, settledLater, type Overlap, type Task } from './two-connections.ts';
import type { VectorLayer } from './vector-reader.ts';
import { AgroError } from '../errors.ts';
import { tableName, type Sql } from '../sql.ts';

/** How an input's file is read. */
export interface ShapeRead {
  /** SRID assumed for a layer without a .prj. */
  srid: number;
  /** Levels of zips inside the zip that are searched (1: the zip alone). */
  maxDepth?: number;
  /** Refuses the layers before anything is staged (e.g. a CRS that must not be guessed, a drifted layout). */
  refuse?: (layers: VectorLayer[], file: FetchedFile) => void;
  /** The source may be a delimited text (or a zip holding one) instead of shapefiles: told by content (shape-csv.ts). */
  csv?: CsvRead;
}

/** One input, once read (and once its pass has run: verdicts, repair, counted). */
export interface InputDone {
  name: string;
  t: ShapeTables;
  /** Its fetched file(s): one zip or manifest, or the text files read together. */
  files: FetchedFile[];
  staged: ContentStaged;
  /** Milliseconds its read took. */
  readMs: number;
  verdicts: Record<string, number>;
  repair: RepairResult | null;
  /** What the input's own `counted` step returned. */
  counted: unknown;
  /** The declared checks over its kept rows (engine-counted inputs). */
  checks: CheckCounts;
}

/** The run as the pipeline's steps after the read see it (builds, facts). */
export interface RunStep<S = unknown> {
  /** The load's own connection. */
  client: pg.ClientBase;
  ctx: RunContext;
  asOf: string;
  snapshotId: number;
  /** The pipeline's state for this load (InputsSpec.state). */
  state: S;
  facts: QualityFacts;
  /** Times steps into the normalise stage's ledger detail (`steps`). */
  steps: StepTimer;
  /** The inputs read, in declaration order (the first is the main one). */
  inputs: InputDone[];
  input(name: string): InputDone | undefined;
  /** Relations built so far: their table and rows. */
  built: Record<string, { table: Sql; rows: number }>;
}

/** The run as a pipeline's own steps see it. */
export interface LoadStep {
  client: pg.ClientBase;
  ctx: RunContext;
  t: ShapeTables;
  /** The source file being loaded. */
  file: FetchedFile;
  /** The snapshot's as_of (yyyy-mm-dd). */
  asOf: string;
  /** The snapshot being built (a typed pass writes its snapshot_id column). */
  snapshotId: number;
  /** How the source came, once read: a delimited text (read.csv) or vector layers. */
  route?: 'csv' | 'layers';
  /** What the read stage staged (set once it has run). */
  staged?: ContentStaged;
}

/** What an input's pass sees: its connection, its tables, what was staged. */
export interface PassStep<S = unknown> extends LoadStep {
  route: 'csv' | 'layers';
  staged: ContentStaged;
  /** The input's name. */
  input: string;
  state: S;
  steps: StepTimer;
  /** Throws once another pass has failed: a pass of several statements calls it between them. */
  live(): void;
  /** Settles when another input's pass is done; fails with it, or with the load when that pass never runs (e.g. its read failed). */
  passed(input: string): Promise<void>;
  /** The inputs read so far. */
  inputs(name: string): InputDone | undefined;
}

/** One input as the skeleton runs it. */
export interface PlanInput {
  name: string;
  rel: Relation;
  required: boolean;
  /** Its file(s) among those fetched. */
  files(all: FetchedFile[]): FetchedFile[];
  tables(ctx: RunContext): ShapeTables;
  read: ShapeRead;
  /** Its own stager (null: read as a zip of layers or a text). */
  stage?(run: RunStep, files: FetchedFile[], table: Sql): Promise<ContentStaged | null>;
  personalData?: boolean;
  /** classify writes the declared columns themselves (typedColumns): checks and overflowed text are counted from its flags. */
  typed: boolean;
  /** Invalid polygons repaired into t.fix (classify joins it), or where they lie (the typed pass reads one table). */
  repair: 'fix' | 'in place' | null;
  classify(step: PassStep): Promise<void | { repair?: RepairResult }>;
  /** Verdict examples: the staged row or the typed one (`shown` columns), or none (personal data). */
  examples: { stage: boolean; shown?: readonly string[] | false };
  counted?(step: PassStep): Promise<unknown>;
  /** The staged rows are read no more after the pass: dropped on its connection. */
  dropStaged: boolean;
  /** The typed pass counts what did not convert and overflowed text itself: the engine counts only what the reader counted. */
  ownCounts: boolean;
  /** The rows the checks are counted over. */
  kept(t: ShapeTables): Sql;
  /** U+FFFD: counted in the staged text (a note, or a gate failure), not at all ('own'), or as the reader counted the strings ('reader'). */
  replacementChars: 'fail' | 'note' | 'own' | 'reader';
}

/** What a relation's build is this load: the statement (on a connection of the two), work beside it and after it. */
export interface BuildPlan {
  build: Task<unknown>;
  beside?: { label: string; task: Task<unknown> }[];
  after?: Task<unknown>;
}

export interface PlanOutput {
  rel: Relation;
  /** null: no rows to build from (the table is created from its template). */
  prepare(run: RunStep, table: Sql): Promise<BuildPlan | null>;
}

export interface Plan {
  /** Several inputs: the ledger and the report speak per input (`<NAME>: …`, `<name>:` prefixes). */
  perInput: boolean;
  inputs: PlanInput[];
  /** In build order; the main relation's rows are the snapshot's. */
  outputs: PlanOutput[];
  mainRelation: string;
  /** work_mem of the load's own connection (one input, classified on it: a large deduplication sort). */
  workMem?: string;
  /** Each input's pass overlaps the read on a second connection. */
  overlap: boolean;
  dropped?: readonly string[];
  state(): unknown;
  /** After the passes, their verdicts folded into the facts, before the builds. */
  passesDone?(run: RunStep): Promise<void>;
  /** The pipeline's counts, before the engine's overflowed cells (its counts join them). */
  counted?(run: RunStep): Promise<void>;
  /** What the pipeline found in its rows and relations, after the engine's counts, before the read notes. */
  checked?(run: RunStep): Promise<void>;
  /** The pipeline's own facts; a returned object is merged into them. */
  facts?(run: RunStep): Promise<object | void>;
}

type PassResult = Pick<InputDone, 'verdicts' | 'repair' | 'counted'>;

const NO_CHECKS = (): CheckCounts => ({ bad: {}, placeholder: {}, late: {} });

/** The one load: read, the passes, builds, indexes, facts. */
export async function runPlan(ctx: RunContext, plan: Plan, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const client = await ctx.pool.connect();
  // The passes that overlap the read (a second connection): abandoned on any failure.
  let ov: Overlap<InputDone, PassResult> | null = null;
  let unsettle: (e: unknown) => void = () => {};
  try {
    if (plan.workMem) await client.query(`SELECT set_config('work_mem', $1, false)`, [plan.workMem]);
    const present = plan.inputs.map((input) => ({ input, files: input.files(files) })).filter((p) => {
      if (p.files.length) return true;
      if (p.input.required) throw new AgroError('source_not_found', `${p.input.name}: no file among ${files.map((f) => f.name).join(', ') || 'none'}`);
      return false;
    });
    const done: InputDone[] = [];
    const byName = (name: string) => done.find((d) => d.name === name);
    const steps = stepTimer(client);
    const run: RunStep = {
      client, ctx, asOf: target.asOf, snapshotId: target.snapshotId, state: plan.state(), facts: emptyFacts(), steps,
      inputs: done, input: byName, built: {},
    };
    const passes = new Map(present.map((p) => [p.input.name, settledLater()]));
    // Once a pass fails or the load does, the passes not run yet never will: a pass waiting for one fails too.
    unsettle = (e) => {
      for (const p of passes.values()) p.reject(e);
    };
    const planOf = new Map<InputDone, PlanInput>();
    const pass = async (c: pg.ClientBase, d: InputDone, live: () => void): Promise<PassResult> => {
      const input = planOf.get(d)!;
      const settle = passes.get(d.name)!;
      try {
        const r = await runPass(c, run, input, d, live, present.length === 1, (name) => {
          const p = passes.get(name);
          if (!p) throw new Error(`${name} is not an input of this load`);
          return p.promise;
        });
        settle.resolve();
        return r;
      } catch (e) {
        unsettle(e);
        throw e;
      }
    };

    const t0 = performance.now();
    // On a failure the `finally` below abandons the passes under way.
    await ctx.stage(
      'read',
      async () => {
        ov = await overlapOn(ctx.pool, client, pass, { second: plan.overlap });
        for (const p of present) {
          ov.check();
          const d = await readInput(run, p.input, p.files);
          planOf.set(d, p.input);
          done.push(d);
          // The first input's pass goes first (the others may wait for it); then the heaviest, sized before its repair alters it.
          ov.push(d, done.length === 1 || !plan.overlap ? Infinity : await tableBytes(client, d.t.stage));
        }
        // A pass that failed while the last input was read fails the read.
        ov.check();
        return done;
      },
      () => (plan.perInput ? done.reduce((a, d) => a + d.staged.rows, 0) : done[0].staged.rows + (done[0].staged.csv?.badRows ?? 0)),
      () => (plan.perInput ? readDetail(done) : singleReadDetail(done[0].staged)),
    );
    const readEnd = performance.now() - t0;
    const main = done[0];

    const built = await ctx.stage(
      'normalise',
      async () => {
        // The passes not done while reading, on both connections now (heaviest first); their results in the inputs' order.
        const results = await ov!.finish();
        done.forEach((d, i) => Object.assign(d, results[i]));
        done.forEach((d, i) => addVerdicts(run.facts, d.verdicts, { dropped: plan.dropped, prefix: i === 0 ? '' : inputPrefix(d.name) }));
        await plan.passesDone?.(run);
        await buildAll(run, plan, target);
        return run.built[plan.mainRelation];
      },
      (r) => r.rows,
      () => (plan.perInput ? { steps: steps.timings, timeline: timeline(done, ov!.spans, readEnd) } : { verdicts: main.verdicts, repair: main.repair }),
    );

    // The last relation's indexes (the others' were built during normalise, each once its relation was in), then ANALYZE of each.
    const tables = plan.outputs.map((o, i) => ({ table: run.built[o.rel.name].table, indexes: i === plan.outputs.length - 1 ? o.rel.indexes : {} }));
    await ctx.stage('index', () => indexSnapshotTables(ctx.pool, client, tables), undefined, plan.perInput
      ? () => ({ built_during_normalise: Object.keys(steps.timings).filter((k) => plan.outputs.some((o) => k.startsWith(`${o.rel.name} index `))) })
      : undefined);

    await commonFacts(run, plan, planOf);
    const own = (await plan.facts?.(run)) ?? {};
    const facts = run.facts;
    // The main input's rejections and drops (the other inputs' verdicts carry their prefix):
    // read = loaded + rejected + dropped holds over the rows `read` counts.
    const others = done.slice(1).map((d) => inputPrefix(d.name));
    const mainOnly = (o: Record<string, number>) => sumKeys(o, (k) => !others.some((p) => k.startsWith(p)));
    if (main.staged.csv) placeCsvExamples(facts, main.staged.csv, (k) => !others.some((p) => k.startsWith(p)));
    inputRejectedShare(facts, done.slice(1), ctx.cfg.quality.maxRejectedShare);
    return {
      rowsRead: main.staged.rows + (main.staged.csv?.badRows ?? 0),
      rowsLoaded: built.rows,
      rowsRejected: mainOnly(facts.rejected),
      rowsDropped: mainOnly(facts.dropped),
      facts: { ...facts, ...own },
      fingerprint: main.staged.fingerprint,
    };
  } catch (e) {
    unsettle(e);
    throw e;
  } finally {
    await (ov as Overlap<InputDone, PassResult> | null)?.abandon();
    if (plan.workMem) await client.query('RESET work_mem').catch(() => {});
    client.release();
  }
}

/** The sum of the counts whose key `keep` keeps. */
const sumKeys = (o: Record<string, number>, keep: (k: string) => boolean) => sum(Object.fromEntries(Object.entries(o).filter(([k]) => keep(k))));

/**
 * The 1 % rule of contract §2 on each further input (SICAR's theme zips): the report's counts
 * are the main relation's, so a theme whose polygons were mostly rejected (their hectares
 * missing from every property) published unnoticed. Its rejections carry its prefix.
 */
function inputRejectedShare(facts: QualityFacts, inputs: InputDone[], threshold: number): void {
  for (const d of inputs) {
    const read = d.staged.rows + (d.staged.csv?.badRows ?? 0);
    const rejected = sumKeys(facts.rejected, (k) => k.startsWith(inputPrefix(d.name)));
    if (read === 0 || rejected / read <= threshold) continue;
    facts.failures.push({
      rule: 'input_rejected_share',
      message: `${d.name}: ${rejected} of ${read} rows rejected (${((rejected / read) * 100).toFixed(2)} %)`,
      value: rejected / read,
      threshold,
    });
  }
}

/** Reads one input into its staging table: its own stager, a text, or a zip's layers. */
async function readInput(run: RunStep, input: PlanInput, files: FetchedFile[]): Promise<InputDone> {
  const { client, ctx } = run;
  const t = input.tables(ctx);
  const r0 = performance.now();
  let staged = input.stage ? await input.stage(run, files, t.stage) : null;
  if (!staged && input.read.csv) {
    staged = await stageByContent(client, ctx, files, t.stage, input.rel, { srid: input.read.srid, csv: input.read.csv, personalData: input.personalData });
  } else if (!staged) {
    const layers = await layersFromZip(files[0].path, ctx.workDir, { srid: input.read.srid, limits: ctx.cfg.zip, maxDepth: input.read.maxDepth });
    // Checked before a row is staged.
    input.read.refuse?.(layers, files[0]);
    staged = { layers, ...(await stageLayers(client, t.stage, layers, input.rel.staging)) };
  }
  return { name: input.name, t, files, staged, readMs: Math.round(performance.now() - r0), verdicts: {}, repair: null, counted: undefined, checks: NO_CHECKS() };
}

/** An input's pass: repair, the pipeline's typed pass, verdicts (with examples), its own counts, its checks. */
async function runPass(
  c: pg.ClientBase, run: RunStep, input: PlanInput, d: InputDone, live: () => void, alone: boolean, passed: (name: string) => Promise<void>,
): Promise<PassResult> {
  const { ctx, steps } = run;
  const { t } = d;
  const step: PassStep = {
    client: c, ctx, t, file: d.files[0], asOf: run.asOf, snapshotId: run.snapshotId, route: d.staged.csv ? 'csv' : 'layers', staged: d.staged,
    input: d.name, state: run.state, steps, live, passed, inputs: run.input,
  };
  // Alone, the validity scan is split over two connections (the reader being done).
  const split = alone ? { pool: ctx.pool } : {};
  let repair: RepairResult | null = null;
  if (input.repair === 'fix') repair = await repairInvalidPolygons(c, t.stage, t.fix, ctx.cfg.repairTimeoutMs, split);
  if (input.repair === 'in place') repair = await steps.time(`repair ${d.name}`, () => repairInPlace(c, t.stage, ctx.cfg.repairTimeoutMs, split));
  live();
  repair = (await input.classify(step))?.repair ?? repair;
  live();
  // The typed table holds the repair status from here on; the staged row goes back to what was read (as the examples show it).
  if (input.repair === 'in place') await dropRepairColumn(c, t.stage);
  const verdicts = await countVerdicts(c, t.classified, input.examples.stage ? t.stage : undefined, input.examples.shown);
  const counted = await input.counted?.(step);
  // Staged rows read no more are dropped here, while the other connection works, rather than with the run's cleanup.
  if (input.dropStaged) await dropStagedTable(c, t.stage);
  return { verdicts, repair, counted };
}

/**
 * Each relation in order, built from its rows beside the pipeline's own work (two connections),
 * then checked against its template; the indexes of all but the last on a third connection.
 */
async function buildAll(run: RunStep, plan: Plan, target: SnapshotTarget): Promise<void> {
  const { client, ctx, steps } = run;
  const timed = (label: string, task: Task<unknown>): Task<unknown> => (c) => steps.time(label, () => task(c));
  // A relation's indexes need only its rows: they start on a connection of their own as soon as
  // its build ends, beside what still runs on the two connections (the pipeline's own work, the
  // next relation's build), instead of waiting for it (measured 0.8 s of a 46 s SICAR load).
  // The last relation's are the index stage's.
  const early: Promise<void>[] = [];
  let earlyFailure: { e: unknown } | undefined;
  const indexEarly = (name: string, table: Sql, rel: Relation) => {
    const tasks = indexTasks(table, rel.indexes);
    if (!tasks.length) return;
    early.push((async () => {
      const c = await ctx.pool.connect();
      try {
        for (const { name: ix, task } of tasks) await timed(`${name} index ${ix}`, task)(c);
      } finally {
        c.release();
      }
    })().catch((e) => {
      earlyFailure ??= { e };
    }));
  };
  try {
    for (const [i, o] of plan.outputs.entries()) {
      if (earlyFailure) break;
      const name = o.rel.name;
      const last = i === plan.outputs.length - 1;
      const table = tableName(await target.table(name));
      const b = await o.prepare(run, table);
      const indexes = () => (last ? undefined : indexEarly(name, table, o.rel));
      if (!b) {
        await createFromTemplate(client, table, name);
        indexes();
      } else {
        const build: Task<unknown> = (c) => timed(name, b.build)(c).then(indexes);
        await onTwoConnections(ctx.pool, client, [build, ...(b.beside ?? []).map((x) => timed(x.label, x.task))]);
      }
      await b?.after?.(client);
      run.built[name] = { table, rows: await checkSnapshotTable(client, name, table) };
    }
  } finally {
    // Never return with an index build still running on a pooled connection. A failed build's
    // error wins (it propagates from here); else a failed index's.
    await Promise.all(early);
  }
  if (earlyFailure) throw earlyFailure.e;
}
