// The one pipeline shape. A pipeline declares what is its own: where its file is and what it
// is called (SourceLayout), the relation it fills (defineRelation: columns, conversions,
// indexes), its classify SQL (why each staged row is kept or not, with its key and final
// geometry), the facts only it knows, and the overlay it is for CAR properties. The engine
// runs the skeleton the same way for every source, like pg-boss's manager runs what its
// plans supply:
//
//   download  resolve the source once (ctx.source), pick the file (one picker for local and
//             listed folders), fetch it into the raw store
//   read      the zip's layers (layersFromZip: each member inflated once), staged through COPY
//             with the relation's staging fields; a missing required field fails here
//   normalise repair invalid polygons row by row (when declared), classify (the pipeline's
//             SQL, one typed pass), build the snapshot from the declaration, check it against
//             its template
//   index     the declared indexes, ANALYZE
//   facts     verdicts, repairs, layers, missing and unknown fields, empty values, conversions
//             that failed (kept raw in extra), implausible dates, overflowed cells, U+FFFD;
//             then the pipeline's own facts
import type pg from 'pg';
import { countShapefileOverflows } from './dbf-overflow.ts';
import type { FetchedFile } from './download.ts';
import { encodingNotes, layersFromZip, readerNote } from './layers.ts';
import { checkSnapshotTable, countNulls, countVerdicts, indexSnapshotTable } from './load-steps.ts';
import type { Overlay } from './overlaps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from './pipeline.ts';
import { addCounts, addLayerFacts, addRepairFacts, addVerdicts, describeLayer, emptyFacts, sum, type QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import { repairInvalidPolygons, type RepairResult } from './repair.ts';
import { fetchOneFile, fileDay, isListedFolder, resolveListedSource, resolveSource, type SourceLayout } from './source-files.ts';
import { addCsvFacts, stageByContent, type ContentStaged, type CsvRead } from './shape-csv.ts';
import { stageLayers } from './stage-vector.ts';
import { streamedPipeline, type StreamedPipeline, type StreamedShapeSpec } from './shape-stream.ts';
import {
  buildSnapshot, countChecks, countOverflowedText, countReplacementChars, okRows, type CheckCounts, type RunValues, type ShapeTables,
} from './sql/shape.ts';
import { buildFromTyped, countTypedChecks, countTypedOverflows, typedExampleColumns } from './sql/typed.ts';
import type { VectorLayer } from './vector-reader.ts';
import { AgroError } from '../errors.ts';
import { sqlText, tableName, type Sql } from '../sql.ts';

export type { RunValues, ShapeTables } from './sql/shape.ts';

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
  };
  read: {
    /** SRID assumed for a layer without a .prj. */
    srid: number;
    /** Levels of zips inside the zip that are searched (1: the zip alone). */
    maxDepth?: number;
    /** Refuses the layers before anything is staged (e.g. a CRS that must not be guessed). */
    refuse?: (layers: VectorLayer[], file: FetchedFile) => void;
    /** The source may be a delimited text (or a zip holding one) instead of shapefiles: told by content (shape-csv.ts). */
    csv?: CsvRead;
  };
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
}

export type ShapedPipeline = Pipeline & { key: string; spec: ShapeSpec };

