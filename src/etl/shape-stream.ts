// The streamed route of the one shape (`shapedPipeline({ …, stream })`): relations whose
// source is header-less delimited records in zip members, copied straight into their
// snapshot tables, never staged (Receita's CNPJ month: 37 zips, ten relations, 60 M
// establishments that are not written twice). A pipeline declares each relation once with
// where the files hold it (streamedRelation: zips, member pattern, positional fields) and
// supplies its per-run hooks (StreamRun): each relation's line builder (record → COPY line),
// the facts of a table once it is indexed, the lines of a relation made after the others
// (a crosswalk that needs what they read), its own facts, gate and comparison with the
// previous snapshot. The engine runs the rest the same way for every such source:
//
//   check  every declaration against its template before any zip is read (a table filled
//          by COPY from the declaration is not rebuilt and checked after)
//   load   one ledger stage: the lookups first, one after another on one connection; then
//          the families, one connection and COPY each, in parallel within the pool's free
//          slots (the lead alone first, so its long index build runs while the others
//          load); every table created in its COPY's transaction (COPY FREEZE), indexed as
//          declared right after its own COPY (the statements spread over the connections
//          the pool has free), ANALYZEd, then its facts hook; the deferred relation last.
//          Per zip the members read and their records, per relation the malformed records
//          (wrong field count: counted with their record numbers, never copied), stray
//          quotes and bytes; a progress line every `progressMs`; each relation's timings
//          in the stage's detail.
//   facts  the pipeline's facts (stage 'facts'), its gate failures, its comparison with the
//          previous snapshot; the engine's sections: rows read, malformed records rejected,
//          the encoding (ISO-8859-1, the record reader's).
import { finished } from 'node:stream/promises';
import { Writable } from 'node:stream';
import type pg from 'pg';
import pgCopy from 'pg-copy-streams';
import type { Config } from '../config.ts';
import { AgroError } from '../errors.ts';
import { tableName, type Sql } from '../sql.ts';
import * as catalog from './catalog.ts';
import { writeOrWait } from './copy.ts';
import type { FetchedFile } from './download.ts';
import { indexStatements } from './load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from './pipeline.ts';
import { emptyFacts, type GateFailure, type QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import { checkDeclaredShape } from './sql/shape.ts';
import { analyze, copyFrozen, createLikeTemplate, indexMemoryForTransaction } from './sql/stream.ts';
import { emptySinkStats, readZipCsv, type CsvSinkStats, type RecordHandler } from './zip-csv-stream.ts';

/** A relation declared with where the source files hold it. */
export type StreamedRelation = Relation & {
  /** Names of the fetched zips (without .zip) that hold it. */
  zips: string[];
  /** Which members of those zips hold it (Receita: a suffix; the rest of the name changes every month). */
  member: RegExp;
  /** Fields of a record (its positional columns): a record with another count is malformed. */
  fieldCount: number;
};

/** A declaration (columns with `at` and `cell`) and where the files hold it. */
export function streamedRelation(rel: Relation, where: { zips: string[]; member: RegExp }): StreamedRelation {
  if (!rel.positional.length) throw new Error(`relation ${rel.name}: a streamed relation declares its record's fields (columns with at)`);
  return { ...rel, zips: where.zips, member: where.member, fieldCount: rel.positional.length };
}

/** The COPY columns, in the order a line builder writes them: the record's fields in record order, then the other columns in template order (derived ones, extra, snapshot_id). */
export const streamColumns = (rel: Relation): string[] => [...rel.positional.map((f) => f.name), ...rel.columns.filter((c) => c.at === undefined).map((c) => c.name)];

/** What a relation's read gave: each zip with the members read and their well-formed records, and the record reader's counts. */
export type RelationRead = CsvSinkStats & { files: { file: string; members: string[]; records: number }[] };

/** The run as the pipeline's hooks see it. */
export interface StreamStep {
  ctx: RunContext;
  target: SnapshotTarget;
  files: FetchedFile[];
  /** This run's snapshot table of each relation, once created. */
  tables: ReadonlyMap<string, Sql>;
}

/** What a pipeline supplies for one run (made by `begin`: it holds the run's own counters). */
export interface StreamRun {
  /** A relation's line builder: a well-formed record → its COPY line (streamColumns order); `flush` once its COPY is committed. */
  lines(rel: StreamedRelation): RecordHandler & { flush?: () => void };
  /** Queries of a relation's table, right after its indexes on its connection (while other families still load). */
  tableFacts?: Partial<Record<string, (client: pg.ClientBase, table: Sql) => Promise<void>>>;
  /** The deferred relation's COPY lines from its held records, once the families are loaded. */
  deferred?(client: pg.ClientBase, records: string[][]): Promise<Iterable<string>>;
  /** The facts stage: the pipeline's own facts from what was read; `previous` is the snapshot this one would replace. */
  facts(read: Record<string, RelationRead>, previous: catalog.SnapshotRow | null): Promise<void>;
  /** The pipeline's gate rules over its facts. */
  gate?(): GateFailure[];
  /** After the gate, when a previous snapshot exists: e.g. a diff against it (in its own stage). */
  compare?(previous: catalog.SnapshotRow): Promise<void>;
  /** Adds its counts and notes to the report's facts; returns its own sections (merged into them, e.g. `{ cnpj }`). */
  report(facts: QualityFacts): object;
}

/** The relations of a streamed source and how they load. */
export interface StreamSpec {
  /** Large relations: one connection and COPY each, in parallel within the pool's free slots. */
  families: StreamedRelation[];
  /** Of the families: copied first, alone, so that its long index build runs while the others load. */
  lead?: StreamedRelation;
  /** Small relations loaded before the families, one after another on one connection (lookups their facts join). */
  lookups: StreamedRelation[];
  /** Of the lookups: its records are held, not copied; its table is written after the families from `run.deferred`. */
  deferred?: StreamedRelation;
  /** How often the progress line is logged (ms). */
  progressMs(cfg: Config): number;
  /** A relation's name in the progress line (default its name). */
  label?(rel: StreamedRelation): string;
  /** The run's hooks (before any zip is read: e.g. from the files' member names). */
  begin(step: StreamStep): StreamRun | Promise<StreamRun>;
}

/** A pipeline on the streamed route (shapedPipeline with `stream`). */
export interface StreamedShapeSpec {
  /** Pipeline name (contract §2). */
  name: string;
  /** The main relation (a family or lookup of `stream`): its records are the snapshot's rows. */
  relation: StreamedRelation;
  /** The main relation's key the report counts added and removed keys by (default its declared key). */
  key?: string;
  /** Snapshots kept per UF (ctx.scope); default national. */
  scopedByUf?: boolean;
  /** The download stage: every file the relations are read from. */
  fetch(ctx: RunContext): Promise<FetchedFile[]>;
  /** The publisher's release date from the fetched files (yyyy-mm-dd). */
  releaseDate?(files: FetchedFile[]): string | null;
  stream: StreamSpec;
}

export type StreamedPipeline = Pipeline & { key: string; spec: StreamedShapeSpec };

/** Where a relation's load time went (the load stage's detail): ms since the stage began when its COPY ended (families), then ms of its indexes (with ANALYZE), each index, its facts queries. */
interface LoadTimings {
  copy_done_ms?: number;
  index_ms?: number;
  indexes?: Record<string, number>;
  facts_ms?: number;
}

const zipFile = (files: FetchedFile[], zip: string): FetchedFile => {
  const f = files.find((x) => x.name.toLowerCase() === `${zip.toLowerCase()}.zip`);
  if (!f) throw new AgroError('source_not_found', `${zip}.zip is not among the fetched files`);
  return f;
};

const discard = () => new Writable({ write: (_c, _e, cb) => cb() });

/** Reads the members of `rel` from its zips into `out`; a zip without such a member is malformed. */
async function readRelation(rel: StreamedRelation, files: FetchedFile[], out: Writable, onRecord: RecordHandler, stats: CsvSinkStats, ctx: RunContext, progress: { file: string }): Promise<RelationRead['files']> {
  const members: RelationRead['files'] = [];
  for (const zip of rel.zips) {
    const file = zipFile(files, zip);
    progress.file = file.name;
    const before = stats.records;
    const names = await readZipCsv(file.path, { pick: (n) => rel.member.test(n), fieldCount: rel.fieldCount, onRecord, out, stats, limits: ctx.cfg.zip });
    if (!names.length) throw new AgroError('malformed_source', `${file.name} holds no member named *${rel.member.source.replace(/\\/g, '').replace(/\$$/, '')}`);
    members.push({ file: file.name, members: names, records: stats.records - before });
  }
  return members;
}

/** COPY of one relation into a table created in the same transaction (FREEZE: no later rewrite of hint bits). */
async function copyRelation(client: pg.ClientBase, table: Sql, rel: StreamedRelation, feed: (out: Writable) => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await createLikeTemplate(client, table, rel.name);
    const stream = client.query(pgCopy.from(copyFrozen(table, streamColumns(rel))));
    const done = finished(stream);
    done.catch(() => {});
    try {
      await feed(stream);
    } catch (e) {
      stream.destroy(e as Error);
      throw e;
    }
    stream.end();
    await done;
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** A connection is free now (idle, or room to open one): checked and taken without an await between. */
const canBorrow = (pool: pg.Pool): boolean => pool.idleCount > 0 || pool.totalCount < (pool.options.max ?? 10);

/**
 * Families loaded at once: one connection each, leaving room in the pool for the run's lock
 * client, the ledger's writes and the catalogue's statements.
 */
const familySlots = (pool: pg.Pool, families: number): number => Math.max(1, Math.min(families, (pool.options.max ?? 10) - 3));

/**
 * The declared indexes of a loaded relation (the engine's statements: indexStatements), then
 * ANALYZE: built right after its COPY (so a family that finished early is indexed while the
 * others still load), never before the data, each with at least 256 MB to sort in.
 */
async function indexRelation(client: pg.ClientBase, rel: StreamedRelation, table: Sql, ctx: RunContext, timings: Record<string, LoadTimings>, pipeline: string): Promise<void> {
  const statements = indexStatements(table, rel.indexes);
  const t0 = Date.now();
  // A table's indexes are built at once, each on its own connection (GIN builds are not
  // parallel in PostgreSQL 15): the last family to finish its COPY is not indexed serially.
  // Only connections the pool has free are borrowed: waiting for one while holding `client`
  // deadlocks a small pool; what is not borrowed runs on `client`, one after the other.
  const conns: pg.ClientBase[] = [client];
  const borrowed: pg.PoolClient[] = [];
  try {
    while (conns.length < statements.length && canBorrow(ctx.pool)) {
      const c = await ctx.pool.connect();
      borrowed.push(c);
      conns.push(c);
    }
    // Every connection's statements end before any goes back (a failed one stops the others
    // after their current statement): a connection handed back mid-statement would run the
    // next user's queries inside this build's transaction.
    let stop = false;
    const settled = await Promise.allSettled(conns.map(async (c, k) => {
      for (let i = k; i < statements.length && !stop; i += conns.length) {
        const ix = statements[i];
        const t1 = Date.now();
        await c.query('BEGIN');
        try {
          await indexMemoryForTransaction(c);
          await c.query(ix.sql);
          await c.query('COMMIT');
        } catch (e) {
          stop = true;
          await c.query('ROLLBACK').catch(() => {});
          throw e;
        }
        ((timings[rel.name] ??= {}).indexes ??= {})[ix.name] = Date.now() - t1;
        ctx.log.debug({ table, index: ix.name, ms: Date.now() - t1 }, `${pipeline}: index built`);
      }
    }));
    const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure) throw failure.reason;
  } finally {
    for (const c of borrowed) c.release();
  }
  await analyze(client, table);
  (timings[rel.name] ??= {}).index_ms = Date.now() - t0;
}

/** Runs `fn` over `items`, at most `limit` at a time; rejects with the first failure once all have settled. */
async function mapLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}

