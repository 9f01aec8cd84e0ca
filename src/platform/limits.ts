// Rate limit (per key per UTC minute, fixed window) and monthly quota (per key per UTC month)
// by plan (contract §4, the reference's plan table). Both counters are database rows, so that
// every server process sharing the database enforces the same limit exactly:
//  - admission: one round trip (platform.admit_request, sql/0070) bumps the minute's counter
//    and reserves a unit of the month's quota before any work;
//  - an answer that does not count gives its unit back (platform.refund_quota); the history
//    row is written in batches off the request path (./history-writer.ts).
import type pg from 'pg';
import type { Plan } from './keys.ts';

export const PLAN_LIMITS: Readonly<Record<Plan, { perMinute: number; perMonth: number }>> = Object.freeze({
  starter: { perMinute: 30, perMonth: 50 },
  growth: { perMinute: 60, perMonth: 100 },
  professional: { perMinute: 120, perMonth: 200 },
  scale: { perMinute: 300, perMonth: 500 },
  enterprise: { perMinute: 600, perMonth: 700 },
});

export const QUOTA_THRESHOLDS = [70, 90, 100] as const;

type Db = pg.Pool | pg.ClientBase;

/** The UTC minute window and month of an instant. */
export function windowOf(nowMs: number): { windowStart: Date; resetEpoch: number; month: string } {
  const start = Math.floor(nowMs / 60_000) * 60_000;
  const d = new Date(nowMs);
  const month = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
  return { windowStart: new Date(start), resetEpoch: start / 1000 + 60, month };
}

export interface Admission {
  /** Requests seen in the key's minute window, this one included. */
  n: number;
  /** The month's billable usage (this request's reservation included when made). */
  used: number;
  /** Whether a unit of the month's quota was reserved for this request. */
  reserved: boolean;
}

export interface AdmissionRequest {
  keyId: string;
  plan: Plan;
  windowStart: Date;
  month: string;
  /** Reserve a unit of the month's quota (a live key on a billable route). */
  reserve: boolean;
}

// A named statement: parsed and planned once per connection.
const ADMIT_SQL = 'SELECT i, rate_n, quota_used, reserved FROM platform.admit_requests($1, $2, $3, $4, $5, $6)';

/**
 * Admits requests in one statement: for each, counts it in its key's minute window and, when
 * `reserve` and it is within the rate limit, reserves one unit of the month's quota if one is
 * left. Answers in input order.
 */
export async function admitRequests(db: Db, rs: readonly AdmissionRequest[]): Promise<Admission[]> {
  const limits = rs.map((x) => PLAN_LIMITS[x.plan]);
  const r = await db.query({
    name: 'platform_admit_requests',
    text: ADMIT_SQL,
    values: [rs.map((x) => x.keyId), rs.map((x) => x.windowStart), rs.map((x) => x.month), limits.map((l) => l.perMinute), limits.map((l) => l.perMonth), rs.map((x) => x.reserve)],
  });
  const out: Admission[] = new Array(rs.length);
  for (const row of r.rows) out[row.i - 1] = { n: Number(row.rate_n), used: Number(row.quota_used), reserved: row.reserved === true };
  return out;
}

/** Whether a counted answer that brought the month's usage to `used` reaches a threshold (70 % and up). */
export const reachesThreshold = (plan: Plan, used: number) => used >= Math.ceil((PLAN_LIMITS[plan].perMonth * QUOTA_THRESHOLDS[0]) / 100);

/** Queues the quota.threshold events a counted answer reached (each once per meter and month, whatever the concurrency), about `keyId`. */
export async function queueQuotaThresholds(db: Db, o: { keyId: string; meter: string; plan: Plan; month: string; used: number }): Promise<void> {
  await db.query({
    name: 'platform_quota_thresholds',
    text: `SELECT platform.queue_quota_thresholds($1, $2, $3, $4, $5, $6, '{${QUOTA_THRESHOLDS.join(',')}}')`,
    values: [o.keyId, o.meter, o.month, o.plan, o.used, PLAN_LIMITS[o.plan].perMonth],
  });
}

/** Gives back a unit reserved at admission. Returns the month's usage after it (null when there was none). */
export async function refundQuota(db: Db, keyId: string, month: string): Promise<number | null> {
  const r = await db.query({ name: 'platform_refund_quota', text: 'SELECT platform.refund_quota($1, $2) AS used', values: [keyId, month] });
  const used = r.rows[0]?.used;
  return used === null || used === undefined ? null : Number(used);
}

/** Deletes history older than the retention and minute windows older than an hour. */
export async function purgeHistory(db: Db, retentionMonths: number): Promise<{ requests: number; windows: number }> {
  const a = await db.query(`DELETE FROM platform.requests WHERE created_at < now() - make_interval(months => $1)`, [retentionMonths]);
  const b = await db.query(`DELETE FROM platform.rate_windows WHERE window_start < now() - interval '1 hour'`);
  return { requests: a.rowCount ?? 0, windows: b.rowCount ?? 0 };
}
