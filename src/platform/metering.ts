// The API's metering hooks: admission (rate limit, quota reservation, headers) before any
// work, in one database round trip shared with the requests admitted alongside
// (./limits-batch.ts); once the answer's status is known (onSend), a reservation the answer
// does not use is refunded (X-Quota-Used then excludes it) and the history row goes to the
// batch writer (./history-writer.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { LGPD_BASES } from '../api/car/schemas.ts';
import { Cursors } from '../api/cursor.ts';
import { isConnectionError } from '../db/pool.ts';
import { AgroError } from '../errors.ts';
import { maskRequestUrl } from '../privacy.ts';
import type { HistoryWriter } from './history-writer.ts';
import type { Plan } from './keys.ts';
import type { RefundRetries } from './refund-retry.ts';
import type { Admitter } from './limits-batch.ts';
import { PLAN_LIMITS, queueQuotaThresholds, reachesThreshold, refundQuota, windowOf } from './limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** `at`: the admission's instant, which decides the month billed; the history row carries it too. */
    metering?: { at: Date; month: string; used: number; free: boolean; reserved: boolean; refusal?: AgroError };
  }
  interface FastifyContextConfig {
    /** An authenticated route that is not a data endpoint (history, panel): never billed. */
    unbilled?: boolean;
  }
}

/** The stored path: documents masked, percent-escapes decoded, storable text, bounded (src/privacy.ts). */
export const historyPath = (url: string): string => maskRequestUrl(url, 2_000);

/**
 * A following page (with a cursor) of a lookup already counted to this key's meter. Only on a
 * route that pages (its query schema has `cursor`): elsewhere an unknown parameter is ignored,
 * and `?cursor=x` would have made any lookup free. A cursor another key's lookup was billed for
 * (shared, leaked, a sandbox key's) is billed: quota is per key. Cursors issued before they named
 * their meter page on free.
 */
function isFollowingPage(req: FastifyRequest, cursors: Cursors): boolean {
  const schema = req.routeOptions.schema?.querystring as { properties?: Record<string, unknown> } | undefined;
  if (schema?.properties?.cursor === undefined) return false;
  const q = req.query as Record<string, unknown> | undefined;
  if (typeof q?.cursor !== 'string' || q.cursor === '') return false;
  const body = cursors.peek(q.cursor);
  return body !== null && (body.m === undefined || (req.apiKey !== undefined && body.m === Cursors.meterTag(req.apiKey.meter)));
}

/** Rate limit then quota, before the route does any work; sets the headers of every authenticated answer. */
export async function admit(admitter: Admitter, cursors: Cursors, req: FastifyRequest, reply: FastifyReply, nowMs = Date.now()): Promise<void> {
  const key = req.apiKey!;
  const plan = key.plan as Plan;
  const limits = PLAN_LIMITS[plan];
  const w = windowOf(nowMs);
  const free = key.env !== 'live' || req.routeOptions.config?.unbilled === true || isFollowingPage(req, cursors);
  const a = await admitter.admit({ keyId: key.meter, plan, windowStart: w.windowStart, month: w.month, reserve: !free });
  req.metering = { at: new Date(nowMs), month: w.month, used: key.env === 'live' ? a.used : 0, free, reserved: a.reserved };
  const remaining = Math.max(0, limits.perMinute - a.n);
  const resetIn = Math.max(1, Math.ceil(w.resetEpoch - nowMs / 1000));
  reply.headers({
    'x-ratelimit-limit': String(limits.perMinute),
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(w.resetEpoch),
    'x-quota-used': String(req.metering.used),
    'x-quota-limit': String(limits.perMonth),
    // draft-ietf-httpapi-ratelimit-headers: the policy and the current state of the same window.
    'ratelimit-policy': `"minute";q=${limits.perMinute};w=60`,
    ratelimit: `"minute";r=${remaining};t=${resetIn}`,
  });
  if (a.n > limits.perMinute) {
    reply.header('retry-after', String(resetIn));
    throw new AgroError('rate_limited', `${limits.perMinute} requests per minute on the ${key.plan} plan; retry in ${resetIn} s`);
  }
  if (!free && !a.reserved) {
    const refusal = new AgroError('quota_exceeded', `${req.metering.used} of ${limits.perMonth} billable requests used this month on the ${key.plan} plan`);
    // A POST with an Idempotency-Key may be the retry of an answer already stored, and a replay
    // is free: the idempotency check (after validation) replays it or throws this refusal.
    if (req.method === 'POST' && req.headers['idempotency-key'] !== undefined) req.metering.refusal = refusal;
    else throw refusal;
  }
}

/**
 * Once the status is known: refunds the reservation of an answer that does not count (4xx,
 * 5xx, an idempotent replay) before the answer leaves, so that X-Quota-Used and the counter
 * are exact when the client sees it; queues the quota.threshold events a counted answer
 * reaches; queues the history row. A failure is logged, never the client's; a refund the
 * database was not there to take is made once it is back (./refund-retry.ts).
 */
export async function settle(pool: pg.Pool, history: HistoryWriter, refunds: RefundRetries, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const key = req.apiKey;
  const m = req.metering;
  if (!key || !m) return;
  req.metering = undefined; // once per request, even if onSend runs again for an error answer
  const status = reply.statusCode;
  const replayed = reply.getHeader('idempotent-replayed') === 'true';
  const billable = m.reserved && !replayed && status >= 200 && status < 300;
  try {
    if (m.reserved && !billable) {
      const used = await refundQuota(pool, key.meter, m.month);
      if (used !== null) reply.header('x-quota-used', String(used));
    } else if ((billable || (status === 402 && !m.free)) && reachesThreshold(key.plan as Plan, m.used)) {
      // Only past 70 % of the month's quota, and only for an answer that counts, or for the
      // quota's refusal (its usage is the month's counter): a plan change that leaves the month
      // at or over the new limit would otherwise never announce 100 %, no answer counting any more.
      // Once a month per meter, like the count (a rotated key's successor does not announce its
      // month's thresholds again), about the key in use (its endpoints get it).
      await queueQuotaThresholds(pool, { keyId: key.id, meter: key.meter, plan: key.plan as Plan, month: m.month, used: m.used });
    }
  } catch (err) {
    req.log.error({ err, billable }, 'cannot refund the quota of an answer that does not count, or queue its threshold events');
    if (m.reserved && !billable && isConnectionError(err)) refunds.push(key.meter, m.month);
  }
  const lgpd = req.headers['x-lgpd-base-legal'];
  history.push({
    id: req.id, keyId: key.id, method: req.method, path: historyPath(req.url), status, billable,
    lgpdBase: typeof lgpd === 'string' && (LGPD_BASES as readonly string[]).includes(lgpd) ? lgpd : null,
    // The admission's instant, not the answer's: a request admitted at 23:59:59.9 on a month's
    // last day is billed to that month, and its history row (the panel's days) must say so.
    createdAt: m.at,
  });
}