const total = (stats: Iterable<CsvSinkStats>, of: (s: CsvSinkStats) => number): number => [...stats].reduce((a, s) => a + of(s), 0);

async function load(ctx: RunContext, spec: StreamedShapeSpec, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const s = spec.stream;
  const relations = [...s.families, ...s.lookups];
  const label = s.label ?? ((r: StreamedRelation) => r.name);
  const stats = new Map<string, CsvSinkStats>(relations.map((r) => [r.name, emptySinkStats()]));
  const members = new Map<string, RelationRead['files']>();
  const tables = new Map<string, Sql>();
  const progress = new Map<string, { file: string }>(relations.map((r) => [r.name, { file: '' }]));
  const timings: Record<string, LoadTimings> = {};
  const run = await s.begin({ ctx, target, files, tables });
  /** The relation's snapshot table of this run. */
  const tableOf = async (rel: StreamedRelation): Promise<Sql> => {
    const table = tableName(await target.table(rel.name));
    tables.set(rel.name, table);
    return table;
  };
  const read = async (rel: StreamedRelation, out: Writable, onRecord: RecordHandler): Promise<void> => {
    members.set(rel.name, await readRelation(rel, files, out, onRecord, stats.get(rel.name)!, ctx, progress.get(rel.name)!));
  };
  /** Its indexes, then its facts queries (when the pipeline has some for it). */
  const finish = async (c: pg.ClientBase, rel: StreamedRelation, table: Sql, stop?: () => boolean): Promise<void> => {
    if (stop?.()) return;
    await indexRelation(c, rel, table, ctx, timings, spec.name);
    const facts = run.tableFacts?.[rel.name];
    if (stop?.() || !facts) return;
    const t0 = Date.now();
    await facts(c, table);
    timings[rel.name].facts_ms = Date.now() - t0;
  };
  // A declaration its template does not match fails here, before any zip is read.
  for (const rel of relations) await checkDeclaredShape(ctx.pool, rel);

  const started = Date.now();
  const ticker = setInterval(() => {
    const secs = Math.max((Date.now() - started) / 1000, 0.001);
    const rows = total(stats.values(), (x) => x.records);
    const bytes = total(stats.values(), (x) => x.bytes);
    ctx.log.info({
      rows, bytes, rows_per_s: Math.round(rows / secs), mb_per_s: +(bytes / 2 ** 20 / secs).toFixed(1),
      files: Object.fromEntries(s.families.map((r) => [label(r), `${progress.get(r.name)!.file} (${stats.get(r.name)!.records} rows)`])),
    }, `${spec.name}: loading`);
  }, s.progressMs(ctx.cfg));
  ticker.unref();
  try {
    await ctx.stage('load', async () => {
      const held: string[][] = [];
      const client = await ctx.pool.connect();
      try {
        for (const rel of s.lookups) {
          if (rel === s.deferred) {
            await read(rel, discard(), (f) => (held.push(f), ''));
            continue;
          }
          const table = await tableOf(rel);
          const build = run.lines(rel);
          await copyRelation(client, table, rel, (out) => read(rel, out, build));
          build.flush?.();
          await finish(client, rel, table);
        }
      } finally {
        client.release();
      }
      // Families: one connection and COPY each; the first failure stops the others (their
      // streams are destroyed: a write waiting for drain on them fails instead of hanging).
      const streams: Writable[] = [];
      let failed: Error | null = null;
      let leadCopied = () => {};
      const leadReady = s.lead ? new Promise<void>((r) => (leadCopied = r)) : Promise.resolve();
      const order = s.lead ? [s.lead, ...s.families.filter((r) => r !== s.lead)] : s.families;
      await mapLimited(order, familySlots(ctx.pool, s.families.length), async (rel) => {
        if (rel !== s.lead) await leadReady;
        if (failed) throw failed;
        // Taken inside the try: a lead that gets no connection still lets the others go (they see `failed`).
        let c: pg.PoolClient | undefined;
        try {
          c = await ctx.pool.connect();
          const table = await tableOf(rel);
          const build = run.lines(rel);
          await copyRelation(c, table, rel, async (out) => {
            streams.push(out);
            if (failed) throw failed;
            await read(rel, out, build);
          }).finally(() => {
            if (rel === s.lead) leadCopied();
          });
          build.flush?.();
          timings[rel.name] = { copy_done_ms: Date.now() - started };
          // Its indexes and facts now, while the other families are still copying.
          await finish(c, rel, table, () => failed !== null);
        } catch (e) {
          if (!failed) {
            failed = e as Error;
            for (const x of streams) x.destroy(failed);
          }
          throw e;
        } finally {
          c?.release();
          if (rel === s.lead) leadCopied(); // also when the lead failed before its COPY: the others see `failed`
        }
      }).catch((e) => {
        throw failed ?? e;
      });
      // The deferred relation: its lines need what the families read.
      if (s.deferred) {
        const rel = s.deferred;
        if (!run.deferred) throw new Error(`${spec.name}: ${rel.name} is deferred but the run makes no lines for it`);
        const c = await ctx.pool.connect();
        try {
          const table = await tableOf(rel);
          const lines = await run.deferred(c, held);
          await copyRelation(c, table, rel, async (out) => {
            for (const line of lines) await writeOrWait(out, line);
          });
          await finish(c, rel, table);
        } finally {
          c.release();
        }
      }
    }, () => total(stats.values(), (x) => x.records), () => ({ timings }));
  } finally {
    clearInterval(ticker);
  }

  // ---- facts, gate, comparison with the snapshot this one would replace
  const current = await catalog.currentSnapshot(ctx.pool, spec.name, ctx.scope);
  const previous = current && current.snapshot_id !== target.snapshotId ? current : null;
  const byRelation = Object.fromEntries(relations.map((rel) => [rel.name, { ...stats.get(rel.name)!, files: members.get(rel.name) ?? [] }]));
  await ctx.stage('facts', () => run.facts(byRelation, previous));
  const facts = emptyFacts();
  facts.failures.push(...(run.gate?.() ?? []));
  if (previous && run.compare) await run.compare(previous);

  const malformed = total(stats.values(), (x) => x.malformed);
  if (malformed) facts.rejected.malformed_row = malformed;
  facts.encoding = { name: 'ISO-8859-1', assumed: false, replacementChars: 0 };
  const own = run.report(facts);
  return {
    rowsRead: total(stats.values(), (x) => x.records + x.malformed),
    rowsLoaded: total(stats.values(), (x) => x.records),
    rowsRejected: malformed,
    mainRows: stats.get(spec.relation.name)!.records,
    facts: Object.assign(facts, own),
    fingerprint: null,
  };
}

/** The Pipeline (contract §2) of a streamed declaration; shapedPipeline dispatches here. */
export function streamedPipeline(spec: StreamedShapeSpec): StreamedPipeline {
  const s = spec.stream;
  const relations = [...s.families, ...s.lookups];
  if (!relations.includes(spec.relation)) throw new Error(`${spec.name}: the main relation ${spec.relation.name} is none of stream's`);
  if (s.lead && !s.families.includes(s.lead)) throw new Error(`${spec.name}: the lead ${s.lead.name} is not a family`);
  if (s.deferred && !s.lookups.includes(s.deferred)) throw new Error(`${spec.name}: the deferred ${s.deferred.name} is not a lookup`);
  return {
    name: spec.name,
    scopedByUf: spec.scopedByUf ?? false,
    relations: relations.map((r) => r.name),
    mainRelation: spec.relation.name,
    key: spec.key ?? spec.relation.key,
    spec,
    fetch: (ctx) => spec.fetch(ctx),
    releaseDate: async (_ctx, files) => spec.releaseDate?.(files) ?? null,
    load: (ctx, files, target) => load(ctx, spec, files, target),
  };
}
