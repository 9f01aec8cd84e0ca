// GET /v1/car/history (contract §4): the calling key's requests, newest first, documents
// masked (they were masked when stored), the LGPD legal basis when one was given.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type pg from 'pg';
import { Type } from 'typebox';
import { Cursors } from '../api/cursor.ts';
import type { ApiDeps } from '../api/deps.ts';
import { ErrorResponses, Nullable, Timestamp } from '../api/schemas.ts';
import { isCalendarDate } from '../dates.ts';
import { AgroError } from '../errors.ts';
import { flushHistory } from './history-writer.ts';

const UtcDate = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'UTC date, inclusive' });

const HistoryItem = Type.Object({
  id: Type.String({ description: 'the request id (X-Request-Id of that answer)' }),
  method: Type.String(),
  path: Type.String({ description: 'path and query, CPFs masked' }),
  status: Type.Integer(),
  billable: Type.Boolean(),
  created_at: Timestamp,
  base_legal: Type.Optional(Type.String({ description: 'X-LGPD-Base-Legal sent with the request' })),
});

export const HistorySchema = {
  summary: "The calling key's request history",
  tags: ['car'],
  querystring: Type.Object({
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 25 }),
    cursor: Type.Optional(Type.String({ maxLength: 4096 })),
    from: Type.Optional(UtcDate),
    to: Type.Optional(UtcDate),
  }),
  response: {
    200: Type.Object({ results: Type.Array(HistoryItem), count: Type.Integer(), next_cursor: Nullable(Type.String()) }),
    ...ErrorResponses,
  },
};

export interface HistoryRow {
  seq: string;
  id: string;
  method: string;
  path: string;
  status: number;
  billable: boolean;
  lgpd_base: string | null;
  created_at: Date;
}

/**
 * A key's history page, newest first, between two inclusive UTC dates, after the row `before`
 * (its seq, from the cursor). Newest by created_at, not seq: each `agro serve` process writes
 * its rows in batches, so with several processes a request's seq follows when its process
 * flushed, not when it was answered (ties by seq). The rows this process still buffers are
 * written first: a caller sees its own calls.
 */
export async function historyPage(db: pg.Pool, o: { keyId: string; from: string | null; to: string | null; before: string | null; limit: number }): Promise<HistoryRow[]> {
  await flushHistory(db);
  const r = await db.query(
    `SELECT seq, id, method, path, status, billable, lgpd_base, created_at FROM platform.requests
     WHERE key_id = $1
       AND ($2::date IS NULL OR created_at >= ($2::date)::timestamp AT TIME ZONE 'UTC')
       AND ($3::date IS NULL OR created_at < ($3::date + 1)::timestamp AT TIME ZONE 'UTC')
       AND ($4::bigint IS NULL OR (created_at, seq) < (SELECT b.created_at, b.seq FROM platform.requests b WHERE b.key_id = $1 AND b.seq = $4::bigint))
     ORDER BY created_at DESC, seq DESC LIMIT $5`,
    [o.keyId, o.from, o.to, o.before, o.limit],
  );
  return r.rows;
}

function checkDate(name: string, v: string | undefined): string | null {
  if (v === undefined) return null;
  if (!isCalendarDate(v)) throw new AgroError('invalid_request', `${name}: not a calendar date (YYYY-MM-DD)`);
  return v;
}

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

export function historyRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get('/car/history', { schema: HistorySchema, config: { unbilled: true } }, async (req) => {
      const q = req.query;
      const from = checkDate('from', q.from);
      const to = checkDate('to', q.to);
      if (from && to && from > to) throw new AgroError('invalid_request', 'from: must not be after to');
      const keyId = req.apiKey!.id;
      const fingerprint = Cursors.fingerprint(['history', keyId, from, to]);
      const before = q.cursor !== undefined ? deps.cursors.decode(q.cursor, fingerprint).k : null;
      if (before !== null && !/^\d{1,19}$/.test(before)) throw new AgroError('invalid_request', 'cursor: not a cursor returned by this API');
      const rows = await historyPage(deps.pool, { keyId, from, to, before, limit: q.limit + 1 });
      const page = rows.slice(0, q.limit);
      const results = page.map((r) => ({
        id: r.id, method: r.method, path: r.path, status: r.status, billable: r.billable, created_at: iso(r.created_at),
        ...(r.lgpd_base ? { base_legal: r.lgpd_base } : {}),
      }));
      const next = rows.length > q.limit ? deps.cursors.encode({ q: fingerprint, s: {}, k: String(page[page.length - 1].seq) }) : null;
      return { results, count: results.length, next_cursor: next };
    });
  };
}
