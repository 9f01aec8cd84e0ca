// One pipeline run end to end: download → read/normalise/load → quality gate → publish.
// Every stage is recorded in the ledger. A run holds an advisory lock for its whole
// life, so a run whose process died (SIGKILL, power loss) is recognisable: its lock
// is free while the ledger still says "running". The next run cleans up after it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { KNOWN_UFS, type Config } from '../config.ts';
import { brazilDay, isCalendarDate, todayInBrazil } from '../dates.ts';
import { AgroError, diskFullError, isAgroError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { connectOrFail, ident, isConnectionError } from '../db/pool.ts';
import { maskCpfsDeep } from '../privacy.ts';
import { progress } from '../progress.ts';
import * as catalog from './catalog.ts';
import { removePartials, type FetchedFile } from './download.ts';
import type { LoadResult, Pipeline, RunContext, RunOptions, SnapshotTarget, SourcePart } from './pipeline.ts';
import { qualifiedSnapshotTable } from './names.ts';
import { fileDay } from './source-files.ts';
import { ensureOverlaps, forgetOverlaps, involvesOverlaps } from './overlaps.ts';
import { applyRetention, dropSnapshotTables, publishSnapshot, resumeAutovacuum } from './publish.ts';
import { RUN_ALIVE_LOCK, RunLocks, endSessionsOf } from './run-locks.ts';
import { forgetQsaChanges } from './sql/qsa-changes.ts';
import { emptyFacts, evaluateGate, gateVerdict, measureGate, missingFieldFailure, renderHtml, sum, type ChangeSummary, type GateFailure, type QualityReport } from './quality.ts';
import { checkSnapshotText, measureText, mergeTextFailures } from './text-checks.ts';
import { sweepDeadTempDirs } from './temp-dirs.ts';


export interface Deps {
  cfg: Config;
  pool: pg.Pool;
  log: Logger;
  /** Pause points for tests that change the world mid-run (e.g. a rollback before publish). */
  hooks?: { beforePublish?(snapshotId: number): Promise<void> };
  /** Aborted (SIGTERM): the stage under way finishes, no further stage starts, nothing is published. */
  signal?: AbortSignal;
}

export interface RunOutcome {
  run_id: number;
  pipeline: string;
  uf: string | null;
  status: catalog.RunStatus;
  snapshot_id: number | null;
  as_of: string | null;
  rows_read: number;
  rows_loaded: number;
  rows_rejected: number;
  /** Rows left out by design (duplicate keys, other states): read = loaded + rejected + dropped. */
  rows_dropped: number;
  duration_ms: number;
  stages: Record<string, number>;
  forced: boolean;
  gate?: QualityReport['gate'];
  report?: string;
  message?: string;
  /** An unchanged run whose bytes are those of a snapshot an operator rolled back: that snapshot. */
  rolled_back?: { snapshot_id: number; rolled_back_at: string };
  error?: { code: string; message: string };
}

type ReadPart = SourcePart & { sha256: string };

/** The source's SHA-256: its one file's, else one over a line `name:sha256` per file and part (Pipeline.sourceParts), sorted. */
export function sourceChecksum(files: { name: string; sha256: string }[]): string {
  const lines = files.map((f) => `${f.name}:${f.sha256}`).sort();
  return files.length === 1 ? files[0].sha256 : crypto.createHash('sha256').update(lines.join('\n')).digest('hex');
}

/** The checksum of the files a snapshot recorded (etl.snapshots.source.files), its parts left out; null when it recorded none. */
function recordedFilesChecksum(s: catalog.SnapshotRow): string | null {
  const recorded = (s.source as { files?: { name: string; sha256: string }[] }).files;
  return recorded?.length ? sourceChecksum(recorded) : null;
}

export function reportPath(cfg: Config, snapshotId: number, ext = 'json') {
  return path.join(cfg.dataDir, 'reports', `${snapshotId}.${ext}`);
}

/** Writes the report's JSON and HTML files; like every report output, CPFs are masked. */
export function writeReportFiles(cfg: Config, r: QualityReport) {
  const safe = maskCpfsDeep(r);
  fs.mkdirSync(path.dirname(reportPath(cfg, r.snapshot_id)), { recursive: true });
  fs.writeFileSync(reportPath(cfg, r.snapshot_id), JSON.stringify(safe, null, 2));
  fs.writeFileSync(reportPath(cfg, r.snapshot_id, 'html'), renderHtml(safe));
}

/**
 * An --as-of date: a calendar date, and not in the future (a snapshot dated ahead would
 * stay the newest, win every retention and let any future-dated value through as plausible).
 */
export function checkAsOf(asOf: string): void {
  if (!isCalendarDate(asOf)) throw new AgroError('usage', `--as-of must be a calendar date (yyyy-mm-dd), got "${asOf}"`);
  if (asOf > todayInBrazil()) throw new AgroError('usage', `--as-of ${asOf} is in the future (today is ${todayInBrazil()} in Brazil)`);
}

/** The UF of a per-state run, validated (usage error naming the known ones). */
export function parseUf(pipeline: string, uf: string | undefined): string {
  if (!uf) throw new AgroError('usage', `${pipeline} needs --uf <UF> (one of ${KNOWN_UFS.join(', ')})`);
  const u = uf.trim().toUpperCase();
  if (!KNOWN_UFS.includes(u)) throw new AgroError('usage', `--uf "${uf}" is not a Brazilian state (known: ${KNOWN_UFS.join(', ')})`);
  return u;
}

async function dropStagingTables(db: pg.Pool | pg.ClientBase, runId: number) {
  const r = await db.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE $1`, [`r${runId}\\_%`]);
  for (const row of r.rows) await db.query(`DROP TABLE IF EXISTS stage.${ident(row.tablename)}`);
}

/**
 * How a dead run ends in the ledger: `killed`, unless its snapshot got past the publish
 * transaction before the process died (then what the snapshot became, and a note). A
 * backfill's good snapshot is kept out of retention here, as the backfill would have done
 * next (keepBackfilled): else the next nightlies' retention drops the past date it loaded.
 */
async function deadRunEnd(db: pg.ClientBase, runId: number): Promise<Parameters<typeof catalog.finishRun>[2]> {
  const r = await db.query(
    `SELECT s.snapshot_id, s.status, s.quality->'counts' AS counts, coalesce(r.options->>'backfill' = 'true', false) AS backfill
       FROM etl.snapshots s JOIN etl.runs r USING (run_id)
      WHERE s.run_id = $1 AND s.status IN ('published', 'superseded', 'rolled_back', 'loaded', 'blocked') ORDER BY s.snapshot_id DESC LIMIT 1`,
    [runId],
  );
  const s = r.rows[0];
  if (!s) return { status: 'killed', error: 'the process running this load died; cleaned up by a later run' };
  const status: catalog.RunStatus = s.status === 'blocked' || s.status === 'loaded' ? s.status : 'published';
  const kept = s.backfill && catalog.GOOD_STATUSES.includes(s.status) && (await catalog.setKept(db, s.snapshot_id, true));
  return {
    status, snapshotId: s.snapshot_id, read: s.counts?.read, loaded: s.counts?.loaded, rejected: s.counts?.rejected,
    error: `the process died after snapshot ${s.snapshot_id} was ${status}; ${kept ? `it is kept out of retention, as its backfill would have done (\`agro keep ${s.snapshot_id} --release\` gives it back); ` : ''}retention was left to a later run`,
  };
}

/**
 * Finds runs marked running whose process is gone (their alive-lock is free),
 * drops what they left (staging tables, half-loaded snapshot tables, temporary folders) and marks them killed.
 */
export async function cleanupDeadRuns(deps: Deps): Promise<number[]> {
  const cleaned: number[] = [];
  // what a process killed outside any run's bookkeeping left in os.tmpdir() (temp-dirs.ts)
  const swept = sweepDeadTempDirs();
  if (swept.length) deps.log.warn({ folders: swept }, 'removed the temporary folders of processes that are gone');
  const client = await connectOrFail(deps.pool);
  try {
    for (const run of await catalog.runningRuns(client, null, null, null)) {
      const got = (await client.query('SELECT pg_try_advisory_lock($1, $2) AS ok', [RUN_ALIVE_LOCK, run.run_id])).rows[0].ok;
      if (!got) continue; // alive
      try {
        await endSessionsOf(client, run);
        await dropStagingTables(client, run.run_id);
        const snaps = await client.query(`SELECT snapshot_id, tables FROM etl.snapshots WHERE run_id = $1 AND status = 'loading'`, [run.run_id]);
        for (const s of snaps.rows) {
          await dropSnapshotTables(client, s.tables);
          await forgetOverlaps(client, s.snapshot_id);
          await forgetQsaChanges(client, s.snapshot_id);
          await catalog.setSnapshotFields(client, s.snapshot_id, { status: 'failed' });
        }
        await catalog.failRunningStages(client, run.run_id, 'killed: the process running this stage died');
        await catalog.finishRun(client, run.run_id, await deadRunEnd(client, run.run_id));
        fs.rmSync(path.join(deps.cfg.dataDir, 'work', `run-${run.run_id}`), { recursive: true, force: true });
        deps.log.warn({ run_id: run.run_id, pipeline: run.pipeline, scope: run.scope }, 'cleaned up a dead run');
        cleaned.push(run.run_id);
      } finally {
        await client.query('SELECT pg_advisory_unlock($1, $2)', [RUN_ALIVE_LOCK, run.run_id]);
      }
    }
  } finally {
    client.release();
  }
  return cleaned;
}


async function changeAgainst(pool: pg.Pool | pg.ClientBase, pipeline: Pipeline, key: string | undefined, prev: catalog.SnapshotRow | null, newTable: string, rows: number): Promise<ChangeSummary> {
  if (!prev) return { previous_snapshot_id: null, previous_rows: null, rows, delta_share: null, added: null, removed: null };
  const prevTable = qualifiedSnapshotTable(pipeline.mainRelation, prev.snapshot_id);
  let added: number | null = null;
  let removed: number | null = null;
  if (key) {
    const k = ident(key);
    const r = await pool.query(
      `SELECT (SELECT count(*) FROM ${newTable} n WHERE NOT EXISTS (SELECT 1 FROM ${prevTable} o WHERE o.${k} = n.${k})) AS added,
              (SELECT count(*) FROM ${prevTable} o WHERE NOT EXISTS (SELECT 1 FROM ${newTable} n WHERE n.${k} = o.${k})) AS removed`,
    );
    added = r.rows[0].added;
    removed = r.rows[0].removed;
  }
  const prevRows = prev.rows ?? 0;
  return {
    previous_snapshot_id: prev.snapshot_id,
    previous_rows: prevRows,
    rows,
    delta_share: prevRows ? (rows - prevRows) / prevRows : null,
    added,
    removed,
  };
}

/** Drops what a run that ends before publishing loaded into its snapshot (tables, derived rows). */
async function discardSnapshotData(pool: pg.Pool, snapshotId: number): Promise<void> {
  // The catalogue lists every table of the snapshot (registered before it is created), derived ones included.
  const listed = (await catalog.getSnapshot(pool, snapshotId).catch(() => null))?.tables ?? [];
  await dropSnapshotTables(pool, listed).catch(() => {});
  await forgetOverlaps(pool, snapshotId).catch(() => {});
  await forgetQsaChanges(pool, snapshotId).catch(() => {});
}

/** What a run that read a source without a required column knows when it ends. */
interface MissingFieldEnd {
  pipeline: Pipeline;
  outcome: RunOutcome;
  force: boolean;
  /** The snapshot the run created (its data already discarded); null when the error came before it. */
  snapshotId: number | null;
  current: catalog.SnapshotRow | null;
  source: QualityReport['source'] | null;
}

/**
 * Contract §2: "required fields missing" is a quality-gate refusal. The run ends `blocked`
 * (exit 3) with the rule `required_field_missing` in its gate and report, and keeps the
 * reader's error (code and message, CPFs masked) in `error` for scripts that test its code.
 * No row can be loaded without its key or geometry, so --force does not override it: a forced
 * publish would make an empty or NULL-keyed snapshot current.
 */
async function blockOnMissingFields(deps: Deps, err: AgroError, m: MissingFieldEnd): Promise<void> {
  const { cfg, pool } = deps;
  const { outcome, snapshotId } = m;
  const failure = maskCpfsDeep(missingFieldFailure(err));
  outcome.status = 'blocked';
  outcome.forced = false;
  outcome.gate = gateVerdict([failure], [], false);
  outcome.error = { code: err.code, message: failure.message };
  const missing = failure.fields.join(', ') || 'them';
  outcome.message = failure.message + (m.force ? `; --force cannot override this rule: no row can be loaded without ${missing}, so nothing was loaded or published` : '');
  if (snapshotId !== null && m.source && outcome.as_of) {
    const r: QualityReport = {
      dataset: m.pipeline.name, uf: outcome.uf, run_id: outcome.run_id, snapshot_id: snapshotId, as_of: outcome.as_of, generated_at: new Date().toISOString(),
      source: m.source,
      counts: { read: outcome.rows_read, loaded: 0, rejected: 0, dropped: 0 },
      facts: { ...emptyFacts(), notes: [`nothing was loaded: the source has no ${missing}`] },
      change: { previous_snapshot_id: m.current?.snapshot_id ?? null, previous_rows: m.current?.rows ?? null, rows: 0, delta_share: null, added: null, removed: null },
      gate: outcome.gate,
    };
    writeReportFiles(cfg, r);
    // blocked, without tables: kept for its report; publishSnapshot refuses it even with --force
    await catalog.setSnapshotFields(pool, snapshotId, { status: 'blocked', quality: r });
    outcome.report = reportPath(cfg, snapshotId);
  }
  await catalog.finishRun(pool, outcome.run_id, { status: 'blocked', snapshotId, read: outcome.rows_read, loaded: 0, rejected: 0, error: outcome.message, errorCode: err.code });
}

/**
 * Retention once the run's snapshot is what it ends as (published, loaded or blocked): a
 * failure (a DROP refused because a user's view depends on an old table, the database lost)
 * is said and left to the next run's retention. Thrown, it would fail a run whose snapshot
 * is already current, and the failure path would discard that snapshot's derived rows.
 */
async function retentionAfterRun(pool: pg.Pool, log: Logger, dataset: string, scope: string, keep: number, snapshotId: number, budget: { lockTimeoutMs: number; maxWaitMs: number }): Promise<void> {
  await applyRetention(pool, dataset, scope, keep, [snapshotId], budget).catch((e) =>
    log.warn({ err: e }, `retention failed (${(e as Error).message}); the next run applies it`));
}

export async function runPipeline(deps: Deps, pipeline: Pipeline, options: RunOptions): Promise<RunOutcome> {
  const { cfg, pool, log } = deps;
  const started = Date.now();
  let uf: string | null = null;
  if (pipeline.scopedByUf) uf = parseUf(pipeline.name, options.uf);
  if (options.asOf !== undefined) checkAsOf(options.asOf);
  const scope = uf ?? '';
  // The lock session lives as long as the run: it holds the alive and the scope locks.
  const locks = await RunLocks.begin(pool, log, pipeline.name, scope, (c) => catalog.insertRun(c, pipeline.name, scope, options));
  const runId = locks.runId;
  const outcome: RunOutcome = {
    run_id: runId, pipeline: pipeline.name, uf, status: 'running', snapshot_id: null, as_of: null,
    rows_read: 0, rows_loaded: 0, rows_rejected: 0, rows_dropped: 0, duration_ms: 0, stages: {}, forced: false,
  };
  const publishBudget = { lockTimeoutMs: cfg.publishLockTimeoutMs, maxWaitMs: cfg.publishMaxWaitMs };
  const runLog = log.child({ run_id: runId, pipeline: pipeline.name, ...(uf ? { uf } : {}) });
  const workDir = path.join(cfg.dataDir, 'work', `run-${runId}`);
  let snapshotId: number | null = null;
  /** A complete snapshot that could not be made current (publish gave up on locks) is kept. */
  let keepSnapshot = false;
  // what a source without a required column is compared with and reported against (blockOnMissingFields)
  let current: catalog.SnapshotRow | null = null;
  let reportSource: QualityReport['source'] | null = null;
  try {
    if (!(await locks.takeScope())) {
      const other = (await catalog.runningRuns(pool, pipeline.name, scope, runId)).at(-1);
      const since = other ? ` (run ${other.run_id}, started ${other.started_at.toISOString().slice(0, 19).replace('T', ' ')} UTC)` : '';
      throw new AgroError('run_in_progress', `${pipeline.name}${uf ? ' ' + uf : ''}${since}`);
    }
    await cleanupDeadRuns(deps);

    let seq = 0;
    progress().runStart(`${pipeline.name}${uf ? ' ' + uf : ''}`);
    const stage: RunContext['stage'] = async (name, fn, rowsOf, detailOf) => {
      if (deps.signal?.aborted) throw new AgroError('interrupted', `stopped before stage ${name} (${String(deps.signal.reason ?? 'signal')})`);
      await locks.check();
      await catalog.startStage(pool, runId, name, ++seq);
      const t0 = Date.now();
      progress().stageStart(name);
      try {
        const r = await fn();
        outcome.stages[name] = await catalog.endStage(pool, runId, name, 'done', rowsOf ? rowsOf(r) : null, detailOf ? detailOf(r) : {});
        progress().stageEnd(name, true);
        runLog.info({ stage: name, ms: Date.now() - t0 }, 'stage done');
        return r;
      } catch (e) {
        progress().stageEnd(name, false);
        await catalog.endStage(pool, runId, name, 'failed', null, { error: (e as Error).message }).catch(() => {});
        throw e;
      }
    };
    const ctx: RunContext = {
      cfg, pool, log: runLog, runId, options, scope,
      source: options.source ?? cfg.sources[pipeline.name],
      rawDir: path.join(cfg.dataDir, 'raw', pipeline.name, ...(uf ? [uf] : [])),
      workDir,
      stage,
      stagingTable: (name) => `stage.${ident(`r${runId}_${name}`)}`,
    };
    fs.mkdirSync(workDir, { recursive: true });

    const { files, parts } = await stage('download', async () => {
      const fetched = await pipeline.fetch(ctx);
      return { files: fetched, parts: (await pipeline.sourceParts?.(ctx, fetched)) ?? [] };
    }, (r) => r.files.length, (r) => ({
      files: r.files.map((x) => ({ name: x.name, sha256: x.sha256, size: x.size, cached: x.fromCache })),
      ...(r.parts.length > 0 && { parts: r.parts }),
    }));
    // A partial download is resumed only by a run that asks for the same file: one killed on a
    // file the source has since replaced (the next Receita month, a new SICAR name) would stay
    // for ever, up to GBs. The downloads done, what is left is no file of this run, and no other
    // run writes here (this run holds the scope's lock); a failed download stage removes nothing.
    const partials = await removePartials(ctx.rawDir);
    if (partials.length) {
      runLog.info({ removed: partials.map((x) => x.file), bytes: partials.reduce((a, x) => a + x.bytes, 0) }, 'removed partial downloads of files this run did not fetch');
    }
    const readParts = parts.filter((p): p is ReadPart => p.sha256 !== null);
    const unread = parts.filter((p) => p.sha256 === null).map((p) => p.name);
    const sha = sourceChecksum([...files, ...readParts]);
    current = await catalog.currentSnapshot(pool, pipeline.name, scope);
    // A backfill is compared with the snapshot an as_of read of its date answers from: bytes
    // another date's snapshot holds (a later one, or an earlier one another date came between)
    // are still what the registry said on this date, which needs a snapshot of its own.
    const kept = options.backfill && options.asOf
      ? [await catalog.answeringSnapshot(pool, pipeline.name, scope, options.asOf)].filter((s) => s !== undefined)
      : current ? [current] : [];
    // A part that could not be read this run brings nothing new: then the files alone are
    // compared with the files a snapshot recorded (its own parts set aside).
    const filesSha = unread.length ? sourceChecksum(files) : null;
    const identical = (s: catalog.SnapshotRow) => s.source_sha256 === sha || (filesSha !== null && recordedFilesChecksum(s) === filesSha);
    const same = options.reload ? undefined : kept.find((s) => s.status !== 'blocked' && identical(s));
    // Bytes an operator rolled back are what the last publication took back: a nightly that
    // downloads them again would undo the rollback. Loaded again only when asked (--force,
    // a backfill) or published by hand (`agro publish <id>`).
    const refused = same || options.force || options.backfill || options.reload ? undefined : (await catalog.rolledBackSnapshots(pool, pipeline.name, scope)).find(identical);
    if (same || refused) {
      const s = (same ?? refused)!;
      outcome.status = 'unchanged';
      // snapshot_id: what serves this source now (the identical snapshot, or, when the bytes
      // are a rolled-back snapshot's, the one current instead; `rolled_back` names the other).
      outcome.snapshot_id = same ? same.snapshot_id : current?.snapshot_id ?? null;
      outcome.as_of = same ? same.as_of : current?.as_of ?? null;
      outcome.message = `source identical to snapshot ${s.snapshot_id} (sha256 ${sha.slice(0, 12)}…)${unread.length ? `; ${unread.join(', ')} could not be read: the files compared alone` : ''}`;
      if (refused) {
        outcome.rolled_back = { snapshot_id: refused.snapshot_id, rolled_back_at: refused.rolled_back_at.toISOString() };
        const take = refused.status === 'dropped' ? '--force loads and publishes it anyway, past the quality gate too' : `agro publish ${refused.snapshot_id} makes it current again`;
        outcome.message += `, which was rolled back on ${brazilDay(refused.rolled_back_at)}: not published again (${take})`;
      }
      await catalog.finishRun(pool, runId, { status: 'unchanged', snapshotId: outcome.snapshot_id, message: outcome.message });
      return outcome;
    }

    const release = pipeline.releaseDate ? await pipeline.releaseDate(ctx, files) : null;
    // A date the source carries itself (not a file's modification day, which a copy changes)
    // bounds --as-of from below unless --force: dates after the as-of are nulled as implausible.
    if (options.asOf && release && options.asOf < release && !options.force && !files.some((f) => fileDay(f) === release)) {
      throw new AgroError('usage', `--as-of ${options.asOf} is before ${release}, the release date the source itself carries (its data did not exist yet; every later date in it would be loaded as NULL): give --as-of ${release} or later, or --force to load it as of ${options.asOf} anyway`);
    }
    const asOf = options.asOf ?? release ?? todayInBrazil();
    outcome.as_of = asOf;
    const partsRead = readParts.length > 0 ? { parts: readParts } : {};
    const source = {
      files: files.map((f) => ({ name: f.name, sha256: f.sha256, size: f.size, uri: f.sourceUri, etag: f.etag, last_modified: f.lastModified })),
      sha256: sha,
      ...partsRead,
      ...(await pipeline.sourceInfo?.(files)),
    };
    const reported = { files: source.files.map(({ name, sha256, size, uri }) => ({ name, sha256, size, uri })), sha256: sha, ...partsRead };
    reportSource = reported;
    snapshotId = await catalog.insertSnapshot(pool, { dataset: pipeline.name, uf, asOf, sourceSha256: sha, source, runId, fingerprint: null });
    outcome.snapshot_id = snapshotId;
    const sid = snapshotId;
    const target: SnapshotTarget = {
      snapshotId: sid,
      asOf,
      async table(relation) {
        const t = qualifiedSnapshotTable(relation, sid);
        await catalog.addSnapshotTable(pool, sid, t);
        return t;
      },
      previousTable: (relation) => (current ? qualifiedSnapshotTable(relation, current.snapshot_id) : null),
    };

    const load: LoadResult = await pipeline.load(ctx, files, target);
    const tables = (await catalog.getSnapshot(pool, sid))?.tables ?? [];
    // built, indexed and analysed: the tables are what autovacuum may tend from now on
    await resumeAutovacuum(pool, tables);
    outcome.rows_read = load.rowsRead;
    outcome.rows_loaded = load.rowsLoaded;
    outcome.rows_rejected = load.rowsRejected;
    outcome.rows_dropped = load.rowsDropped ?? sum(load.facts.dropped);
    // The main relation's rows: the snapshot's `rows`, what the next load is compared with.
    const mainRows = load.mainRows ?? load.rowsLoaded;

    let text: Awaited<ReturnType<typeof checkSnapshotText>> | null = null;
    const report = await stage('quality', async () => {
      const mainTable = qualifiedSnapshotTable(pipeline.mainRelation, sid);
      const change = await changeAgainst(pool, pipeline, pipeline.key, current, mainTable, mainRows);
      const counts = { read: load.rowsRead, loaded: load.rowsLoaded, rejected: load.rowsRejected, dropped: outcome.rows_dropped };
      // Every text column of the snapshot: U+FFFD, double-encoded text and (beyond a few stray bytes) C1 controls fail the gate (text-checks.ts).
      const scan = await checkSnapshotText(pool, tables);
      text = scan;
      const failures = mergeTextFailures(evaluateGate(counts, change, load.facts, cfg.quality), scan);
      const r: QualityReport = {
        dataset: pipeline.name, uf, run_id: runId, snapshot_id: sid, as_of: asOf, generated_at: new Date().toISOString(),
        source: reported,
        counts, facts: { ...load.facts, notes: [...load.facts.notes, ...scan.notes], text: { scanned: scan.scanned, findings: scan.findings } }, change,
        gate: gateVerdict(failures, [...measureGate(counts, change, cfg.quality), ...measureText(scan)], !!options.force),
      };
      writeReportFiles(cfg, r);
      await catalog.setSnapshotFields(pool, sid, { rows: mainRows, quality: r, fingerprint: load.fingerprint ?? undefined });
      return r;
    }, () => null, (r) => ({ passed: r.gate.passed, failures: r.gate.failures.map((f) => f.rule) }));
    outcome.gate = report.gate;
    outcome.report = reportPath(cfg, sid);

    if (!report.gate.passed && !options.force) {
      await catalog.setSnapshotFields(pool, sid, { status: 'blocked' });
      outcome.status = 'blocked';
      outcome.message = report.gate.failures.map((f) => f.message).join('; ');
      await catalog.finishRun(pool, runId, { status: 'blocked', snapshotId: sid, read: load.rowsRead, loaded: load.rowsLoaded, rejected: load.rowsRejected, error: outcome.message });
      keepSnapshot = true;
      await retentionAfterRun(pool, runLog, pipeline.name, scope, cfg.retention, sid, publishBudget);
      return outcome;
    }
    outcome.forced = report.gate.forced;

    if (involvesOverlaps(pipeline.name)) {
      await stage('derive', () => ensureOverlaps(pool, runLog, { dataset: pipeline.name, scope, snapshotId: sid }, { history: !!options.backfill }), (r) => r.rows, (r) => r);
    }

    // The row-drop rule compares with what is current when the snapshot becomes current,
    // inside the publish transaction: a rollback during the run must not let a big drop through.
    // The report is rebuilt, never mutated (a failed publish transaction leaves it as it was).
    const mainTable = qualifiedSnapshotTable(pipeline.mainRelation, sid);
    let final: QualityReport = report;
    const gateNow = async (client: pg.ClientBase, cur: catalog.SnapshotRow | null): Promise<GateFailure[]> => {
      final = report;
      if ((cur?.snapshot_id ?? null) === report.change.previous_snapshot_id) return report.gate.failures;
      const change = await changeAgainst(client, pipeline, pipeline.key, cur, mainTable, mainRows);
      const evaluated = evaluateGate(report.counts, change, load.facts, cfg.quality);
      const failures = text ? mergeTextFailures(evaluated, text) : evaluated;
      const note = `the gate was evaluated again at publish time: snapshot ${cur?.snapshot_id ?? 'none'} was current then (snapshot ${report.change.previous_snapshot_id ?? 'none'} when the run started)`;
      final = {
        ...report,
        change,
        facts: { ...report.facts, notes: [...report.facts.notes, note] },
        gate: gateVerdict(failures, [...measureGate(report.counts, change, cfg.quality), ...(text ? measureText(text) : [])], !!options.force),
      };
      await catalog.setSnapshotFields(client, sid, { quality: final });
      return failures;
    };
    await deps.hooks?.beforePublish?.(sid);
    let pub;
    try {
      pub = await stage('publish', () =>
        publishSnapshot(pool, pipeline, sid, {
          force: !!options.force,
          forced: report.gate.forced,
          onlyIfNewer: options.backfill,
          fromRun: true,
          gate: gateNow,
          budget: publishBudget,
        }),
      );
    } catch (e) {
      if (isAgroError(e, 'publish_lock_timeout')) {
        await catalog.setSnapshotFields(pool, sid, { status: 'loaded' });
        keepSnapshot = true;
        throw new AgroError('publish_lock_timeout', `snapshot ${sid} is kept (status loaded); make it current with \`agro publish ${sid}\` — ${e.message}`);
      }
      throw e;
    }
    // From here the snapshot is what the publish transaction made it: nothing below discards it.
    keepSnapshot = true;
    if (final !== report) writeReportFiles(cfg, final);
    outcome.gate = final.gate;
    outcome.forced = pub.forced;
    const counts = { snapshotId: sid, read: load.rowsRead, loaded: load.rowsLoaded, rejected: load.rowsRejected };
    await retentionAfterRun(pool, runLog, pipeline.name, scope, cfg.retention, sid, publishBudget);
    if (pub.status === 'blocked') {
      outcome.status = 'blocked';
      outcome.message = pub.reason;
      await catalog.finishRun(pool, runId, { status: 'blocked', ...counts, error: outcome.message });
      return outcome;
    }
    if (pub.status === 'loaded') outcome.message = `loaded but not made current: ${pub.reason}`;
    outcome.status = pub.status;
    await catalog.finishRun(pool, runId, { status: pub.status, ...counts });
    return outcome;
  } catch (e) {
    const err = isAgroError(e)
      ? e
      : isConnectionError(e)
        ? new AgroError('database_unavailable', `the database connection was lost during the run (${(e as Error).message})`)
        : (diskFullError(e, cfg.dataDir) ?? new AgroError('internal', (e as Error).message));
    if (err.code === 'internal') runLog.error({ err: e }, 'run failed with an unexpected error');
    else if (err.code === 'database_unavailable' || err.code === 'disk_full') runLog.error(err.message);
    if (snapshotId !== null && !keepSnapshot) await discardSnapshotData(pool, snapshotId);
    const blocked = err.code === 'required_field_missing' &&
      (await blockOnMissingFields(deps, err, { pipeline, outcome, force: !!options.force, snapshotId, current, source: reportSource }).then(
        () => true,
        (e2) => {
          // the refusal could not be recorded (database lost, disk full): the run fails as before
          runLog.error({ err: e2 }, 'could not record the blocked run');
          delete outcome.gate;
          delete outcome.message;
          delete outcome.report;
          return false;
        },
      ));
    if (blocked) {
      // as every blocked run: retention (a source that keeps lacking the column leaves one
      // blocked row, not one a night); the run is recorded blocked already, so a retention that
      // fails is said, not turned into a failed run
      if (snapshotId !== null) await retentionAfterRun(pool, runLog, pipeline.name, scope, cfg.retention, snapshotId, publishBudget);
      runLog.warn(outcome.message);
      return outcome;
    }
    outcome.status = 'failed';
    outcome.error = { code: err.code, message: err.message };
    if (snapshotId !== null && !keepSnapshot) await catalog.setSnapshotFields(pool, snapshotId, { status: 'failed' }).catch(() => {});
    await catalog.finishRun(pool, runId, { status: 'failed', snapshotId, error: err.message, errorCode: err.code, read: outcome.rows_read, loaded: outcome.rows_loaded, rejected: outcome.rows_rejected }).catch(() => {});
    return outcome;
  } finally {
    outcome.duration_ms = Date.now() - started;
    await dropStagingTables(pool, runId).catch(() => {});
    fs.rmSync(workDir, { recursive: true, force: true });
    await locks.release();
  }
}
