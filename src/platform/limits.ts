// Rate limit (per key per UTC minute, fixed window) and monthly quota (per key per UTC month)
// by plan (contract §4, the reference's plan table). Both counters are database rows, so that
// every server process sharing the database enforces the same limit exactly:
//  - admission: one round trip bumps the minute's counter and reads the month's usage;
//  - recording: one round trip after the answer is known writes the history row, counts a
//    billable answer and queues the quota.threshold events it crosses.
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

const ADMIT_SQL = `
WITH w AS (
  INSERT INTO platform.rate_windows (key_id, window_start, n) VALUES ($1, $2, 1)
  ON CONFLICT (key_id, window_start) DO UPDATE SET n = platform.rate_windows.n + 1
  RETURNING n
)
SELECT (SELECT n FROM w) AS n,
       coalesce((SELECT used FROM platform.usage_months WHERE key_id = $1 AND month = ($3 || '-01')::date), 0) AS used`;

/** Counts one request in the key's minute window; returns the window's count and the month's usage. */
export async function admitRequest(db: Db, keyId: string, windowStart: Date, month: string): Promise<{ n: number; used: number }> {
  const r = await db.query(ADMIT_SQL, [keyId, windowStart, month]);
  return { n: Number(r.rows[0].n), used: Number(r.rows[0].used) };
}

// The threshold events: one row per (key, month, threshold), whatever the concurrency (the
// unique `dedupe` and a deterministic id). `>=` (not `=`) so that a plan change mid-month
// still emits the thresholds it jumps over.
const RECORD_SQL = `
WITH u AS (
  INSERT INTO platform.usage_months (key_id, month, used)
  SELECT $2, ($8 || '-01')::date, 1 WHERE $6
  ON CONFLICT (key_id, month) DO UPDATE SET used = platform.usage_months.used + 1
  RETURNING used
), h AS (
  INSERT INTO platform.requests (id, key_id, method, path, status, billable, lgpd_base)
  VALUES ($1, $2, $3, $4, $5, $6, $7)
), e AS (
  INSERT INTO events.outbox (id, type, dedupe, body)
  SELECT 'evt_' || substr(md5(d.dedupe), 1, 24), 'quota.threshold', d.dedupe,
         jsonb_build_object(
           'id', 'evt_' || substr(md5(d.dedupe), 1, 24), 'type', 'quota.threshold',
           'created_at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'api_version', 'v1',
           'data', jsonb_build_object('key_id', $2::text, 'plan', $9::text, 'threshold', d.pct, 'used', d.used, 'limit', $10::int, 'month', $8::text))
  FROM (SELECT t.pct, u.used, 'quota.threshold:' || $2 || ':' || $8 || ':' || t.pct AS dedupe
        FROM u CROSS JOIN unnest($11::int[]) AS t(pct)
        WHERE u.used >= ceil($10::int * t.pct / 100.0)) d
  ON CONFLICT DO NOTHING
)
SELECT (SELECT used FROM u) AS used`;

export interface RequestRecord {
  id: string;
  keyId: string;
  plan: Plan;
  method: string;
  path: string;
  status: number;
  billable: boolean;
  lgpdBase: string | null;
  month: string;
}

/** Writes the history row; a billable answer is counted. Returns the month's usage after it (null when not billable). */
export async function recordRequest(db: Db, r: RequestRecord): Promise<number | null> {
  const res = await db.query(RECORD_SQL, [
    r.id, r.keyId, r.method, r.path, r.status, r.billable, r.lgpdBase, r.month, r.plan, PLAN_LIMITS[r.plan].perMonth, QUOTA_THRESHOLDS,
  ]);
  const used = res.rows[0].used;
  return used === null ? null : Number(used);
}

/** Deletes history older than the retention and minute windows older than an hour. */
export async function purgeHistory(db: Db, retentionMonths: number): Promise<{ requests: number; windows: number }> {
  const a = await db.query(`DELETE FROM platform.requests WHERE created_at < now() - make_interval(months => $1)`, [retentionMonths]);
  const b = await db.query(`DELETE FROM platform.rate_windows WHERE window_start < now() - interval '1 hour'`);
  return { requests: a.rowCount ?? 0, windows: b.rowCount ?? 0 };
}
