// Monitors: the records a key watches for change events (car.situacao.alterada,
// car.embargo.criado on a CAR number; socio.qsa.alterado on a CNPJ).
import crypto from 'node:crypto';
import type pg from 'pg';
import { forEachBatch } from '../db/batches.ts';
import { isValidCnpj, normalizeDocument } from '../documents.ts';
import { AgroError } from '../errors.ts';
import { subscriberKeyOf } from '../platform/keys.ts';
import { formatCnpj } from '../privacy.ts';

type Db = pg.Pool | pg.ClientBase;

export const MONITOR_KINDS = ['car', 'cnpj'] as const;
export type MonitorKind = (typeof MONITOR_KINDS)[number];

export interface Monitor {
  id: string;
  key_id: string;
  kind: MonitorKind;
  /** CAR number, or the CNPJ formatted. */
  record: string;
  created_at: Date;
}

const CAR = /^[A-Z]{2}-\d{7}-[0-9A-F]{32}$/;

/** The stored form of a record: a CAR number in upper case, a CNPJ's 14 characters. */
export function monitoredRecord(kind: string, value: string): { kind: MonitorKind; record: string } {
  const v = value.trim();
  if (kind === 'car') {
    if (!CAR.test(v.toUpperCase())) throw new AgroError('usage', `not a CAR number (UF-NNNNNNN-<32 hex>): ${v.slice(0, 60)}`);
    return { kind, record: v.toUpperCase() };
  }
  if (kind === 'cnpj') {
    const c = normalizeDocument(v);
    if (!isValidCnpj(c)) throw new AgroError('usage', `not a valid CNPJ: ${v.slice(0, 30)}`);
    return { kind, record: c };
  }
  throw new AgroError('usage', `a monitor watches "car <numero>" or "cnpj <cnpj>", not "${kind}"`);
}

const shown = (r: { kind: MonitorKind; record: string }) => (r.kind === 'cnpj' ? formatCnpj(r.record) : r.record);
const row = (r: Monitor): Monitor => ({ ...r, record: shown(r) });

/** Adds a monitor (to the newest key of `given`'s rotation chain); adding the same record again returns the existing one. */
export async function addMonitor(db: Db, given: string, kind: string, value: string): Promise<Monitor & { created: boolean }> {
  const m = monitoredRecord(kind, value);
  const keyId = await subscriberKeyOf(db, given);
  const id = `mon_${crypto.randomBytes(9).toString('base64url')}`;
  const ins = await db.query(
    `INSERT INTO events.monitors (id, key_id, kind, record) VALUES ($1, $2, $3, $4) ON CONFLICT (key_id, kind, record) DO NOTHING
     RETURNING id, key_id, kind, record, created_at`,
    [id, keyId, m.kind, m.record],
  );
  if (ins.rowCount) return { ...row(ins.rows[0]), created: true };
  const r = await db.query(`SELECT id, key_id, kind, record, created_at FROM events.monitors WHERE key_id = $1 AND kind = $2 AND record = $3`, [keyId, m.kind, m.record]);
  return { ...row(r.rows[0]), created: false };
}

const LIST_SQL = `SELECT id, key_id, kind, record, created_at FROM events.monitors WHERE $1::text[] IS NULL OR key_id = ANY ($1) ORDER BY created_at, id`;

/** The `limit` newest monitors of some keys, newest first (the account panel's page). */
export async function newestMonitors(db: Db, keyIds: string[], limit: number): Promise<Monitor[]> {
  const r = await db.query(
    `SELECT id, key_id, kind, record, created_at FROM events.monitors WHERE key_id = ANY ($1) ORDER BY created_at DESC, id DESC LIMIT $2`,
    [keyIds, limit],
  );
  return r.rows.map(row);
}

/** How many monitors some keys (all keys when null) have. */
export async function countMonitors(db: Db, keyIds: string[] | null): Promise<number> {
  const r = await db.query(`SELECT count(*)::bigint AS n FROM events.monitors WHERE $1::text[] IS NULL OR key_id = ANY ($1)`, [keyIds]);
  return Number(r.rows[0].n);
}

/**
 * Every monitor of some keys (all keys when null), oldest first, handed to `each` a batch at a
 * time through a cursor: monitors may be millions, and `agro monitors list` prints them as read.
 */
export async function eachMonitorBatch(pool: pg.Pool, keyIds: string[] | null, each: (rows: Monitor[]) => void | Promise<void>, size?: number): Promise<number> {
  const client = await pool.connect();
  try {
    return await forEachBatch<Monitor>(client, LIST_SQL, [keyIds], (rows) => each(rows.map(row)), { size, ownTransaction: true });
  } finally {
    client.release();
  }
}

/** Removes a monitor (only among `keyIds` when given); false when there is none. */
export async function removeMonitor(db: Db, id: string, keyIds: string[] | null = null): Promise<boolean> {
  const r = await db.query(`DELETE FROM events.monitors WHERE id = $1 AND ($2::text[] IS NULL OR key_id = ANY ($2))`, [id, keyIds]);
  return (r.rowCount ?? 0) > 0;
}
