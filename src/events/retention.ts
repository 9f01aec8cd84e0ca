// Retention of the webhook tables: the deliveries of an event older than the query history's
// retention are deleted, with their log, once settled (delivered, or given up after the
// retries) or when their endpoint is disabled (a 410: nothing will ever be sent to it again).
// The event itself stays (one small row): the record of what was announced, which
// `agro webhooks replay` can still send; the bulk is the deliveries and their attempts.
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

/** Deletes the settled deliveries (attempts cascade) of webhook events older than `retentionMonths`. */
export async function purgeDeliveries(db: Db, retentionMonths: number): Promise<number> {
  const r = await db.query(
    `DELETE FROM events.deliveries d USING events.outbox o, events.endpoints e
      WHERE o.id = d.event_id AND e.id = d.endpoint_id AND o.created_at < now() - make_interval(months => $1)
        AND (d.status <> 'pending' OR e.disabled_at IS NOT NULL)`,
    [retentionMonths],
  );
  return r.rowCount ?? 0;
}
