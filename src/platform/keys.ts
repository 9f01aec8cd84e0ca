// API keys: `ck_<env>_` + 32 random base62 characters + a 6-character CRC32 checksum of
// everything before it (the GitHub token layout). The checksum lets the API refuse a
// mistyped or truncated key without a database read; only a SHA-256 of the key is stored.
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import type pg from 'pg';
import { AgroError } from '../errors.ts';

export type KeyEnv = 'test' | 'live';
export const KEY_ENVS: readonly KeyEnv[] = ['test', 'live'];
export const PLANS = ['starter', 'growth', 'professional', 'scale', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const KEY_RE = /^ck_(test|live)_([0-9A-Za-z]{32})([0-9A-Za-z]{6})$/;

function base62(n: number, width: number): string {
  let out = '';
  for (let i = 0; i < width; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function randomBase62(length: number): string {
  // Rejection sampling: bytes ≥ 248 would bias the first characters.
  let out = '';
  while (out.length < length) {
    for (const b of crypto.randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62];
    }
  }
  return out;
}

const checksum = (head: string) => base62(zlib.crc32(head), CHECKSUM_LENGTH);

/** A new key of an environment (not stored). */
export function generateKey(env: KeyEnv): string {
  const head = `ck_${env}_${randomBase62(BODY_LENGTH)}`;
  return head + checksum(head);
}

/** The environment of a well-formed key whose checksum matches, else null (no database read). */
export function checkKeyFormat(key: string): KeyEnv | null {
  const m = KEY_RE.exec(key);
  if (!m) return null;
  const head = key.slice(0, key.length - CHECKSUM_LENGTH);
  return checksum(head) === m[3] ? (m[1] as KeyEnv) : null;
}

export const keySha256 = (key: string): Buffer => crypto.createHash('sha256').update(key).digest();

export interface ApiKey {
  id: string;
  name: string | null;
  env: KeyEnv;
  plan: Plan;
  prefix: string;
  last4: string;
  created_at: Date;
  /** In the future for a rotated key still in its grace period. */
  revoked_at: Date | null;
  replaced_by: string | null;
}

/** A key that may be used now, with `meter`: what its rate limit and quota count on, the first key of its rotation chain (its own id when never rotated). */
export type ActiveKey = Pick<ApiKey, 'id' | 'env' | 'plan' | 'revoked_at'> & { meter: string };

export interface CreatedKey {
  id: string;
  key: string;
  env: KeyEnv;
  plan: Plan;
  name: string | null;
}

type Db = pg.Pool | pg.ClientBase;

type NewKey = { env: KeyEnv; plan: Plan; name?: string | null; accountId?: string | null; meterId?: string | null };

/** Creates a key and returns it in clear, the only time it is ever shown. */
export async function createKey(db: Db, o: NewKey): Promise<CreatedKey> {
  return (await insertKey(db, o, null))!;
}

/**
 * Creates a key for a panel form's one-time token (sql/0123), or null when a key was already
 * made with it: the unique token decides, in one statement, whichever process the form reaches.
 */
export async function createKeyOnce(db: Db, o: NewKey, formToken: string): Promise<CreatedKey | null> {
  return insertKey(db, o, formToken);
}

async function insertKey(db: Db, o: NewKey, formToken: string | null): Promise<CreatedKey | null> {
  if (!KEY_ENVS.includes(o.env)) throw new AgroError('usage', `--env is test or live, got "${o.env}"`);
  if (!PLANS.includes(o.plan)) throw new AgroError('usage', `--plan is one of ${PLANS.join(', ')}, got "${o.plan}"`);
  const key = generateKey(o.env);
  const id = `key_${randomBase62(16)}`;
  const name = o.name ?? null;
  const r = await db.query(
    `INSERT INTO platform.api_keys (id, name, env, plan, key_sha256, prefix, last4, account_id, meter_id, form_token) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (form_token) DO NOTHING`,
    [id, name, o.env, o.plan, keySha256(key), `ck_${o.env}_${key.slice(8, 12)}`, key.slice(-4), o.accountId ?? null, o.meterId ?? null, formToken],
  );
  return r.rowCount ? { id, key, env: o.env, plan: o.plan, name } : null;
}

/** How long a revoked key stays listed (with its history) for audit. */
export const REVOKED_LISTED_DAYS = 30;

/** Every key, revoked ones for 30 days after their revocation. */
export async function listKeys(db: Db): Promise<ApiKey[]> {
  const r = await db.query(
    `SELECT id, name, env, plan, prefix, last4, created_at, revoked_at, replaced_by FROM platform.api_keys
     WHERE revoked_at IS NULL OR revoked_at > now() - make_interval(days => $1)
     ORDER BY created_at, id`,
    [REVOKED_LISTED_DAYS],
  );
  return r.rows;
}

/** Deletes keys revoked more than 30 days ago, and their history. */
export async function purgeRevokedKeys(db: Db): Promise<number> {
  const r = await db.query(
    `WITH gone AS (
       DELETE FROM platform.api_keys k WHERE revoked_at < now() - make_interval(days => $1)
         AND NOT EXISTS (SELECT 1 FROM platform.api_keys s WHERE s.replaced_by = k.id AND s.revoked_at >= now() - make_interval(days => $1))
       RETURNING id)
     , h AS (DELETE FROM platform.requests WHERE key_id IN (SELECT id FROM gone))
     SELECT count(*)::int AS n FROM gone`,
    [REVOKED_LISTED_DAYS],
  );
  return r.rows[0].n;
}

/**
 * Issues a successor with the same env, plan and name, counting on the same meter (its month's
 * quota and minute go on) and holding the old key's webhook endpoints and monitors; the old
 * key keeps working for the grace period, then answers 401 like a revoked one.
 */
export async function rotateKey(db: pg.Pool, id: string, graceHours: number): Promise<{ old: { id: string; expires_at: Date }; key: CreatedKey }> {
  if (!(graceHours >= 0)) throw new AgroError('usage', `the grace period is a number of hours ≥ 0, got ${graceHours}`);
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    const cur = await c.query(`SELECT env, plan, name, coalesce(account_id, id) AS "accountId", coalesce(meter_id, id) AS "meterId" FROM platform.api_keys WHERE id = $1 AND ${keyActiveSql()} AND replaced_by IS NULL FOR UPDATE`, [id]);
    if (!cur.rows[0]) throw new AgroError('key_not_found', `${id} (unknown, revoked or already rotated)`);
    const key = await createKey(c, cur.rows[0]);
    const r = await c.query(
      `UPDATE platform.api_keys SET revoked_at = least(coalesce(revoked_at, 'infinity'), now() + make_interval(secs => $2)), replaced_by = $3
       WHERE id = $1 RETURNING revoked_at`,
      [id, graceHours * 3600, key.id],
    );
    // The subscriptions go with the key: the old one's webhook endpoints and monitors would get
    // no successor's events, and be deleted with it 30 days after its revocation.
    await c.query(`UPDATE events.endpoints SET key_id = $2 WHERE key_id = $1`, [id, key.id]);
    await c.query(`UPDATE events.monitors SET key_id = $2 WHERE key_id = $1`, [id, key.id]);
    await c.query('COMMIT');
    return { old: { id, expires_at: r.rows[0].revoked_at }, key };
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}

/**
 * The key a subscription or monitor belongs to: the last of `id`'s rotation chain, which must
 * not be revoked. One added with a rotated key in its grace period would otherwise stay on it
 * and be deleted with it.
 */
export async function subscriberKeyOf(db: Db, id: string): Promise<string> {
  const r = await db.query(
    `WITH RECURSIVE chain AS (
       SELECT id, replaced_by, 0 AS depth FROM platform.api_keys WHERE id = $1
       UNION ALL
       SELECT k.id, k.replaced_by, c.depth + 1 FROM chain c JOIN platform.api_keys k ON k.id = c.replaced_by WHERE c.depth < 1000)
     SELECT c.id, k.revoked_at <= now() AS revoked FROM chain c JOIN platform.api_keys k USING (id) ORDER BY c.depth DESC LIMIT 1`,
    [id],
  );
  if (!r.rows[0]) throw new AgroError('key_not_found', id);
  // A revoked key (the chain's newest, its grace over) hears nothing: a subscription on it is dead.
  if (r.rows[0].revoked) throw new AgroError('key_not_found', `${id} is revoked${r.rows[0].id !== id ? ` (its successor ${r.rows[0].id} too)` : ''}`);
  return r.rows[0].id;
}

/** Revokes a key (idempotent); key_not_found when the id does not exist. */
export async function revokeKey(db: Db, id: string): Promise<ApiKey> {
  const r = await db.query(
    `UPDATE platform.api_keys SET revoked_at = least(coalesce(revoked_at, now()), now()) WHERE id = $1
     RETURNING id, name, env, plan, prefix, last4, created_at, revoked_at, replaced_by`,
    [id],
  );
  if (!r.rows[0]) throw new AgroError('key_not_found', id);
  // Its endpoints hear nothing more (src/events/delivery.ts): a delivery still pending ends here,
  // failed, rather than stay unclaimed until the key's purge, passed over by every drain's claim
  // and shown in the log with a next attempt that never comes.
  await db.query(
    `UPDATE events.deliveries SET status = 'failed', last_error = 'key revoked', lease_token = NULL, lease_until = NULL
      WHERE status = 'pending' AND endpoint_id IN (SELECT e.id FROM events.endpoints e WHERE e.key_id = $1)`,
    [id],
  );
  return r.rows[0];
}

/**
 * The SQL condition that a key (`k`, a row of platform.api_keys) may still be used: not revoked,
 * or rotated and still in its grace period, by the database's clock. One rule for the API's key
 * check, rotation, panel sessions, the change events' monitors and the webhook deliveries.
 */
export const keyActiveSql = (k?: string) => {
  const revoked = k ? `${k}.revoked_at` : 'revoked_at';
  return `(${revoked} IS NULL OR ${revoked} > now())`;
};

export const ACTIVE_KEY_SQL = `SELECT id, env, plan, revoked_at, coalesce(meter_id, id) AS meter FROM platform.api_keys WHERE key_sha256 = $1 AND ${keyActiveSql()}`;

/** The active key with this value (not revoked, or rotated and still in its grace period), or null. */
export async function findActiveKey(db: Db, key: string): Promise<ActiveKey | null> {
  const r = await db.query(ACTIVE_KEY_SQL, [keySha256(key)]);
  return r.rows[0] ?? null;
}