/** The download stage: the source resolved once, one file picked and fetched. */
async function fetchFile(ctx: RunContext, spec: ShapeSpec): Promise<FetchedFile[]> {
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

/**
 * Overflowed cells: numeric DBF fields from the bytes (GDAL reads them as NULL) — as the streaming
 * reader counted them while reading, else one pass over each DBF —, other staged text by etl.is_overflow.
 */
async function overflowCounts(client: pg.ClientBase, rel: Relation, stage: Sql, staged: ContentStaged, typed?: Sql): Promise<Record<string, number>> {
  const canonical = (src: string) => rel.staging.find((f) => f.aliases.includes(src))?.name ?? src;
  const out: Record<string, number> = {};
  for (const l of staged.layers) {
    const counted = staged.overflowed ? (staged.overflowed[l.name] ?? {}) : await countShapefileOverflows(l.file);
    for (const [src, n] of Object.entries(counted)) out[canonical(src)] = (out[canonical(src)] ?? 0) + n;
  }
  // A typed pass listed them per row (no second scan of the staged text).
  const text = (typed && (await countTypedOverflows(client, typed))) || (await countOverflowedText(client, stage, rel.staging.map((f) => f.name)));
  for (const [c, n] of Object.entries(text)) out[c] = (out[c] ?? 0) + n;
  return out;
}

/** The facts every shaped load reports the same way. */
async function commonFacts(step: FactsStep, spec: ShapeSpec, repair: RepairResult | null): Promise<void> {
  const { client, t, facts, staged, verdicts } = step;
  const rel = spec.relation;
  addVerdicts(facts, verdicts, { dropped: spec.dropped });
  if (repair) addRepairFacts(facts, repair);
  facts.geometry.empty = verdicts.no_geometry ?? 0;
  facts.geometry.outsideBrazil = verdicts.outside_brazil ?? 0;
  if (staged.layers.length) addLayerFacts(facts, staged.layers);
  if (staged.csv) addCsvFacts(facts, staged.csv);
  facts.fields.missingOptional = staged.missingOptional.filter((n) => rel.reportedMissing.has(n));
  facts.fields.unknown = staged.unknown;
  if (staged.layers.length > 1) facts.notes.push(`${staged.layers.length} shapefiles in the zip, loaded together: ${staged.layers.map((l) => l.name).join(', ')}`);
  if (facts.geometry.sridAssumed) facts.notes.push(`a layer had no .prj: EPSG:${spec.read.srid} (SIRGAS 2000) assumed`);
  facts.notes.push(...encodingNotes(staged.layers));
  if (staged.reader) facts.notes.push(readerNote({ reader: staged.reader, deleted: staged.deleted ?? 0, unparsed: staged.unparsed ?? 0 }));
  if (staged.unknown.length) step.ctx.log.warn({ columns: staged.unknown }, `source columns without a mapping, ${rel.columns.some((c) => c.role === 'extra') ? 'kept in extra' : 'not loaded'}`);

  if (rel.counted.length) facts.fields.empty = await countNulls(client, step.target, rel.counted);
  const { bad, placeholder, late } = step.checks;
  const byName = new Map(rel.checked.map((c) => [c.name, c]));
  for (const [col, n] of Object.entries(bad)) {
    const rule = byName.get(col)!.rule;
    if (rule.isDate) facts.dates.unparseable[col] = n;
    else {
      facts.notes.push(`${col}: ${n} value(s) are ${rule.what} (loaded as NULL, source text kept in extra)`);
      addCounts(facts, 'unparsed', { [col]: n });
    }
  }
  Object.assign(facts.dates.placeholders, placeholder);
  addCounts(facts, 'implausible', late);
  if (facts.dates.implausible) facts.notes.push(`dates after the release date loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
  addCounts(facts, 'overflowed', await overflowCounts(client, rel, t.stage, staged, spec.typed ? t.classified : undefined));
  if (facts.fields.overflowed) facts.notes.push(`overflowed cells (a run of asterisks: no value, loaded as NULL) per field: ${JSON.stringify(facts.fields.overflowed)}`);

  if (spec.replacementChars === 'own') return;
  const fffd = await countReplacementChars(client, t.stage, rel.staging.map((f) => f.name));
  const total = sum(fffd);
  facts.encoding.replacementChars = total;
  if (total === 0) return;
  const where = Object.entries(fffd).map(([c, n]) => `${c} ${n}`).join(', ');
  facts.notes.push(`U+FFFD replacement characters per field: ${where}`);
  if (spec.replacementChars === 'fail') {
    facts.failures.push({
      rule: 'replacement_characters',
      message: `${total} U+FFFD replacement characters in the source text (${where}): accents were lost before publication`,
      value: total,
      threshold: 0,
    });
  }
}

async function load(ctx: RunContext, spec: ShapeSpec, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const rel = spec.relation;
  const file = files[0];
  const client = await ctx.pool.connect();
  try {
    if (spec.workMem) await client.query(`SELECT set_config('work_mem', $1, false)`, [spec.workMem]);
    const t: ShapeTables = {
      stage: tableName(ctx.stagingTable('src')),
      fix: tableName(ctx.stagingTable('fix')),
      classified: tableName(ctx.stagingTable('cls')),
      aux: (name) => tableName(ctx.stagingTable(name)),
    };
    const step: LoadStep = { client, ctx, t, file, asOf: target.asOf, snapshotId: target.snapshotId };

    const staged: ContentStaged = await ctx.stage(
      'read',
      async () => {
        if (spec.read.csv) return stageByContent(client, ctx, files, t.stage, rel, { srid: spec.read.srid, csv: spec.read.csv, personalData: spec.personalData });
        const layers = await layersFromZip(file.path, ctx.workDir, { srid: spec.read.srid, limits: ctx.cfg.zip, maxDepth: spec.read.maxDepth });
        spec.read.refuse?.(layers, file);
        return { layers, ...(await stageLayers(client, t.stage, layers, rel.staging)) };
      },
      (s) => s.rows + (s.csv?.badRows ?? 0),
      (s) => ({ layers: s.layers.map(describeLayer), ...(s.reader && { reader: s.reader }), unknown: s.unknown, ...(s.csv && { csv: { encoding: s.csv.encoding, bad_rows: s.csv.badRows, bad_row_lines: s.csv.badRowSamples, files: s.csv.files.map((f) => ({ name: f.name, rows: f.rows, bad_rows: f.badRows, fingerprint: f.fingerprint })) } }) }),
    );
    step.route = staged.csv ? 'csv' : 'layers';
    step.staged = staged;

    const kept = spec.kept ? spec.kept(t) : okRows(t.classified);
    const built = await ctx.stage(
      'normalise',
      async () => {
        // With the pool, the validity scan runs on two connections (both cores).
        let repair = spec.repairPolygons ? await repairInvalidPolygons(client, t.stage, t.fix, ctx.cfg.repairTimeoutMs, { pool: ctx.pool }) : null;
        repair = (await spec.classify(step))?.repair ?? repair;
        const shown = spec.personalData ? false : spec.typed ? typedExampleColumns(rel) : undefined;
        const verdicts = await countVerdicts(client, t.classified, spec.typed ? undefined : t.stage, shown);
        const table = tableName(await target.table(rel.name));
        if (spec.typed) await buildFromTyped(client, { rel, target: table, kept });
        else {
          await buildSnapshot(client, {
            rel, target: table, kept, stage: t.stage, joins: spec.joins?.(t) ?? sqlText(rel.joins),
            values: spec.values?.(file, target.asOf) ?? {}, asOf: target.asOf, snapshotId: target.snapshotId,
          });
        }
        const rows = await checkSnapshotTable(client, rel.name, table);
        return { table, repair, verdicts, rows };
      },
      (r) => r.rows,
      (r) => ({ verdicts: r.verdicts, repair: r.repair }),
    );

    await ctx.stage('index', () => indexSnapshotTable(client, built.table, rel.indexes));

    const facts = emptyFacts();
    const checks = spec.typed ? await countTypedChecks(client, { rel, kept }) : await countChecks(client, { rel, kept, stage: t.stage, asOf: target.asOf });
    const factsStep: FactsStep = { ...step, target: built.table, facts, staged, verdicts: built.verdicts, rowsLoaded: built.rows, checks };
    await commonFacts(factsStep, spec, built.repair);
    const own = (await spec.facts?.(factsStep)) ?? {};
    return {
      rowsRead: staged.rows + (staged.csv?.badRows ?? 0),
      rowsLoaded: built.rows,
      rowsRejected: sum(facts.rejected),
      facts: { ...facts, ...own },
      fingerprint: staged.fingerprint,
    };
  } finally {
    if (spec.workMem) await client.query('RESET work_mem').catch(() => {});
    client.release();
  }
}

/** A pipeline (contract §2) on the one shape: one file, one relation; or relations streamed from zips of records (`stream`: shape-stream.ts). */
export function shapedPipeline(spec: StreamedShapeSpec): StreamedPipeline;
export function shapedPipeline(spec: ShapeSpec): ShapedPipeline;
export function shapedPipeline(spec: ShapeSpec | StreamedShapeSpec): ShapedPipeline | StreamedPipeline {
  if ('stream' in spec) return streamedPipeline(spec);
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
    releaseDate: async (_ctx, files) => releaseDate(spec, files),
    load: (ctx, files, target) => load(ctx, spec, files, target),
  };
}

/** Rows named in a check query `SELECT name, n …`, as `"A" (2), "B" (1)` for messages. */
export function describeCounts(rows: { name: string; n: number }[]): string {
  return rows.map((r) => `"${r.name}" (${r.n})`).join(', ');
}
