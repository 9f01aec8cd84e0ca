// A result read through a server-side cursor, a batch at a time: for statements whose rows grow
// with the data (every monitor of a key, every change of a publish), so that the process holds
// one batch, never the whole result.
import type pg from 'pg';

/** Rows per FETCH where the caller names none. */
export const BATCH_ROWS = 1_000;

let cursors = 0;

/**
 * Hands the rows of `sql` to `each`, at most `size` at a time, in the statement's order; returns
 * how many there were. A cursor lives in a transaction: the caller's when `client` is in one
 * (`ownTransaction: false`), else one of its own (read only), ended here.
 */
export async function forEachBatch<R>(
  client: pg.ClientBase,
  sql: string,
  params: unknown[],
  each: (rows: R[]) => Promise<void> | void,
  o: { size?: number; ownTransaction: boolean },
): Promise<number> {
  const size = o.size ?? BATCH_ROWS;
  const name = `agro_batches_${++cursors}`;
  if (o.ownTransaction) await client.query('BEGIN READ ONLY');
  try {
    await client.query(`DECLARE ${name} NO SCROLL CURSOR FOR ${sql}`, params);
    let n = 0;
    for (;;) {
      const r = await client.query(`FETCH ${size} FROM ${name}`);
      if (r.rows.length) await each(r.rows as R[]);
      n += r.rows.length;
      if (r.rows.length < size) break;
    }
    await client.query(`CLOSE ${name}`);
    if (o.ownTransaction) await client.query('COMMIT');
    return n;
  } catch (e) {
    if (o.ownTransaction) await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}
