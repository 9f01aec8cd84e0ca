// Publication, rollback and retention. Readers follow current.<relation> views,
// which are regenerated inside the same transaction that moves the etl.current
// pointer: a reader sees the old snapshot or the new one, never a mix, and the
// serving.* views on top of them are never dropped (so they never error). That holds per
// statement: API answers of several statements read by snapshot id (src/api/kept.ts).
//
// Readers never queue behind a publish for long: replacing a view needs an
// AccessExclusive lock, and a pending one makes every new reader wait. So the views
// are locked last, with a short lock_timeout; on timeout the transaction is retried
// with backoff, and after a bounded total wait the publish gives up cleanly
// (`publish_lock_timeout`), leaving the snapshot for a later `agro publish`.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { ident, withTransaction } from '../db/pool.ts';
import * as catalog from './catalog.ts';
import { qualifiedSnapshotTable } from './names.ts';
import { recordChangeEvents } from '../events/change-events.ts';
import { ensureOverlaps, fillMissingPairs, forgetOverlaps, involvesOverlaps, type Prospective } from './overlaps.ts';
import type { Logger } from '../log.ts';
import type { Pipeline } from './pipeline.ts';
import { unforceable, type GateFailure } from './quality.ts';
import { forgetQsaChanges } from './sql/qsa-changes.ts';

/** How long a publish may wait for readers: per attempt, and in total. */
export interface LockBudget {
  lockTimeoutMs: number;
  maxWaitMs: number;
}

export const DEFAULT_LOCK_BUDGET: LockBudget = { lockTimeoutMs: 250, maxWaitMs: 30_000 };

/** Rebuilds current.<relation> as the union of the published snapshot table of every scope. */
export async function refreshCurrentView(client: pg.ClientBase, relation: string, snapshotIds: number[]): Promise<void> {
  const parts = snapshotIds.map((id) => `SELECT * FROM ${qualifiedSnapshotTable(relation, id)}`);
  const body = parts.length ? parts.join('\nUNION ALL\n') : `SELECT * FROM snap.${ident(relation + '__template')}`;
  await client.query(`CREATE OR REPLACE VIEW "current".${ident(relation)} AS ${body}`);
}

async function lockDataset(client: pg.ClientBase, dataset: string, log?: Logger) {
  // Two states of one dataset may publish at once; they rewrite the same views.
  const key = `publish:${dataset}`;
  if ((await client.query('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS ok', [key])).rows[0].ok) return;
  // An operator's publish or rollback waits for a run's publish transaction (up to the publish
  // budget while readers hold the views): said, not a silent pause of many seconds.
  if (log) {
    const runs = await catalog.runningRuns(client, dataset, null, null);
    const which = runs.length ? ` (runs in progress: ${runs.map((r) => `${dataset}${r.scope ? ' ' + r.scope : ''} run ${r.run_id}`).join(', ')})` : '';
    log.warn(`waiting for another publish, rollback or retention of ${dataset} to commit${which}`);
  }
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [key]);
}

/**
 * A publish or rollback of a CAR state or a layer fills the overlap pairs of what is current;
 * two of them at once (a state and a layer) would each miss the other's uncommitted snapshot,
 * leaving the new (state, layer) pair current without its rows. They take turns (after the
 * dataset's lock, always in that order).
 */
async function lockOverlaps(client: pg.ClientBase, dataset: string) {
  if (involvesOverlaps(dataset)) await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['publish:overlaps']);
}

const isLockTimeout = (e: unknown) => (e as { code?: string }).code === '55P03';

/**
 * The last step of a publish transaction: rewrites the views with a short lock timeout
 * (a waiting AccessExclusive request would queue every new reader behind it). Everything else the transaction does comes before, so readers are held
 * only for the view rewrite and the commit. While readers hold a view, the rewrite alone is
 * retried (back to a savepoint, which lets go of the views it took), with backoff, until
 * `maxWaitMs` of waiting: the transaction's own work (change events for every monitor, the
 * gate) is done once, and however long it took, it is not waiting for readers.
 */
