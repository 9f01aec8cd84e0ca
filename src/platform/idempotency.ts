// Idempotency-Key on POST (contract §4). The claim is one INSERT … ON CONFLICT in the
// database, so two identical requests arriving at the same instant, in one process or in two,
// run the work once: the loser sees the winner's row (409 while it runs, its answer after).
// 5xx, 429 and validation failures (400, 422) release the claim instead of storing it.
import crypto from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import { AgroError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    idempotency?: { keyId: string; method: string; path: string; idemKey: string };
  }
}

/** How long an answer is kept. */
export const IDEMPOTENCY_TTL_HOURS = 24;
/** A claim still 'running' after this long belongs to a server that died: it can be taken over. */
const STALE_RUNNING_MINUTES = 5;
const IDEM_KEY = /^[\x21-\x7e]{1,255}$/;

type Db = pg.Pool | pg.ClientBase;

interface Scope {
  keyId: string;
  method: string;
  path: string;
  idemKey: string;
}

interface StoredAnswer {
  body_sha256: Buffer;
  state: 'running' | 'done';
  status: number | null;
  headers: Record<string, string> | null;
  response: string | null;
}

/** Claims the scope for this body; null when claimed, else the row that holds it. */
export async function claimIdempotency(db: Db, s: Scope, bodySha256: Buffer): Promise<StoredAnswer | null> {
  const claimed = await db.query(
    `INSERT INTO platform.idempotency (key_id, method, path, idem_key, body_sha256, state, expires_at)
     VALUES ($1, $2, $3, $4, $5, 'running', now() + make_interval(hours => $6))
     ON CONFLICT (key_id, method, path, idem_key) DO UPDATE
       SET body_sha256 = EXCLUDED.body_sha256, state = 'running', status = NULL, headers = NULL, response = NULL,
           created_at = now(), expires_at = EXCLUDED.expires_at
       WHERE platform.idempotency.expires_at <= now()
          OR (platform.idempotency.state = 'running' AND platform.idempotency.created_at < now() - make_interval(mins => $7))
     RETURNING 1`,
    [s.keyId, s.method, s.path, s.idemKey, bodySha256, IDEMPOTENCY_TTL_HOURS, STALE_RUNNING_MINUTES],
  );
  if (claimed.rowCount) return null;
  // Gone (or expired) between the two statements (released by a failed first run): claim again.
  return (await heldIdempotency(db, s)) ?? claimIdempotency(db, s, bodySha256);
}

/** The unexpired row holding a scope, or null (a look that claims nothing). */
export async function heldIdempotency(db: Db, s: Scope): Promise<StoredAnswer | null> {
  const r = await db.query(
    `SELECT body_sha256, state, status, headers, response FROM platform.idempotency
     WHERE key_id = $1 AND method = $2 AND path = $3 AND idem_key = $4 AND expires_at > now()`,
    [s.keyId, s.method, s.path, s.idemKey],
  );
  return r.rows[0] ?? null;
}

export async function storeIdempotentAnswer(db: Db, s: Scope, a: { status: number; headers: Record<string, string>; response: string }): Promise<void> {
  await db.query(
    `UPDATE platform.idempotency SET state = 'done', status = $5, headers = $6, response = $7
     WHERE key_id = $1 AND method = $2 AND path = $3 AND idem_key = $4 AND state = 'running'`,
    [s.keyId, s.method, s.path, s.idemKey, a.status, a.headers, a.response],
  );
}

export async function releaseIdempotency(db: Db, s: Scope): Promise<void> {
  await db.query(
    `DELETE FROM platform.idempotency WHERE key_id = $1 AND method = $2 AND path = $3 AND idem_key = $4 AND state = 'running'`,
    [s.keyId, s.method, s.path, s.idemKey],
  );
}

export async function purgeIdempotency(db: Db): Promise<number> {
  return (await db.query(`DELETE FROM platform.idempotency WHERE expires_at <= now()`)).rowCount ?? 0;
}

/**
 * JSON text of a value with every object's members sorted: "same body" is the same JSON value
 * (RFC 8259: members are unordered), so a client that serialises its map anew on a retry, in
 * another order, gets its stored answer instead of 422. The body is hashed after validation,
 * so an omitted member with a default and the default sent are the same request too.
 */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest();

/**
 * preHandler (after validation): claim, or answer from the stored row. A request the quota
 * refused at admission (`refusal`, src/platform/metering.ts) claims nothing: it gets the stored
 * answer of the same body (a replay is free), else the refusal.
 */
export async function idempotencyPreHandler(pool: pg.Pool, req: FastifyRequest, reply: FastifyReply, refusal?: AgroError): Promise<FastifyReply | undefined> {
  const header = req.headers['idempotency-key'];
  if (req.method !== 'POST' || header === undefined || !req.apiKey) {
    if (refusal) throw refusal;
    return undefined;
  }
  if (typeof header !== 'string' || !IDEM_KEY.test(header)) throw new AgroError('invalid_request', 'Idempotency-Key: 1 to 255 printable ASCII characters');
  // Scoped to the key's meter: a rotated key's successor is the same key, and a client retrying
  // with it after a rotation must get the stored answer, not the work run (and billed) again.
  const scope: Scope = { keyId: req.apiKey.meter, method: req.method, path: req.url.split('?')[0], idemKey: header };
  const hash = sha256(canonicalJson(req.body ?? null));
  // Rows claimed before canonicalJson hashed the members in the order received (kept 24 h).
  const sameBody = (h: Buffer) => h.equals(hash) || h.equals(sha256(JSON.stringify(req.body ?? null)));
  const held = refusal ? await heldIdempotency(pool, scope) : await claimIdempotency(pool, scope, hash);
  if (refusal && !(held?.state === 'done' && sameBody(held.body_sha256))) throw refusal;
  if (!held) {
    req.idempotency = scope;
    return undefined;
  }
  if (!sameBody(held.body_sha256)) throw new AgroError('idempotency_key_reused', 'this Idempotency-Key was used with another body in the last 24 h');
  if (held.state === 'running') throw new AgroError('idempotency_conflict', 'a request with this Idempotency-Key is still running; retry later');
  reply.code(held.status!).headers({ ...(held.headers ?? {}), 'idempotent-replayed': 'true' });
  return reply.send(held.response);
}

/** Whether an answer of this status is kept for replay (contract §4: not 5xx, 429 or validation failures). */
export const storable = (status: number) => status < 500 && status !== 429 && status !== 400 && status !== 422;

/** onSend: store the claimed request's answer, or release the claim. Never fails the answer. */
export async function idempotencyOnSend(pool: pg.Pool, req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<void> {
  const s = req.idempotency;
  if (!s) return;
  req.idempotency = undefined;
  try {
    if (storable(reply.statusCode) && typeof payload === 'string') {
      const type = reply.getHeader('content-type');
      await storeIdempotentAnswer(pool, s, { status: reply.statusCode, headers: type ? { 'content-type': String(type) } : {}, response: payload });
    } else {
      await releaseIdempotency(pool, s);
    }
  } catch (err) {
    req.log.error({ err }, 'cannot store the idempotent answer');
  }
}
