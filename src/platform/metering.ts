// The API's metering hooks: admission (rate limit, quota, headers) before any work, and the
// history row / quota count once the answer's status is known (onSend, so that X-Quota-Used
// already includes this answer).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { LGPD_BASES } from '../api/car/schemas.ts';
import { AgroError } from '../errors.ts';
import { maskCpfsInText } from '../privacy.ts';
import type { Plan } from './keys.ts';
import { admitRequest, PLAN_LIMITS, recordRequest, windowOf } from './limits.ts';

declare module 'fastify' {
  interface FastifyRequest {
    metering?: { month: string; used: number; free: boolean };
  }
  interface FastifyContextConfig {
    /** An authenticated route that is not a data endpoint (history, panel): never billed. */
    unbilled?: boolean;
  }
}

/** The stored path: documents masked (percent-escapes decoded first), bounded. */
export function historyPath(url: string): string {
  let u = url;
  try {
    u = decodeURIComponent(url);
  } catch {
    /* keep the raw text */
  }
  return maskCpfsInText(u).slice(0, 2_000);
}

/** A following page (with a cursor) of a lookup already counted. */
function isFollowingPage(req: FastifyRequest): boolean {
  const q = req.query as Record<string, unknown> | undefined;
  return typeof q?.cursor === 'string' && q.cursor !== '';
}

/** Rate limit then quota, before the route does any work; sets the headers of every authenticated answer. */
export async function admit(pool: pg.Pool, req: FastifyRequest, reply: FastifyReply, nowMs = Date.now()): Promise<void> {
  const key = req.apiKey!;
  const limits = PLAN_LIMITS[key.plan as Plan];
  const w = windowOf(nowMs);
  const { n, used } = await admitRequest(pool, key.id, w.windowStart, w.month);
  const free = key.env !== 'live' || req.routeOptions.config?.unbilled === true || isFollowingPage(req);
  req.metering = { month: w.month, used: key.env === 'live' ? used : 0, free };
  const remaining = Math.max(0, limits.perMinute - n);
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
  if (n > limits.perMinute) {
    reply.header('retry-after', String(resetIn));
    throw new AgroError('rate_limited', `${limits.perMinute} requests per minute on the ${key.plan} plan; retry in ${resetIn} s`);
  }
  if (!free && req.metering.used >= limits.perMonth) {
    throw new AgroError('quota_exceeded', `${req.metering.used} of ${limits.perMonth} billable requests used this month on the ${key.plan} plan`);
  }
}

/** Records the answer in the history; counts it when billable. A failure is logged, never the client's. */
export async function record(pool: pg.Pool, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const key = req.apiKey;
  const m = req.metering;
  if (!key || !m) return;
  const status = reply.statusCode;
  const replayed = reply.getHeader('idempotent-replayed') === 'true';
  const billable = !m.free && !replayed && status >= 200 && status < 300;
  const lgpd = req.headers['x-lgpd-base-legal'];
  try {
    const used = await recordRequest(pool, {
      id: req.id, keyId: key.id, plan: key.plan as Plan, method: req.method, path: historyPath(req.url), status, billable,
      lgpdBase: typeof lgpd === 'string' && (LGPD_BASES as readonly string[]).includes(lgpd) ? lgpd : null, month: m.month,
    });
    if (used !== null) reply.header('x-quota-used', String(used));
  } catch (err) {
    req.log.error({ err, billable }, 'cannot record the request in the history');
  }
}
