// Retention of the webhook tables: an event whose deliveries are all settled (delivered, or
// given up after the retries) is deleted with them and their log once it is older than the
// query history's retention; an event still pending anywhere, or not yet fanned out, stays.
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

/** Deletes settled webhook events older than `retentionMonths` (deliveries and attempts cascade). */
export async function purgeEvents(db: Db, retentionMonths: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM events.outbox o
      WHERE o.created_at < now() - make_interval(months => $1) AND o.dispatched_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM events.deliveries d WHERE d.event_id = o.id AND d.status = 'pending')`,
    [retentionMonths],
  );
  return r.rowCount ?? 0;
}