async function repointViews(client: pg.ClientBase, pipeline: Pipeline, budget: LockBudget, what: string) {
  const ids = await catalog.currentSnapshotIds(client, pipeline.name);
  let waited = 0;
  let backoff = Math.max(10, budget.lockTimeoutMs / 2);
  for (let attempt = 1; ; attempt++) {
    await client.query('SAVEPOINT repoint_views');
    const t0 = Date.now();
    try {
      await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(budget.lockTimeoutMs))}`);
      for (const rel of pipeline.relations) await refreshCurrentView(client, rel, ids);
      await client.query('RELEASE SAVEPOINT repoint_views');
      return;
    } catch (e) {
      await client.query('ROLLBACK TO SAVEPOINT repoint_views');
      if (!isLockTimeout(e)) throw e;
      waited += Date.now() - t0;
      // Jitter keeps two waiting publishers from retrying in step.
      const pause = Math.min(backoff * (0.5 + Math.random()), Math.max(0, budget.maxWaitMs - waited));
      if (waited + pause + budget.lockTimeoutMs > budget.maxWaitMs) {
        throw new AgroError(
          'publish_lock_timeout',
          `${what}: readers held the serving views for ${budget.maxWaitMs} ms (${attempt} attempts of ${budget.lockTimeoutMs} ms)`,
        );
      }
      await sleep(pause);
      waited += pause;
      backoff = Math.min(backoff * 2, 2_000);
    }
  }
}

export interface PublishOptions {
  /** --force: publish even when the quality gate fails. */
  force?: boolean;
  /** Already known to be forced (the run's own gate failed and --force was given). */
  forced?: boolean;
  /** backfill: make it current only when it is newer than the current snapshot. */
  onlyIfNewer?: boolean;
  /** The run that loads the snapshot publishes it while it is still `loading`. */
  fromRun?: boolean;
  /**
   * Evaluates the gate against what is current now, inside the publish transaction
   * (the snapshot current when the run started may have been rolled back meanwhile).
   */
  gate?: (client: pg.ClientBase, current: catalog.SnapshotRow | null) => Promise<GateFailure[]>;
  budget?: LockBudget;
  /** Where the pairs computed before the transaction (prepareOverlaps) are logged. */
  log?: Logger;
}

export interface PublishOutcome {
  /** published: made current; loaded: kept, not current (older backfill); blocked: the gate refused. */
  status: 'published' | 'loaded' | 'blocked';
  published: boolean;
  forced: boolean;
  reason?: string;
  failures?: GateFailure[];
}

/** A backfill becomes current only when its as-of date is later than the current one's (contract §1). */
const isNotNewer = (snap: catalog.SnapshotRow, than: catalog.SnapshotRow) => snap.as_of <= than.as_of;

const gateFailures = (snap: catalog.SnapshotRow): GateFailure[] => ((snap.quality as { gate?: { failures?: GateFailure[] } } | null)?.gate?.failures) ?? [];
const gateRules = (snap: catalog.SnapshotRow) => gateFailures(snap).map((f) => `${f.rule}: ${f.message}`);

/**
 * The overlap pairs a snapshot needs once current, computed before its publish or rollback
 * transaction on the derive's two connections (a run's derive stage does this for the snapshot
 * it loads). A rollback to a snapshot never current beside today's others, a blocked one
 * published with --force, or pairs a migration forgot (0108) computed them inside the
 * transaction: one connection, the overlaps' publish lock held throughout (every other CAR or
 * layer publish waiting, hours at national scale). The transaction's fillMissingPairs still
 * fills what a concurrent publish adds (ensureOverlaps tags its part tables: two commands
 * computing the same pair at once do not collide).
 */
async function prepareOverlaps(pool: pg.Pool, prospective: Prospective, log?: Logger): Promise<void> {
  if (involvesOverlaps(prospective.dataset)) await ensureOverlaps(pool, log, prospective);
}

/**
 * `agro publish` or `agro keep` of a snapshot a run is still loading: refused with the run
 * named (it makes the snapshot current itself when it publishes), or, when that run died,
 * said so (the next run cleans up what it left).
 */
export async function refuseLoading(db: pg.ClientBase | pg.Pool, snapshotId: number): Promise<never> {
  const run = await catalog.loadingRunOf(db, snapshotId);
  if (run?.status === 'running') {
    throw new AgroError('run_in_progress', `snapshot ${snapshotId} is being loaded by run ${run.run_id}${run.stage ? ` (stage ${run.stage})` : ''}: that run makes it current itself when it publishes (see agro runs)`);
  }
  throw new AgroError('snapshot_not_found', `snapshot ${snapshotId} has no loaded tables: ${run ? `run ${run.run_id}, which was loading it, ended ${run.status}${run.stage ? ` during ${run.stage}` : ''}` : 'its run is gone'}; the next run cleans it up`);
}

/** Makes a snapshot current in one transaction. */
export async function publishSnapshot(pool: pg.Pool, pipeline: Pipeline, snapshotId: number, opts: PublishOptions = {}): Promise<PublishOutcome> {
  const budget = opts.budget ?? DEFAULT_LOCK_BUDGET;
  if (!opts.fromRun) {
    const snap = await catalog.getSnapshot(pool, snapshotId);
    // said at once, not after waiting for the loading run's own publish transaction
    if (snap?.status === 'loading') await refuseLoading(pool, snapshotId);
    const publishable = snap && (catalog.GOOD_STATUSES.includes(snap.status) || (snap.status === 'blocked' && opts.force && unforceable(gateFailures(snap)).length === 0));
    if (publishable) await prepareOverlaps(pool, { dataset: pipeline.name, scope: snap.scope, snapshotId }, opts.log);
  }
  return withTransaction(pool, async (client) => {
    await lockDataset(client, pipeline.name, opts.fromRun ? undefined : opts.log);
    await lockOverlaps(client, pipeline.name);
    const snap = await catalog.getSnapshot(client, snapshotId);
    // A snapshot still loading may only be published by the run that loads it.
    if (snap?.status === 'loading' && !opts.fromRun) await refuseLoading(client, snapshotId);
    if (!snap || snap.status === 'dropped' || snap.status === 'failed') {
      throw new AgroError('snapshot_not_found', `snapshot ${snapshotId} has no loaded tables`);
    }
    // A rule --force cannot override (a source without a required column): nothing was loaded.
    const hard = snap.status === 'blocked' ? unforceable(gateFailures(snap)) : [];
    if (hard.length) {
      throw new AgroError('quality_gate', `snapshot ${snapshotId} was blocked by a rule that cannot be forced, nothing was loaded (${hard.map((f) => `${f.rule}: ${f.message}`).join('; ')}); fix the source and run again`, {
        failures: gateRules(snap),
      });
    }
    if (snap.status === 'blocked' && !opts.force) {
      const rules = gateRules(snap);
      throw new AgroError('quality_gate', `snapshot ${snapshotId} was blocked (${rules.length ? rules.join('; ') : 'no rule recorded'}); publish it with --force to override`, {
        failures: rules,
      });
    }
    const cur = await catalog.currentSnapshot(client, pipeline.name, snap.scope);
    if (cur?.snapshot_id === snapshotId) return { status: 'published', published: true, forced: snap.forced };
    if (opts.onlyIfNewer && cur && isNotNewer(snap, cur)) {
      await catalog.setSnapshotStatus(client, snapshotId, 'loaded');
      return { status: 'loaded', published: false, forced: false, reason: `current snapshot ${cur.snapshot_id} (as of ${cur.as_of}) is not older` };
    }
    const failures = opts.gate ? await opts.gate(client, cur) : [];
    if (failures.length > 0 && !opts.force) {
      await catalog.setSnapshotStatus(client, snapshotId, 'blocked');
      return { status: 'blocked', published: false, forced: false, failures, reason: failures.map((f) => f.message).join('; ') };
    }
    const forced = !!opts.forced || failures.length > 0 || snap.status === 'blocked';
    if (cur) await catalog.setSnapshotStatus(client, cur.snapshot_id, 'superseded');
    await catalog.markPublished(client, snapshotId, forced);
    await catalog.setCurrent(client, pipeline.name, snap.scope, snapshotId);
    const publicationId = await catalog.recordPublication(client, { dataset: pipeline.name, scope: snap.scope, snapshotId, action: 'publish', forced, runId: snap.run_id });
    if (involvesOverlaps(pipeline.name)) await fillMissingPairs(client);
    // Change events for monitored records, in this transaction: an event exists iff the publish does.
    await recordChangeEvents(client, { dataset: pipeline.name, scope: snap.scope, previousSnapshotId: cur?.snapshot_id ?? null, snapshotId, publicationId });
    await repointViews(client, pipeline, budget, `publishing snapshot ${snapshotId}`);
    return { status: 'published', published: true, forced };
  });
}

/**
 * Where rollback goes: the publication history read as an undo stack (a publish pushes,
 * a rollback pops back to its target); the answer is the entry below the current one
 * whose tables are still kept.
 */
export function rollbackTarget(history: catalog.PublicationRow[], currentId: number, kept: Set<number>): number | null {
  const stack: number[] = [];
  for (const h of history) {
    if (h.action === 'publish') {
      if (stack[stack.length - 1] !== h.snapshot_id) stack.push(h.snapshot_id);
    } else {
      const i = stack.length >= 2 ? stack.lastIndexOf(h.snapshot_id, stack.length - 2) : -1;
      if (i >= 0) stack.length = i + 1;
      else {
        stack.pop();
        stack.push(h.snapshot_id);
      }
    }
  }
  if (stack[stack.length - 1] === currentId) stack.pop();
  for (let i = stack.length - 1; i >= 0; i--) if (stack[i] !== currentId && kept.has(stack[i])) return stack[i];
  return null;
}

async function rollbackTargetOf(db: pg.ClientBase | pg.Pool, dataset: string, scope: string, currentId: number): Promise<number | null> {
  const keptIds = new Set(
    (await catalog.snapshotsWithTables(db, dataset, scope)).filter((s) => catalog.GOOD_STATUSES.includes(s.status)).map((s) => s.snapshot_id),
  );
  return rollbackTarget(await catalog.publications(db, dataset, scope), currentId, keptIds);
}

/** Makes the previously current snapshot current again, in one transaction. */
export async function rollback(pool: pg.Pool, pipeline: Pipeline, scope: string, budget: LockBudget = DEFAULT_LOCK_BUDGET, log?: Logger) {
  const where = `${pipeline.name}${scope ? ' ' + scope : ''}`;
  const current = await catalog.currentSnapshot(pool, pipeline.name, scope);
  const target = current && (await rollbackTargetOf(pool, pipeline.name, scope, current.snapshot_id));
  if (target) await prepareOverlaps(pool, { dataset: pipeline.name, scope, snapshotId: target }, log);
  return withTransaction(pool, async (client) => {
    await lockDataset(client, pipeline.name, log);
    await lockOverlaps(client, pipeline.name);
    const cur = await catalog.currentSnapshot(client, pipeline.name, scope);
    if (!cur) throw new AgroError('nothing_to_rollback', `${where} has no published snapshot`);
    const prev = await rollbackTargetOf(client, pipeline.name, scope, cur.snapshot_id);
    if (prev === null) throw new AgroError('nothing_to_rollback', `no snapshot of ${where} that was current before ${cur.snapshot_id} is kept`);
    await catalog.markRolledBack(client, cur.snapshot_id);
    await client.query(`UPDATE etl.snapshots SET status = 'published', published_at = now(), rolled_back_at = NULL WHERE snapshot_id = $1`, [prev]);
    await catalog.setCurrent(client, pipeline.name, scope, prev);
    const publicationId = await catalog.recordPublication(client, { dataset: pipeline.name, scope, snapshotId: prev, action: 'rollback' });
    if (involvesOverlaps(pipeline.name)) await fillMissingPairs(client);
    // What monitors were told changed with the rolled-back snapshot changes back: the events of any publish.
    await recordChangeEvents(client, { dataset: pipeline.name, scope, previousSnapshotId: cur.snapshot_id, snapshotId: prev, publicationId });
    await repointViews(client, pipeline, budget, `rolling back ${where}`);
    return { from: cur.snapshot_id, to: prev };
  });
}

/**
 * `agro keep <id>` (or `--release`): under the dataset's publish lock, as retention's drops
 * are, so a drop planned before the keep cannot follow it (the keep said "exempt" of a
 * snapshot that retention was dropping): it waits for that drop and then says the snapshot is gone.
 */
export async function keepSnapshot(pool: pg.Pool, snapshotId: number, kept: boolean, log?: Logger): Promise<boolean> {
  const first = await catalog.getSnapshot(pool, snapshotId);
  if (!first) throw new AgroError('snapshot_not_found', String(snapshotId));
  if (kept && first.status === 'loading') await refuseLoading(pool, snapshotId);
  return withTransaction(pool, async (client) => {
    await lockDataset(client, first.dataset, log);
    const snap = (await catalog.getSnapshot(client, snapshotId))!;
    if (!kept) return !(await catalog.setKept(client, snapshotId, false));
    if (snap.status === 'blocked') throw new AgroError('quality_gate', `snapshot ${snapshotId} was blocked by the quality gate: publish it with --force first, or keep a good one`);
    if (!catalog.GOOD_STATUSES.includes(snap.status)) throw new AgroError('snapshot_not_found', `snapshot ${snapshotId} has no loaded tables (status ${snap.status})`);
    return catalog.setKept(client, snapshotId, true);
  });
}

/** Gives a loaded snapshot's tables autovacuum back: they were built with it off (sql.ts BUILD_TABLE). */
export async function resumeAutovacuum(db: pg.ClientBase | pg.Pool, tables: string[]): Promise<void> {
  for (const t of tables) await db.query(`ALTER TABLE IF EXISTS ${t} RESET (autovacuum_enabled, toast.autovacuum_enabled)`);
}

export async function dropSnapshotTables(db: pg.ClientBase | pg.Pool, tables: string[]): Promise<void> {
  for (const t of tables) await db.query(`DROP TABLE IF EXISTS ${t}`);
}

/** Newest first by what the data is about (as-of date), then by when it was published or loaded. */
function byDateDesc(a: catalog.SnapshotRow, b: catalog.SnapshotRow): number {
  if (a.as_of !== b.as_of) return a.as_of < b.as_of ? 1 : -1;
  const pa = (a.published_at ?? a.created_at).getTime();
  const pb = (b.published_at ?? b.created_at).getTime();
  return pb - pa || b.snapshot_id - a.snapshot_id;
}

/** Which snapshots of one (dataset, scope) retention keeps; the others are dropped. */
export function retentionPlan(
  snapshots: catalog.SnapshotRow[],
  o: { keep: number; rollbackTo: number | null; protect?: number[] },
): { keep: Set<number>; drop: catalog.SnapshotRow[] } {
  const good = snapshots.filter((s) => catalog.GOOD_STATUSES.includes(s.status)).sort(byDateDesc);
  const blocked = snapshots.filter((s) => s.status === 'blocked').sort((a, b) => b.snapshot_id - a.snapshot_id);
  // Never dropped, and counted: what is current and what rollback returns to.
  const mandatory = new Set<number>([...good.filter((s) => s.is_current).map((s) => s.snapshot_id), ...(o.rollbackTo !== null ? [o.rollbackTo] : [])]);
  // Never dropped, not counted: `agro keep` snapshots, and what this run just loaded (an
  // older backfill stays until a later run's retention, without pushing out a newer one).
  const exempt = new Set(o.protect ?? []);
  const keep = new Set<number>();
  let counted = 0;
  for (const s of good) {
    if (mandatory.has(s.snapshot_id) && !s.kept) {
      keep.add(s.snapshot_id);
      counted++;
    } else if (s.kept || exempt.has(s.snapshot_id)) keep.add(s.snapshot_id);
  }
  for (const s of good) {
    if (keep.has(s.snapshot_id)) continue;
    if (counted >= o.keep) break;
    keep.add(s.snapshot_id);
    counted++;
  }
  // Blocked snapshots have their own rule: the latest one stays (its report, a `publish --force`),
  // and, when that one cannot be forced (a source without a required column: no tables), also
  // the latest one that can.
  if (blocked[0]) keep.add(blocked[0].snapshot_id);
  const forceable = blocked.find((s) => unforceable(gateFailures(s)).length === 0);
  if (forceable) keep.add(forceable.snapshot_id);
  return { keep, drop: snapshots.filter((s) => !keep.has(s.snapshot_id)) };
}

/**
 * Keeps `keep` good snapshots per (dataset, scope), newest by date, always including the
 * current one and the one rollback would return to; `protect` names snapshots this run
 * loaded (an older backfill is kept until a later run's retention).
 */
export async function applyRetention(
  pool: pg.Pool,
  dataset: string,
  scope: string,
  keep: number,
  protect: number[] = [],
  budget: LockBudget = DEFAULT_LOCK_BUDGET,
): Promise<number[]> {
  const plan = async (db: pg.ClientBase | pg.Pool) => {
    const all = await catalog.snapshotsWithTables(db, dataset, scope);
    const current = all.find((s) => s.is_current);
    const rollbackTo = current ? await rollbackTargetOf(db, dataset, scope, current.snapshot_id) : null;
    return retentionPlan(all, { keep, rollbackTo, protect });
  };
  const dropped: number[] = [];
  for (const s of (await plan(pool)).drop) {
    try {
      const gone = await withTransaction(pool, async (c) => {
        // Planned again under the publish lock: a publish or rollback since the first plan (or
        // while an earlier DROP waited) may have made this snapshot current or what rollback returns to.
        await lockDataset(c, dataset);
        if (!(await plan(c)).drop.some((x) => x.snapshot_id === s.snapshot_id)) return false;
        // As-of readers may hold an old snapshot: a DROP waiting for them would queue every
        // later reader of it, so it gives up quickly and the next retention pass tries again.
        await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(budget.lockTimeoutMs))}`);
        await dropSnapshotTables(c, s.tables);
        await forgetOverlaps(c, s.snapshot_id);
        await forgetQsaChanges(c, s.snapshot_id);
        await catalog.setSnapshotFields(c, s.snapshot_id, { status: 'dropped' });
        return true;
      });
      if (gone) dropped.push(s.snapshot_id);
    } catch (e) {
      if (!isLockTimeout(e)) throw e;
    }
  }
  return dropped;
}
