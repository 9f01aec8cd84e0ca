// Draining the outbox (contract §5). One pass:
//  1. fan-out: each new outbox row becomes one delivery per enabled endpoint of its key that
//     subscribes to its type (a test event: the one endpoint it names);
//  2. claim the due deliveries (FOR UPDATE SKIP LOCKED, then a lease: no transaction stays
//     open across an HTTP call, several processes share the work, a dead process's lease
//     expires and the delivery is tried again — at least once);
//  3. POST each, log the attempt, then: 2xx delivered; 410 Gone disables the endpoint;
//     anything else is retried with exponential backoff and jitter, 9 attempts over ~3 days.
// The clock and the jitter are injected, so that tests run three days of retries at once.
import crypto from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../config.ts';
import { AgroError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { keyActiveSql } from '../platform/keys.ts';
import { TEST_EVENT } from './endpoints.ts';
import { postWebhook, type AttemptResult } from './post.ts';
import { signatureHeaders } from './signing.ts';

type Db = pg.Pool | pg.ClientBase;

/** Retries: 1 min × 4^(n−1), at most 24 h, ±20 % jitter; 9 attempts ≈ 71 h (the nominal sum). */
export const RETRY = Object.freeze({ firstDelayMs: 60_000, factor: 4, maxDelayMs: 24 * 3_600_000, jitter: 0.2, maxAttempts: 9 });
/** How long a claim holds a delivery: a deliverer that dies mid-POST leaves it to be retried after this. */
export const LEASE_MS = 60_000;

/** The wait after the n-th failed attempt (n ≥ 1); `random` in [0, 1). */
export function retryDelayMs(n: number, random: number): number {
  const base = Math.min(RETRY.firstDelayMs * RETRY.factor ** (n - 1), RETRY.maxDelayMs);
  return Math.round(base * (1 - RETRY.jitter + 2 * RETRY.jitter * random));
}

export interface DrainDeps {
  pool: pg.Pool;
  cfg: Pick<Config, 'webhooks'>;
  log?: Logger;
  now?: () => number;
  random?: () => number;
  /** POST timeout (10 s by the contract; tests shorten it). */
  timeoutMs?: number;
}

/**
 * An endpoint of the event's key or of another key on its meter (its rotation chain): a key's
 * subscriptions move to its successor at rotation (src/platform/keys.ts), while the old key,
 * in its grace period, still makes events about itself.
 */
const SAME_METER = (endpointKey: string, eventKey: string) =>
  `(${endpointKey} = ${eventKey} OR ${endpointKey} IN (SELECT s.id FROM platform.api_keys k JOIN platform.api_keys s ON coalesce(s.meter_id, s.id) = coalesce(k.meter_id, k.id) WHERE k.id = ${eventKey}))`;

/**
 * The endpoint's key may still be used (keyActiveSql, the API's key check): a revoked key's subscriptions hear nothing more
 * (no delivery of what it queued before, no retry, no replay); a rotated key's endpoints are
 * on its successor already.
 */
const KEY_ACTIVE = (endpointKey: string) =>
  `EXISTS (SELECT 1 FROM platform.api_keys ak WHERE ak.id = ${endpointKey} AND ${keyActiveSql('ak')})`;

const FAN_OUT_SQL = `
WITH ev AS (
  SELECT id, type, key_id, endpoint_id FROM events.outbox
   WHERE dispatched_at IS NULL ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED
), ins AS (
  INSERT INTO events.deliveries (event_id, endpoint_id, next_attempt_at)
  SELECT ev.id, e.id, $2 FROM ev JOIN events.endpoints e ON ${SAME_METER('e.key_id', 'ev.key_id')} AND e.disabled_at IS NULL AND ${KEY_ACTIVE('e.key_id')}
   AND (ev.endpoint_id = e.id OR (ev.endpoint_id IS NULL AND ev.type <> '${TEST_EVENT}' AND (ev.type = ANY (e.events) OR '*' = ANY (e.events))))
  ON CONFLICT DO NOTHING
  RETURNING 1
)
UPDATE events.outbox o SET dispatched_at = $2 FROM ev WHERE o.id = ev.id
RETURNING (SELECT count(*) FROM ins) AS deliveries`;

/** Turns up to `limit` new outbox rows into deliveries; returns how many rows it took. */
export async function fanOut(db: Db, now: Date, limit = 500): Promise<{ events: number; deliveries: number }> {
  const r = await db.query(FAN_OUT_SQL, [limit, now]);
  return { events: r.rowCount ?? 0, deliveries: Number(r.rows[0]?.deliveries ?? 0) };
}

interface Claimed {
  event_id: string;
  endpoint_id: string;
  attempts: number;
  lease_token: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  body: unknown;
}

const CLAIM_SQL = `
WITH c AS (
  SELECT d.event_id, d.endpoint_id FROM events.deliveries d JOIN events.endpoints e ON e.id = d.endpoint_id AND e.disabled_at IS NULL AND ${KEY_ACTIVE('e.key_id')}
   WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND (d.lease_until IS NULL OR d.lease_until <= $1)
   ORDER BY d.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED
)
UPDATE events.deliveries d SET lease_token = $3, lease_until = $1::timestamptz + make_interval(secs => $4), attempts = d.attempts + 1
  FROM c, events.endpoints e, events.outbox o
 WHERE d.event_id = c.event_id AND d.endpoint_id = c.endpoint_id AND e.id = d.endpoint_id AND o.id = d.event_id
RETURNING d.event_id, d.endpoint_id, d.attempts, d.lease_token, e.url, e.secret, e.previous_secret, e.previous_secret_until, o.body`;

async function claim(db: Db, now: Date, limit: number): Promise<Claimed[]> {
  const r = await db.query(CLAIM_SQL, [now, limit, crypto.randomBytes(12).toString('hex'), LEASE_MS / 1000]);
  return r.rows;
}

/** Logs the attempt and settles the delivery, if this process still holds its lease. */
async function settle(pool: pg.Pool, c: Claimed, res: AttemptResult, at: Date, next: Date | null): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const status = res.ok ? 'delivered' : next ? 'pending' : 'failed';
    const u = await client.query(
      `UPDATE events.deliveries SET status = $4, next_attempt_at = coalesce($5, next_attempt_at), lease_token = NULL, lease_until = NULL,
              last_status = $6, last_error = $7, delivered_at = CASE WHEN $4 = 'delivered' THEN $8::timestamptz END
        WHERE event_id = $1 AND endpoint_id = $2 AND lease_token = $3`,
      [c.event_id, c.endpoint_id, c.lease_token, status, next, res.status, res.error, at],
    );
    if (u.rowCount) {
      await client.query(
        `INSERT INTO events.attempts (event_id, endpoint_id, attempt, at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [c.event_id, c.endpoint_id, c.attempts, at, res.status, res.error, res.durationMs],
      );
      if (res.status === 410) {
        await client.query(`UPDATE events.endpoints SET disabled_at = $2, disabled_reason = $3 WHERE id = $1 AND disabled_at IS NULL`, [
          c.endpoint_id, at, `answered 410 Gone to event ${c.event_id}`,
        ]);
      }
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

export interface PassResult {
  events: number;
  attempted: number;
  delivered: number;
  retrying: number;
  failed: number;
}

/** One pass: fan out, then deliver what is due now (up to `batch` deliveries). */
export async function drainOnce(d: DrainDeps, batch = 8): Promise<PassResult> {
  const now = () => new Date((d.now ?? Date.now)());
  const random = d.random ?? Math.random;
  const fan = await fanOut(d.pool, now());
  const claimed = await claim(d.pool, now(), batch);
  const result: PassResult = { events: fan.events, attempted: claimed.length, delivered: 0, retrying: 0, failed: 0 };
  await Promise.all(
    claimed.map(async (c) => {
      const at = now();
      const t = Math.floor(at.getTime() / 1000);
      const secrets = [c.secret, ...(c.previous_secret && c.previous_secret_until && c.previous_secret_until > at ? [c.previous_secret] : [])];
      // jsonb keeps keys in its own order: send them in the contract's (the signature covers these bytes)
      const e = c.body as Record<string, unknown>;
      const body = JSON.stringify({ id: e.id, type: e.type, created_at: e.created_at, api_version: e.api_version, ...e });
      const res = await postWebhook(c.url, body, signatureHeaders(secrets, c.event_id, t, body), {
        allowPrivate: d.cfg.webhooks.allowPrivate, timeoutMs: d.timeoutMs,
      });
      const gone = res.status === 410;
      const next = res.ok || gone || c.attempts >= RETRY.maxAttempts ? null : new Date(at.getTime() + retryDelayMs(c.attempts, random()));
      await settle(d.pool, c, res, at, next);
      if (res.ok) result.delivered++;
      else if (next) result.retrying++;
      else result.failed++;
      d.log?.[res.ok ? 'debug' : 'warn']({ event: c.event_id, endpoint: c.endpoint_id, attempt: c.attempts, status: res.status, error: res.error }, 'webhook attempt');
    }),
  );
  return result;
}

/** Passes until nothing more is due now (`agro webhooks deliver --once`). */
export async function drainUntilIdle(d: DrainDeps, stopping: () => boolean = () => false): Promise<PassResult> {
  const total: PassResult = { events: 0, attempted: 0, delivered: 0, retrying: 0, failed: 0 };
  while (!stopping()) {
    const r = await drainOnce(d);
    for (const k of Object.keys(total) as (keyof PassResult)[]) total[k] += r[k];
    if (r.attempted === 0 && r.events === 0) break;
  }
  return total;
}

/**
 * Deliveries another deliverer holds (leased, the lease not over at `now`): a pass leaves them
 * alone, and this process's own are settled once its pass ends. One whose deliverer died is
 * tried again when its lease ends.
 */
export async function leasedElsewhere(db: Db, now = new Date()): Promise<{ n: number; until: Date | null }> {
  const r = await db.query(
    `SELECT count(*)::int AS n, max(lease_until) AS until FROM events.deliveries WHERE status = 'pending' AND lease_until > $1`,
    [now],
  );
  return r.rows[0];
}

export interface InFlight {
  event_id: string;
  type: string;
  attempt: number;
  since: Date;
  lease_until: Date;
}

/**
 * An endpoint's deliveries a deliverer holds now (leased, no attempt logged yet): a POST under
 * way, or one whose deliverer died; either way it is tried again once the lease ends. `since`:
 * when it was claimed (a claim leases for LEASE_MS).
 */
export async function inFlight(db: Db, endpointId: string, now = new Date()): Promise<InFlight[]> {
  const r = await db.query(
    `SELECT d.event_id, o.type, d.attempts AS attempt, d.lease_until - make_interval(secs => $3) AS since, d.lease_until
       FROM events.deliveries d JOIN events.outbox o ON o.id = d.event_id
      WHERE d.endpoint_id = $1 AND d.status = 'pending' AND d.lease_until > $2 ORDER BY d.lease_until, d.event_id`,
    [endpointId, now, LEASE_MS / 1000],
  );
  return r.rows;
}

/** The continuous drainer of `agro serve`, `agro schedule` and `agro webhooks deliver`. */
export class Drainer {
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<unknown> | null = null;
  private stopped = false;
  constructor(private readonly d: DrainDeps) {}

  start(): this {
    this.stopped = false;
    const tick = () => {
      if (this.stopped) return;
      this.pass = drainUntilIdle(this.d, () => this.stopped)
        .catch((e) => this.d.log?.error({ err: e }, 'webhook drain pass failed'))
        .finally(() => {
          this.pass = null;
          if (!this.stopped) this.timer = setTimeout(tick, this.d.cfg.webhooks.pollMs);
        });
    };
    tick();
    return this;
  }

  /** Starts nothing more and waits for the pass under way (its leases are settled). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.pass;
  }
}

/**
 * Delivers an event again: its deliveries (to `endpointId` only, when given) become due now
 * with a fresh attempt count; an enabled subscribed endpoint without a delivery gets one.
 */
export async function replayEvent(db: Db, eventId: string, o: { endpointId?: string; keyIds?: string[] | null; now?: Date } = {}): Promise<number> {
  const ev = await db.query(`SELECT id FROM events.outbox WHERE id = $1 AND ($2::text[] IS NULL OR key_id = ANY ($2))`, [eventId, o.keyIds ?? null]);
  if (!ev.rowCount) throw new AgroError('event_not_found', eventId);
  const r = await db.query(
    `INSERT INTO events.deliveries (event_id, endpoint_id, next_attempt_at)
     SELECT o.id, e.id, $3 FROM events.outbox o JOIN events.endpoints e ON ${SAME_METER('e.key_id', 'o.key_id')} AND e.disabled_at IS NULL AND ${KEY_ACTIVE('e.key_id')}
      WHERE o.id = $1 AND ($2::text IS NULL OR e.id = $2)
        AND (o.endpoint_id = e.id OR (o.endpoint_id IS NULL AND o.type <> '${TEST_EVENT}' AND (o.type = ANY (e.events) OR '*' = ANY (e.events)))
             OR EXISTS (SELECT 1 FROM events.deliveries x WHERE x.event_id = o.id AND x.endpoint_id = e.id))
     ON CONFLICT (event_id, endpoint_id) DO UPDATE SET status = 'pending', attempts = 0, next_attempt_at = $3, lease_token = NULL, lease_until = NULL`,
    [eventId, o.endpointId ?? null, o.now ?? new Date()],
  );
  await db.query(`UPDATE events.outbox SET dispatched_at = coalesce(dispatched_at, $2) WHERE id = $1`, [eventId, o.now ?? new Date()]);
  return r.rowCount ?? 0;
}

/** Queues a `webhook.test` event for one endpoint; returns its id. */
export async function sendTestEvent(db: Db, endpoint: { id: string; key_id: string }): Promise<string> {
  const id = `evt_${crypto.randomBytes(12).toString('hex')}`;
  const body = {
    id, type: TEST_EVENT, created_at: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'), api_version: 'v1',
    data: { endpoint_id: endpoint.id, message: 'test event sent from the account panel or the CLI' },
  };
  await db.query(`INSERT INTO events.outbox (id, type, key_id, endpoint_id, body) VALUES ($1, $2, $3, $4, $5)`, [id, TEST_EVENT, endpoint.key_id, endpoint.id, body]);
  return id;
}
