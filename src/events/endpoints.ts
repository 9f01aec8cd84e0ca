// Webhook endpoints (subscriptions) of a key: add (the secret is shown once), list, remove,
// rotate the secret (the old one keeps signing for a dual-signing window), and their
// delivery log.
import crypto from 'node:crypto';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { subscriberKeyOf } from '../platform/keys.ts';
import { newSecret, secretKey } from './signing.ts';
import { parseTargetUrl, vetTarget, type Resolver } from './targets.ts';

type Db = pg.Pool | pg.ClientBase;

/** Event types a subscription may name (`*`: all of them). `webhook.test` goes to the one endpoint it is sent to. */
export const EVENT_TYPES = ['car.situacao.alterada', 'car.embargo.criado', 'socio.qsa.alterado', 'quota.threshold'] as const;
export const TEST_EVENT = 'webhook.test';
export const ROTATION_WINDOW_HOURS = 24;

export interface Endpoint {
  id: string;
  key_id: string;
  url: string;
  events: string[];
  created_at: Date;
  disabled_at: Date | null;
  disabled_reason: string | null;
  /** The previous secret still signs until then (after a rotation). */
  previous_secret_until: Date | null;
}

const COLUMNS = `id, key_id, url, events, created_at, disabled_at, disabled_reason,
  CASE WHEN previous_secret_until > now() THEN previous_secret_until END AS previous_secret_until`;

export function parseEventTypes(raw: string | string[]): string[] {
  const list = (Array.isArray(raw) ? raw : raw.split(',')).map((s) => s.trim()).filter(Boolean);
  if (list.length === 0) throw new AgroError('usage', `--events names one or more of ${EVENT_TYPES.join(', ')} (or *)`);
  for (const t of list) {
    if (t !== '*' && !(EVENT_TYPES as readonly string[]).includes(t)) throw new AgroError('usage', `unknown event type "${t}" (known: ${EVENT_TYPES.join(', ')}, or *)`);
  }
  return [...new Set(list)].sort();
}

export interface AddEndpoint {
  keyId: string;
  url: string;
  events: string | string[];
  secret?: string;
  allowPrivate: boolean;
  resolve?: Resolver;
  /** A panel form's one-time token (sql/0124, events.form_tokens): a second subscription with it is refused. */
  formToken?: string;
}

/** Subscribes a URL; the answer carries the secret, which is never shown again. */
export async function addEndpoint(db: Db, a: AddEndpoint): Promise<Endpoint & { secret: string }> {
  const u = parseTargetUrl(a.url);
  await vetTarget(u, a.allowPrivate, a.resolve);
  const events = parseEventTypes(a.events);
  const secret = a.secret ?? newSecret();
  secretKey(secret);
  const keyId = await subscriberKeyOf(db, a.keyId);
  const id = `we_${crypto.randomBytes(9).toString('base64url')}`;
  // A panel form's token (sql/0124) is recorded in the same statement: only its first use subscribes.
  const r = await db.query(
    `WITH once AS (INSERT INTO events.form_tokens (token, endpoint_id) SELECT $6, $1 WHERE $6::text IS NOT NULL ON CONFLICT (token) DO NOTHING RETURNING token)
     INSERT INTO events.endpoints (id, key_id, url, events, secret) SELECT $1, $2, $3, $4, $5 WHERE $6::text IS NULL OR EXISTS (SELECT FROM once)
     RETURNING ${COLUMNS}`,
    [id, keyId, u.toString(), events, secret, a.formToken ?? null],
  );
  if (!r.rowCount) {
    const made = await endpointOfForm(db, a.formToken!);
    throw new AgroError('form_used', `this form was already sent (subscription ${made})`, { endpoint: made });
  }
  return { ...r.rows[0], secret };
}

/** The subscription a panel form's token made or rotated (it may be removed since, or another account's). */
async function endpointOfForm(db: Db, formToken: string): Promise<string | null> {
  const r = await db.query(`SELECT endpoint_id FROM events.form_tokens WHERE token = $1`, [formToken]);
  return r.rows[0]?.endpoint_id ?? null;
}

