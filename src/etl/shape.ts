// The one pipeline shape. A pipeline declares what is its own: where its files are and what
// they are called (SourceLayout), the relations it fills (defineRelation: columns,
// conversions, indexes), its typed SQL (why each staged row is kept or not, with its typed
// columns and final geometry), the facts only it knows, and the overlay it is for CAR
// properties. The engine runs the skeleton the same way for every source (shape-run.ts),
// like pg-boss's manager runs what its plans supply:
//
//   download  resolve the source once (ctx.source), pick the file (one picker for local and
//             listed folders), fetch it into the raw store — or the pipeline's own fetch
//   read      each input's layers (layersFromZip: each member inflated once), staged through
//             COPY with its relation's staging fields; a missing required field fails here
//   normalise repair invalid polygons, the typed pass (the pipeline's SQL), build each
//             relation from the typed rows, check it against its template
//   index     the declared indexes (two connections), ANALYZE
//   facts     verdicts, repairs, layers, missing and unknown fields, empty values, conversions
//             that failed (kept raw in extra), implausible dates, overflowed cells, U+FFFD;
//             then the pipeline's own facts
//
// Two forms of one declaration: `ShapeSpec`, one file and one relation (most sources), and
// `InputsSpec`, several inputs (each a file of its own, required or optional, staged into
// its own table and typed there; SICAR's four zips or its WFS pages) and several relations
// built from their typed rows. Both compile to one Plan that one loop runs (runPlan). A third,
// `StreamedShapeSpec` (shape-stream.ts), streams relations from zips of header-less records
// straight into their snapshot tables, with no staging table (Receita's 60 M establishments
// are not written twice); `shapedPipeline` takes all three.
import type { FetchedFile } from './download.ts';
import type { Overlay } from './overlaps.ts';
import type { Pipeline, RunContext, SnapshotTarget } from './pipeline.ts';
import type { QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import type { RepairResult } from './repair.ts';
import { fetchOneFile, fileDay, isListedFolder, resolveListedSource, resolveSource, type SourceLayout } from './source-files.ts';
import type { ContentStaged } from './shape-csv.ts';
import { streamedPipeline, type StreamedPipeline, type StreamedShapeSpec } from './shape-stream.ts';
import { runPlan, type BuildPlan, type LoadStep, type PassStep, type Plan, type PlanInput, type RunStep, type ShapeRead } from './shape-run.ts';
import { buildSnapshot, okRows, type CheckCounts, type RunValues, type ShapeTables } from './sql/shape.ts';
import { buildFromTyped, buildSelected, typedExampleColumns } from './sql/typed.ts';
import { AgroError } from '../errors.ts';
import { sqlText, tableName, type Sql } from '../sql.ts';

export type { InputDone, LoadStep, PassStep, RunStep, ShapeRead } from './shape-run.ts';
export type { RunValues, ShapeTables } from './sql/shape.ts';

/** What the pipeline's facts step sees besides the run. */
export interface FactsStep extends LoadStep {
  /** The built snapshot table. */
  target: Sql;
  facts: QualityFacts;
  staged: ContentStaged;
  verdicts: Record<string, number>;
  rowsLoaded: number;
  checks: CheckCounts;
}

export interface ShapeSpec {
  /** Pipeline name (contract §2). */
  name: string;
  relation: Relation;
  source: SourceLayout & {
    /** The publisher's release date carried by the file name (yyyy-mm-dd), when it has one. */
    releaseDate?: (fileName: string) => string | null;
    /** Without a date in the name: Last-Modified, then a local file's modification time. */
    fileDates?: boolean;
    /** The release date from every fetched file (e.g. the newest Last-Modified of several), instead of the above. */
    filesDate?: (files: FetchedFile[]) => string | null;
    /**
     * The last day the source's own dates may fall on, when it is not the as_of itself: a release
     * named by its month (as_of its first day) holds dates of the whole month. Dates after it are
     * implausible (contract §3); the snapshot's as_of stays as it is.
     */
    datesUntil?: (fileName: string, asOf: string) => string;
  };
  read: ShapeRead;
  /** Invalid polygons are repaired row by row (t.fix) before classify. */
  repairPolygons?: boolean;
  /**
   * Creates t.classified (src_seq, verdict, the key, the final geometry): the pipeline's own SQL.
   * A pipeline that repairs its own geometry table (not t.stage) returns the repair's counts.
   */
  classify(step: LoadStep): Promise<void | { repair?: RepairResult }>;
  /**
   * One typed pass: classify writes the declared columns themselves into t.classified
   * (typedColumns, src/etl/sql/typed.ts), the build reads t.classified alone and the checks
   * are counted from its flags; verdict examples come from the typed rows, personal columns left out.
   */
  typed?: boolean;
  /** The kept rows the build reads as `c` (default: classified rows whose verdict is 'ok'). */
  kept?: (t: ShapeTables) => Sql;
  /** Joins the relation's columns read besides c and s, naming the run's staging tables. */
  joins?: (t: ShapeTables) => Sql;
  /** work_mem of the load's connection (a large deduplication sort), reset when the load ends. */
  workMem?: string;
  /** Personal data: rejected rows are counted and referred to by number, never shown (no examples); CPFs masked in read errors. */
  personalData?: boolean;
  /** Per-run values the columns read as `v.<name>`. */
  values?: (file: FetchedFile, asOf: string) => RunValues;
  /** Verdicts that drop a row by design (reported, not rejected), e.g. duplicate_key. */
  dropped?: string[];
  /** U+FFFD in the source text: a gate failure ('fail', SOURCES §4.2 for FUNAI), a note, or the pipeline's own facts. */
  replacementChars?: 'fail' | 'note' | 'own';
  /** Facts and gate failures only this pipeline knows; its return value is merged into the facts (e.g. { ibge: … }). */
  facts?: (step: FactsStep) => Promise<object | void>;
  /** Overlay for CAR properties (dataset and relation are this pipeline's). */
  overlay?: Omit<Overlay, 'dataset' | 'relation' | 'idColumn'> & { idColumn?: string };
  /** Snapshots kept per UF (ctx.scope), like sicar's; default national. */
  scopedByUf?: boolean;
  /** Overrides the download stage (a source that is not one file in a folder). */
  fetch?: (ctx: RunContext) => Promise<FetchedFile[]>;
  /** Its own stager, for a fetched file that is neither a text nor a zip (e.g. a paged download's manifest); null: read by content. */
  stage?: (run: RunStep, file: FetchedFile, table: Sql) => Promise<ContentStaged | null>;
  /** Facts about how the source was obtained (its route), merged into etl.snapshots.source. */
  sourceInfo?: Pipeline['sourceInfo'];
  /** What the load reads besides the file, part of the source's identity (Pipeline.sourceParts). */
  sourceParts?: Pipeline['sourceParts'];
}

export type ShapedPipeline = Pipeline & { key: string; spec: ShapeSpec };

/** One input of a source of several files: a file of its own, staged into its own table (`<name>`) and typed there (`<name>_typed`). */
export interface ShapeInput<S = unknown> {
  /** Names its tables, its ledger entries and its facts (`<NAME>: ` notes; `<name>:` verdicts and fields, but for the first input). */
  name: string;
  /** Staged with this relation's staging fields. */
  relation: Relation;
  /** Without its file the load fails (required) or goes on without it (optional). */
  required?: boolean;
  /** Whether a fetched file is this input's. */
  file(f: FetchedFile): boolean;
  read: ShapeRead;
  /** Its own stager, for a file that is not a zip of layers (e.g. WFS pages' manifest); null: read the zip. */
  stage?(run: RunStep<S>, file: FetchedFile, table: Sql): Promise<ContentStaged | null>;
  /**
   * The typed pass, after the repair in place (t.stage has a `repair` column: NULL, 'repaired',
   * 'empty', 'rejected'): creates t.classified with src_seq, verdict ('ok' or the reason) and the
   * typed columns the relations' builds select. It counts what did not convert itself.
   */
  typed(step: PassStep<S>): Promise<void>;
  /** The pipeline's counts of the input's typed rows, in its pass (e.g. SICAR's dates): `InputDone.counted`. */
  counted?(step: PassStep<S>): Promise<unknown>;
  /** The staged rows are read no more after the pass: dropped then, while the other connection works. */
  dropStaged?: boolean;
}

/** One relation of a source of several inputs, built from typed rows. */
export interface ShapeOutput<S = unknown> {
  relation: Relation;
  /**
   * What its declared columns select from (`s`: the kept typed rows, with whatever the pipeline
   * joins), work of the pipeline's own to run beside the build (on the other connection) and
   * after it; null: nothing to build from (the table is created from its template).
   */
  from(run: RunStep<S>, table: Sql): Promise<({ from: Sql } & Omit<BuildPlan, 'build'>) | null>;
}

/** A source of several inputs and relations on the one shape (SICAR); `S` is the pipeline's state of one load. */
export interface InputsSpec<S = unknown> {
  name: string;
  /** Snapshots kept per UF (ctx.scope). */
  scopedByUf?: boolean;
  /** In the order read; the first is the main one (its rows are the snapshot's rows read, its layers give SRID and encoding). */
  inputs: ShapeInput<S>[];
  /** In build order: each is built beside the previous one's indexes. */
  relations: ShapeOutput<S>[];
  /** The relation whose rows are the snapshot's. */
  mainRelation: string;
  /** The download stage. */
  fetch(ctx: RunContext): Promise<FetchedFile[]>;
  releaseDate?(files: FetchedFile[]): string | null;
  sourceInfo?(files: FetchedFile[]): Promise<Record<string, unknown>>;
  /** Verdicts that drop a row by design (reported, not rejected). */
  dropped?: string[];
  /** The pipeline's state of one load (tables it names, what its steps hand each other). */
  state(): S;
  /** After the typed passes, their verdicts in the facts, before the builds (e.g. which themes are built). */
  passesDone?(run: RunStep<S>): Promise<void>;
  /** The pipeline's counts (dates, numbers, its own `fields.overflowed`), before the engine's overflowed cells join them. */
  counted?(run: RunStep<S>): Promise<void>;
  /** What the pipeline finds in its rows and relations (links, codes, orphans), after the engine's counts, before its read notes. */
  checked?(run: RunStep<S>): Promise<void>;
  /** Facts only this pipeline knows, last; a returned object is merged into the facts. */
  facts?(run: RunStep<S>): Promise<object | void>;
}

/** The download stage: the source resolved once, one file picked and fetched. */
export async function fetchFile(ctx: RunContext, spec: Pick<ShapeSpec, 'name' | 'source' | 'read'>): Promise<FetchedFile[]> {
  if (!ctx.source) {
    const env = `AGRO_SOURCE_${spec.name.toUpperCase().replace(/-/g, '_')}`;
    throw new AgroError('usage', `${spec.name} has no configured source: pass --source <file, folder or URL> or set ${env}`);
  }
  const { uri, name } = isListedFolder(ctx.source, spec.source) ? await resolveListedSource(ctx.source, spec.source, ctx) : resolveSource(ctx.source, spec.source);
  return fetchOneFile(ctx, uri, { expect: spec.read.csv && !/\.zip$/i.test(name) ? 'csv' : 'zip', name });
}

function releaseDate(spec: ShapeSpec, files: FetchedFile[]): string | null {
  const f = files[0];
  if (!f) return null;
  if (spec.source.filesDate) return spec.source.filesDate(files);
  return spec.source.releaseDate?.(f.name) ?? (spec.source.fileDates ? fileDay(f) : null);
}

/** The one-file form as the skeleton runs it: one input (tables src, fix, cls), one relation. */
function planOfOne(spec: ShapeSpec): Plan {
  const rel = spec.relation;
  const kept = (t: ShapeTables) => (spec.kept ? spec.kept(t) : okRows(t.classified));
  const input: PlanInput = {
    name: spec.name, rel, required: true, files: (all) => all, read: spec.read, personalData: spec.personalData,
    stage: spec.stage && ((run, files, table) => spec.stage!(run, files[0], table)),
    tables: (ctx) => ({
      stage: tableName(ctx.stagingTable('src')),
      fix: tableName(ctx.stagingTable('fix')),
      classified: tableName(ctx.stagingTable('cls')),
      aux: (name) => tableName(ctx.stagingTable(name)),
    }),
    typed: spec.typed === true,
    repair: spec.repairPolygons ? 'fix' : null,
    classify: (step) => spec.classify(step),
    examples: { stage: !spec.typed, shown: spec.personalData ? false : spec.typed ? typedExampleColumns(rel) : undefined },
    dropStaged: false,
    ownCounts: false,
    kept,
    replacementChars: spec.replacementChars ?? 'note',
  };
  return {
    perInput: false,
    inputs: [input],
    outputs: [{
      rel,
      async prepare(run, table) {
        const d = run.inputs[0];
        if (spec.typed) return { build: (c) => buildFromTyped(c, { rel, target: table, kept: kept(d.t) }) };
        return {
          build: (c) => buildSnapshot(c, {
            rel, target: table, kept: kept(d.t), stage: d.t.stage, joins: spec.joins?.(d.t) ?? sqlText(rel.joins),
            values: spec.values?.(d.files[0], run.asOf) ?? {}, asOf: run.asOf, snapshotId: run.snapshotId,
          }),
        };
      },
    }],
    mainRelation: rel.name,
    workMem: spec.workMem,
    overlap: false,
    dropped: spec.dropped,
    state: () => undefined,
    async facts(run) {
      const d = run.inputs[0];
      const b = run.built[rel.name];
      return spec.facts?.({
        client: run.client, ctx: run.ctx, t: d.t, file: d.files[0], asOf: run.asOf, snapshotId: run.snapshotId, route: d.staged.csv ? 'csv' : 'layers',
        staged: d.staged, target: b.table, facts: run.facts, verdicts: d.verdicts, rowsLoaded: b.rows, checks: d.checks,
      });
    },
  };
}

/** The several-inputs form as the skeleton runs it: each input repaired in place and typed on the second connection while the next is read. */
function planOfInputs<S>(spec: InputsSpec<S>): Plan {
  const inputs = spec.inputs.map((i): PlanInput => {
    const lower = i.name.toLowerCase();
    return {
      name: i.name, rel: i.relation, required: i.required === true, read: i.read,
      files: (all) => all.filter(i.file).slice(0, 1),
      tables: (ctx) => ({
        stage: tableName(ctx.stagingTable(lower)),
        fix: tableName(ctx.stagingTable(`${lower}_fix`)),
        classified: tableName(ctx.stagingTable(`${lower}_typed`)),
        aux: (name) => tableName(ctx.stagingTable(name)),
      }),
      stage: i.stage && ((run, files, table) => i.stage!(run as RunStep<S>, files[0], table)),
      typed: true,
      repair: 'in place',
      classify: (step) => i.typed(step as PassStep<S>),
      examples: { stage: true },
      counted: i.counted && ((step) => i.counted!(step as PassStep<S>)),
      dropStaged: i.dropStaged === true,
      ownCounts: true,
      kept: (t) => okRows(t.classified),
      replacementChars: 'reader',
    };
  });
  return {
    perInput: true,
    inputs,
    outputs: spec.relations.map((o) => ({
      rel: o.relation,
      async prepare(run, table) {
        const b = await o.from(run as RunStep<S>, table);
        if (!b) return null;
        return { build: (c) => buildSelected(c, { rel: o.relation, target: table, from: b.from, asOf: run.asOf, snapshotId: run.snapshotId }), beside: b.beside, after: b.after };
      },
    })),
    mainRelation: spec.mainRelation,
    overlap: true,
    dropped: spec.dropped,
    state: spec.state,
    passesDone: spec.passesDone && ((run) => spec.passesDone!(run as RunStep<S>)),
    counted: spec.counted && ((run) => spec.counted!(run as RunStep<S>)),
    checked: spec.checked && ((run) => spec.checked!(run as RunStep<S>)),
    facts: spec.facts && ((run) => spec.facts!(run as RunStep<S>)),
  };
}

/**
 * A pipeline (contract §2) on the one shape: one file and one relation, several inputs and
 * relations, or relations streamed from zips of records (`stream`: shape-stream.ts).
 */
export function shapedPipeline(spec: StreamedShapeSpec): StreamedPipeline;
export function shapedPipeline(spec: ShapeSpec): ShapedPipeline;
export function shapedPipeline<S>(spec: InputsSpec<S>): Pipeline & { key: string; spec: InputsSpec<S> };
export function shapedPipeline<S>(spec: ShapeSpec | InputsSpec<S> | StreamedShapeSpec): StreamedPipeline | (Pipeline & { key: string; spec: ShapeSpec | InputsSpec<S> }) {
  if ('stream' in spec) return streamedPipeline(spec);
  if ('inputs' in spec) {
    const main = spec.relations.find((o) => o.relation.name === spec.mainRelation)?.relation;
    if (!main) throw new Error(`${spec.name}: the main relation ${spec.mainRelation} is none of its relations (${spec.relations.map((o) => o.relation.name).join(', ')})`);
    // Inputs are found by name (passed(), inputs(), input()): two of one name would answer for each other.
    const names = spec.inputs.map((i) => i.name);
    const twice = names.filter((n, k) => names.indexOf(n) !== k);
    if (twice.length) throw new Error(`${spec.name}: input names must be unique; declared twice: ${[...new Set(twice)].join(', ')}`);
    return {
      name: spec.name,
      scopedByUf: spec.scopedByUf ?? false,
      relations: [main.name, ...spec.relations.map((o) => o.relation.name).filter((n) => n !== main.name)],
      mainRelation: main.name,
      key: main.key,
      spec,
      fetch: spec.fetch,
      ...(spec.sourceInfo && { sourceInfo: spec.sourceInfo }),
      releaseDate: async (_ctx, files) => spec.releaseDate?.(files) ?? null,
      load: (ctx, files, target) => runPlan(ctx, planOfInputs(spec), files, target),
    };
  }
  const rel = spec.relation;
  return {
    name: spec.name,
    scopedByUf: spec.scopedByUf ?? false,
    relations: [rel.name],
    mainRelation: rel.name,
    key: rel.key,
    spec,
    overlay: spec.overlay && { idColumn: rel.key, ...spec.overlay, dataset: spec.name, relation: rel.name },
    fetch: (ctx) => (spec.fetch ? spec.fetch(ctx) : fetchFile(ctx, spec)),
    ...(spec.sourceInfo && { sourceInfo: spec.sourceInfo }),
    ...(spec.sourceParts && { sourceParts: spec.sourceParts }),
    releaseDate: async (_ctx, files) => releaseDate(spec, files),
    load: (ctx, files, target) => runPlan(ctx, planOfOne(spec), files, datesUntil(spec, files, target)),
  };
}

/** The load's bound for plausible dates (target.asOf as the engine reads it): the as_of, or the source's own bound. */
function datesUntil(spec: ShapeSpec, files: FetchedFile[], target: SnapshotTarget): SnapshotTarget {
  const bound = files[0] && spec.source.datesUntil?.(files[0].name, target.asOf);
  return bound && bound !== target.asOf ? { ...target, asOf: bound } : target;
}

/** Rows named in a check query `SELECT name, n …`, as `"A" (2), "B" (1)` for messages. */
export function describeCounts(rows: { name: string; n: number }[]): string {
  return rows.map((r) => `"${r.name}" (${r.n})`).join(', ');
}
