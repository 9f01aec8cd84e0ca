// The account panel's statements: sessions, the account's keys, the month's usage per day.
import crypto from 'node:crypto';
import type pg from 'pg';
import { KEY_ENVS, keyActiveSql, REVOKED_LISTED_DAYS, type ApiKey, type KeyEnv } from './keys.ts';

type Db = pg.Pool | pg.ClientBase;

export const SESSION_HOURS = 12;

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest();
const token = () => crypto.randomBytes(32).toString('base64url');

/**
 * The environments of the keys a session may manage (create, revoke, rotate; their webhooks and
 * monitors): a session signed in with a test key (a sandbox credential, handed to CI and
 * developers) manages test keys only; it would otherwise mint a live key of the account in two
 * clicks, revoke the live ones, or rotate a live endpoint's secret and read the new one.
 */
export const manageableEnvs = (s: Pick<Session, 'env'>): readonly KeyEnv[] => (s.env === 'live' ? KEY_ENVS : ['test']);

export async function createSession(db: Db, keyId: string): Promise<{ token: string; csrf: string }> {
  const t = token();
  const csrf = token();
  await db.query(
    `INSERT INTO platform.panel_sessions (token_sha256, key_id, csrf, expires_at) VALUES ($1, $2, $3, now() + make_interval(hours => $4))`,
    [sha256(t), keyId, csrf, SESSION_HOURS],
  );
  return { token: t, csrf };
}

export interface Session {
  key_id: string;
  csrf: string;
  env: 'test' | 'live';
  plan: ApiKey['plan'];
  name: string | null;
  account: string;
}

/** The session of a cookie token, while both it and its key are valid. */
export async function sessionOf(db: Db, t: string): Promise<Session | null> {
  const r = await db.query(
    `SELECT s.key_id, s.csrf, k.env, k.plan, k.name, coalesce(k.account_id, k.id) AS account
       FROM platform.panel_sessions s JOIN platform.api_keys k ON k.id = s.key_id
      WHERE s.token_sha256 = $1 AND s.expires_at > now() AND ${keyActiveSql('k')}`,
    [sha256(t)],
  );
  return r.rows[0] ?? null;
}

export async function endSession(db: Db, t: string): Promise<void> {
  await db.query(`DELETE FROM platform.panel_sessions WHERE token_sha256 = $1 OR expires_at < now()`, [sha256(t)]);
}

/** The key of the account a panel form token made (createKeyOnce), if any. */
export async function keyOfFormToken(db: Db, account: string, formToken: string): Promise<string | null> {
  const r = await db.query(`SELECT id FROM platform.api_keys WHERE form_token = $1 AND coalesce(account_id, id) = $2`, [formToken, account]);
  return r.rows[0]?.id ?? null;
}

/** A new one-time token for a panel form (createKeyOnce): random, stored only once used. */
export const formToken = token;

/** Hours a used form token is kept: past the session that rendered its form (and its CSRF token), no post of that form passes, so a day on it is no longer needed. */
export const FORM_TOKEN_HOURS = SESSION_HOURS + 24;

/** Forgets the form tokens used more than FORM_TOKEN_HOURS ago: the webhook forms' rows, the created keys' column (the key stays). */
export async function purgeFormTokens(db: Db): Promise<number> {
  const r = await db.query(
    `WITH t AS (DELETE FROM events.form_tokens WHERE used_at < now() - make_interval(hours => $1) RETURNING 1),
          k AS (UPDATE platform.api_keys SET form_token = NULL WHERE form_token IS NOT NULL AND created_at < now() - make_interval(hours => $1) RETURNING 1)
     SELECT (SELECT count(*) FROM t)::int + (SELECT count(*) FROM k)::int AS n`,
    [FORM_TOKEN_HOURS],
  );
  return r.rows[0].n;
}

/** The account's keys, revoked ones for 30 days. */
export async function accountKeys(db: Db, account: string): Promise<ApiKey[]> {
  const r = await db.query(
    `SELECT id, name, env, plan, prefix, last4, created_at, revoked_at, replaced_by FROM platform.api_keys
      WHERE coalesce(account_id, id) = $1 AND (revoked_at IS NULL OR revoked_at > now() - make_interval(days => $2))
      ORDER BY created_at, id`,
    [account, REVOKED_LISTED_DAYS],
  );
  return r.rows;
}

/**
 * Billable answers per UTC day of a month (`YYYY-MM`) and the month's counter, of the key's
 * meter: a rotated key's successor shows the month its predecessors began.
 */
export async function usageByDay(db: Db, keyId: string, month: string): Promise<{ days: Map<number, number>; used: number }> {
  const meter = `(SELECT coalesce(meter_id, id) FROM platform.api_keys WHERE id = $1)`;
  const r = await db.query(
    `SELECT extract(day FROM created_at AT TIME ZONE 'UTC')::int AS day, count(*)::int AS n FROM platform.requests
      WHERE key_id IN (SELECT id FROM platform.api_keys WHERE coalesce(meter_id, id) = ${meter}) AND billable
        AND created_at >= (($2 || '-01')::date)::timestamp AT TIME ZONE 'UTC'
        AND created_at < ((($2 || '-01')::date + interval '1 month'))::timestamp AT TIME ZONE 'UTC'
      GROUP BY 1`,
    [keyId, month],
  );
  const u = await db.query(`SELECT used FROM platform.usage_months WHERE key_id = ${meter} AND month = ($2 || '-01')::date`, [keyId, month]);
  return { days: new Map(r.rows.map((x) => [x.day as number, x.n as number])), used: Number(u.rows[0]?.used ?? 0) };
}