export async function listEndpoints(db: Db, keyIds: string[] | null): Promise<Endpoint[]> {
  const r = await db.query(`SELECT ${COLUMNS} FROM events.endpoints WHERE $1::text[] IS NULL OR key_id = ANY ($1) ORDER BY created_at, id`, [keyIds]);
  return r.rows;
}

export async function getEndpoint(db: Db, id: string, keyIds: string[] | null = null): Promise<Endpoint | null> {
  const r = await db.query(`SELECT ${COLUMNS} FROM events.endpoints WHERE id = $1 AND ($2::text[] IS NULL OR key_id = ANY ($2))`, [id, keyIds]);
  return r.rows[0] ?? null;
}

/** Removes an endpoint with its deliveries and log; false when there is none. */
export async function removeEndpoint(db: Db, id: string, keyIds: string[] | null = null): Promise<boolean> {
  const r = await db.query(`DELETE FROM events.endpoints WHERE id = $1 AND ($2::text[] IS NULL OR key_id = ANY ($2))`, [id, keyIds]);
  return (r.rowCount ?? 0) > 0;
}

/**
 * A new secret; the current one keeps signing (a second signature in each header) for
 * `windowHours`, so that receivers can switch without losing a delivery.
 */
export async function rotateSecret(
  db: Db, id: string, windowHours = ROTATION_WINDOW_HOURS, now = new Date(), formToken: string | null = null,
): Promise<{ id: string; secret: string; previous_secret_until: Date }> {
  const secret = newSecret();
  // A panel form's token (sql/0124) is recorded in the same statement: only its first use rotates,
  // whatever rotations (the CLI's, the panel's next form) came in between.
  const r = await db.query(
    `WITH once AS (INSERT INTO events.form_tokens (token, endpoint_id) SELECT $5, id FROM events.endpoints WHERE id = $1 AND $5::text IS NOT NULL
                   ON CONFLICT (token) DO NOTHING RETURNING token)
     UPDATE events.endpoints SET previous_secret = secret, previous_secret_until = $3::timestamptz + make_interval(hours => $4), secret = $2
      WHERE id = $1 AND ($5::text IS NULL OR EXISTS (SELECT FROM once)) RETURNING previous_secret_until`,
    [id, secret, now, windowHours, formToken],
  );
  if (!r.rowCount) {
    if (formToken !== null && (await getEndpoint(db, id))) throw new AgroError('form_used', `this form already rotated the secret of ${id}`);
    throw new AgroError('not_found', `no webhook endpoint ${id}`);
  }
  return { id, secret, previous_secret_until: r.rows[0].previous_secret_until };
}

/** Re-enables an endpoint that was disabled (by a 410 Gone). */
export async function enableEndpoint(db: Db, id: string, keyIds: string[] | null = null): Promise<boolean> {
  const r = await db.query(`UPDATE events.endpoints SET disabled_at = NULL, disabled_reason = NULL WHERE id = $1 AND ($2::text[] IS NULL OR key_id = ANY ($2))`, [id, keyIds]);
  return (r.rowCount ?? 0) > 0;
}

export interface LogEntry {
  seq: number;
  event_id: string;
  type: string;
  attempt: number;
  at: Date;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  delivery_status: 'pending' | 'delivered' | 'failed';
  next_attempt_at: Date | null;
}

/** The delivery log of an endpoint, newest attempt first. */
export async function deliveryLog(db: Db, endpointId: string, limit = 50): Promise<LogEntry[]> {
  const r = await db.query(
    `SELECT a.seq::int AS seq, a.event_id, o.type, a.attempt, a.at, a.status_code, a.error, a.duration_ms, d.status AS delivery_status,
            CASE WHEN d.status = 'pending' THEN d.next_attempt_at END AS next_attempt_at
       FROM events.attempts a JOIN events.deliveries d USING (event_id, endpoint_id) JOIN events.outbox o ON o.id = a.event_id
      WHERE a.endpoint_id = $1 ORDER BY a.seq DESC LIMIT $2`,
    [endpointId, limit],
  );
  return r.rows;
}
