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
  revoked_at: Date | null;
}

export interface CreatedKey {
  id: string;
  key: string;
  env: KeyEnv;
  plan: Plan;
  name: string | null;
}

type Db = pg.Pool | pg.ClientBase;

/** Creates a key and returns it in clear, the only time it is ever shown. */
export async function createKey(db: Db, o: { env: KeyEnv; plan: Plan; name?: string | null }): Promise<CreatedKey> {
  if (!KEY_ENVS.includes(o.env)) throw new AgroError('usage', `--env is test or live, got "${o.env}"`);
  if (!PLANS.includes(o.plan)) throw new AgroError('usage', `--plan is one of ${PLANS.join(', ')}, got "${o.plan}"`);
  const key = generateKey(o.env);
  const id = `key_${randomBase62(16)}`;
  const name = o.name ?? null;
  await db.query(
    `INSERT INTO platform.api_keys (id, name, env, plan, key_sha256, prefix, last4) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, name, o.env, o.plan, keySha256(key), `ck_${o.env}_${key.slice(8, 12)}`, key.slice(-4)],
  );
  return { id, key, env: o.env, plan: o.plan, name };
}

export async function listKeys(db: Db): Promise<ApiKey[]> {
  const r = await db.query(
    `SELECT id, name, env, plan, prefix, last4, created_at, revoked_at FROM platform.api_keys ORDER BY created_at, id`,
  );
  return r.rows;
}

/** Revokes a key (idempotent); key_not_found when the id does not exist. */
export async function revokeKey(db: Db, id: string): Promise<ApiKey> {
  const r = await db.query(
    `UPDATE platform.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
     RETURNING id, name, env, plan, prefix, last4, created_at, revoked_at`,
    [id],
  );
  if (!r.rows[0]) throw new AgroError('key_not_found', id);
  return r.rows[0];
}

export const ACTIVE_KEY_SQL = `SELECT id, env, plan FROM platform.api_keys WHERE key_sha256 = $1 AND revoked_at IS NULL`;

/** The active (not revoked) key with this value, or null. */
export async function findActiveKey(db: Db, key: string): Promise<Pick<ApiKey, 'id' | 'env' | 'plan'> | null> {
  const r = await db.query(ACTIVE_KEY_SQL, [keySha256(key)]);
  return r.rows[0] ?? null;
}
