// Publication, rollback and retention. Readers follow current.<relation> views,
// which are regenerated inside the same transaction that moves the etl.current
// pointer: a reader sees the old snapshot or the new one, never a mix, and the
// serving.* views on top of them are never dropped (so they never error).
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { ident, withTransaction } from '../db/pool.ts';
import * as catalog from './catalog.ts';
import { qualifiedSnapshotTable } from './names.ts';
import { fillMissingPairs, forgetOverlaps, involvesOverlaps } from './overlaps.ts';
import type { Pipeline } from './pipeline.ts';


/** Rebuilds current.<relation> as the union of the published snapshot table of every scope. */
export async function refreshCurrentView(client: pg.ClientBase, relation: string, snapshotIds: number[]): Promise<void> {
  const parts = snapshotIds.map((id) => `SELECT * FROM ${qualifiedSnapshotTable(relation, id)}`);
  const body = parts.length ? parts.join('\nUNION ALL\n') : `SELECT * FROM snap.${ident(relation + '__template')}`;
  await client.query(`CREATE OR REPLACE VIEW "current".${ident(relation)} AS ${body}`);
}

async function lockDataset(client: pg.ClientBase, dataset: string) {
  // Two states of one dataset may publish at once; they rewrite the same views.
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`publish:${dataset}`]);
}

async function repointViews(client: pg.ClientBase, pipeline: Pipeline) {
  const ids = await catalog.currentSnapshotIds(client, pipeline.name);
  for (const rel of pipeline.relations) await refreshCurrentView(client, rel, ids);
}

export interface PublishOutcome {
  published: boolean;
  /** Set when a backfill was older than the current snapshot and stayed non-current. */
  reason?: string;
}

/**
 * Makes a snapshot current in one transaction. With `onlyIfNewer` (backfill), a
 * snapshot older than the current one is kept as superseded instead.
 */
export async function publishSnapshot(
  pool: pg.Pool,
  pipeline: Pipeline,
  snapshotId: number,
  opts: { forced?: boolean; onlyIfNewer?: boolean; fromRun?: boolean } = {},
): Promise<PublishOutcome> {
  return withTransaction(pool, async (client) => {
    await lockDataset(client, pipeline.name);
    const snap = await catalog.getSnapshot(client, snapshotId);
    // A snapshot still loading may only be published by the run that loads it.
    if (!snap || snap.status === 'dropped' || snap.status === 'failed' || (snap.status === 'loading' && !opts.fromRun)) {
      throw new AgroError('snapshot_not_found', `snapshot ${snapshotId} has no loaded tables`);
    }
    const cur = await catalog.currentSnapshot(client, pipeline.name, snap.scope);
    if (opts.onlyIfNewer && cur && cur.as_of >= snap.as_of && cur.snapshot_id !== snapshotId) {
      await client.query(`UPDATE etl.snapshots SET status = 'superseded' WHERE snapshot_id = $1`, [snapshotId]);
      return { published: false, reason: `current snapshot ${cur.snapshot_id} (as of ${cur.as_of}) is not older` };
    }
    if (cur && cur.snapshot_id !== snapshotId) {
      await client.query(`UPDATE etl.snapshots SET status = 'superseded' WHERE snapshot_id = $1`, [cur.snapshot_id]);
    }
    await client.query(
      `UPDATE etl.snapshots SET status = 'published', published_at = now(), forced = forced OR $2 WHERE snapshot_id = $1`,
      [snapshotId, opts.forced ?? false],
    );
    await catalog.setCurrent(client, pipeline.name, snap.scope, snapshotId);
    await repointViews(client, pipeline);
    if (involvesOverlaps(pipeline.name)) await fillMissingPairs(client);
    return { published: true };
  });
}

/** Makes the snapshot before the current one current again, in one transaction. */
export async function rollback(pool: pg.Pool, pipeline: Pipeline, scope: string) {
  return withTransaction(pool, async (client) => {
    await lockDataset(client, pipeline.name);
    const cur = await catalog.currentSnapshot(client, pipeline.name, scope);
    if (!cur) throw new AgroError('nothing_to_rollback', `${pipeline.name}${scope ? ' ' + scope : ''} has no published snapshot`);
    const candidates = (await catalog.snapshotsWithTables(client, pipeline.name, scope)).filter(
      (s) => s.snapshot_id !== cur.snapshot_id && s.status === 'superseded' && s.snapshot_id < cur.snapshot_id,
    );
    const prev = candidates.sort((a, b) => b.snapshot_id - a.snapshot_id)[0];
    if (!prev) throw new AgroError('nothing_to_rollback', `no earlier snapshot of ${pipeline.name}${scope ? ' ' + scope : ''} is kept`);
    await client.query(`UPDATE etl.snapshots SET status = 'rolled_back' WHERE snapshot_id = $1`, [cur.snapshot_id]);
    await client.query(`UPDATE etl.snapshots SET status = 'published', published_at = now() WHERE snapshot_id = $1`, [prev.snapshot_id]);
    await catalog.setCurrent(client, pipeline.name, scope, prev.snapshot_id);
    await repointViews(client, pipeline);
    if (involvesOverlaps(pipeline.name)) await fillMissingPairs(client);
    return { from: cur.snapshot_id, to: prev.snapshot_id };
  });
}

export async function dropSnapshotTables(db: pg.ClientBase | pg.Pool, tables: string[]): Promise<void> {
  for (const t of tables) await db.query(`DROP TABLE IF EXISTS ${t}`);
}

/** Keeps the current snapshot plus the newest others up to `keep` per (dataset, scope); drops the rest. */
export async function applyRetention(pool: pg.Pool, dataset: string, scope: string, keep: number): Promise<number[]> {
  const all = await catalog.snapshotsWithTables(pool, dataset, scope);
  const byNewest = [...all].sort((a, b) => b.snapshot_id - a.snapshot_id);
  const current = byNewest.find((s) => s.is_current);
  const others = byNewest.filter((s) => !s.is_current);
  const kept = new Set<number>(current ? [current.snapshot_id] : []);
  for (const s of others) if (kept.size < keep) kept.add(s.snapshot_id);
  const dropped: number[] = [];
  for (const s of byNewest) {
    if (kept.has(s.snapshot_id)) continue;
    await withTransaction(pool, async (c) => {
      await dropSnapshotTables(c, s.tables);
      await forgetOverlaps(c, s.snapshot_id);
      await catalog.setSnapshotFields(c, s.snapshot_id, { status: 'dropped' });
    });
    dropped.push(s.snapshot_id);
  }
  return dropped;
}
