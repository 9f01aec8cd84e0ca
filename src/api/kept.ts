// Answers read in several statements resolve their snapshot ids once, then read each table by
// id (snapshot tables never change once loaded), so a publish between two statements changes
// nothing. Chosen over one transaction per request holding ACCESS SHARE on the serving views:
// nothing waits (a publish would queue behind steady traffic, and a request would hold one
// pool client throughout, losing the enrichment's parallel statements), and it costs next to
// nothing: GET /car and the enrichment fold the ids into statements they ran anyway, and the
// check below replaces the second resolution GET /car?include and by-document made (measured
// over the fixtures, 150 requests per route: medians within noise before and after, ~1.8 ms
// /car, ~3.5 ms with include, ~2 ms by-geometry, ~3 ms enrichment). What can change is that
// retention drops one of those snapshots meanwhile (an old one of an as_of read or a cursor,
// or one superseded twice during the request): the
// serving.*_snapshot functions then read nothing, or the table vanishes under a statement
// (42P01). Such an answer is a 503 to retry (Retry-After), never a partial answer or a raw
// PostgreSQL error.
import type pg from 'pg';
import { AgroError } from '../errors.ts';

type Db = pg.Pool | pg.ClientBase;

/** Which of the given snapshots are still readable (tables kept). */
export async function keptSnapshotIds(db: Db, ids: number[]): Promise<Set<number>> {
  const r = await db.query(`SELECT snapshot_id FROM serving.snapshots_legiveis WHERE snapshot_id = ANY ($1)`, [ids]);
  return new Set(r.rows.map((x) => Number(x.snapshot_id)));
}

const dropped = (ids: number[]) =>
  new AgroError('upstream_unavailable', `snapshot ${ids.join(', ')} was dropped by retention while this answer was read; retry`);

/** Throws the retry 503 when one of `ids` is no longer readable. */
export async function assertKept(db: Db, ids: number[]): Promise<void> {
  const kept = await keptSnapshotIds(db, ids);
  const gone = [...new Set(ids)].filter((id) => !kept.has(id));
  if (gone.length) throw dropped(gone);
}

/**
 * Runs the by-id reads of an answer, then checks that every snapshot they read is still kept
 * (only when `suspect` says so: a single read of a dropped snapshot can only come back empty).
 */
export async function readKept<T>(db: Db, ids: number[], read: () => Promise<T>, suspect: (out: T) => boolean = () => true): Promise<T> {
  let out: T;
  try {
    out = await read();
  } catch (e) {
    // A table gone under a statement: retention's doing when one of the snapshots went with it.
    if ((e as { code?: string }).code === '42P01') await assertKept(db, ids);
    throw e;
  }
  if (suspect(out)) await assertKept(db, ids);
  return out;
}
