// Connection pools. One pool per URL per process. A server that goes away (stopped,
// restarted, network cut) must never crash the process with an unhandled 'error' event:
// idle and checked-out clients both have a listener, and the query in flight rejects
// with an error that isConnectionError() recognises.
import crypto from 'node:crypto';
import os from 'node:os';
import pg from 'pg';
import { AgroError } from '../errors.ts';

// Return int8 and numeric as JS numbers: counts and hectares fit comfortably in a double.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));
// Dates stay text (yyyy-mm-dd): no time-zone shifts.
pg.types.setTypeParser(1082, (v) => v);

export type Pool = pg.Pool;
export type Client = pg.PoolClient;

/**
 * The application_name of a process's sessions: `agro <pid>@<host>`, so that the cleanup of a
 * dead run can end the statements its process left running (etl.runs holds pid and host).
 */
/** Drawn once a process: pids repeat (a restarted container has the same host and small pids). */
const PROCESS_TOKEN = crypto.randomBytes(4).toString('hex');

export function sessionName(pid = process.pid, host = os.hostname(), token = PROCESS_TOKEN): string {
  return Buffer.from(`agro ${pid}@${host} ${token}`).subarray(0, 63).toString();
}

export function createPool(url: string, max = 10): pg.Pool {
  // JIT compiles each load statement again in every parallel worker: measured 1.5–2.4 s lost a
  // statement on loads and overlap pairs, for nothing gained.
  const pool = new pg.Pool({ connectionString: url, max, application_name: sessionName(), options: '-c jit=off' });
  pool.on('error', () => {
    /* an idle client died (server restart); the next checkout reconnects */
  });
  // A checked-out client has no pool listener: its query rejects, and the event must not throw.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

// SQLSTATE classes 08 (connection exception) and 57P0x (admin shutdown, crash, cannot connect now).
const CONNECTION_SQLSTATE = /^(08|57P0)/;
const CONNECTION_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH']);
const CONNECTION_MESSAGE = /Connection terminated|connection error|Client was closed|not queryable|terminating connection/i;

/** True when an error means the database went away or cannot be reached (not a bad statement). */
export function isConnectionError(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown } | null;
  if (!err || typeof err !== 'object') return false;
  const code = typeof err.code === 'string' ? err.code : '';
  return CONNECTION_SQLSTATE.test(code) || CONNECTION_ERRNO.has(code) || (typeof err.message === 'string' && CONNECTION_MESSAGE.test(err.message));
}

/** Turns connection failures into the catalogue's `database_unavailable`. */
export async function connectOrFail(pool: pg.Pool): Promise<pg.PoolClient> {
  try {
    return await pool.connect();
  } catch (e) {
    throw new AgroError('database_unavailable', (e as Error).message);
  }
}

/** Runs fn inside one transaction on one client. */
export async function withTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await connectOrFail(pool);
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

/** Quotes an SQL identifier. */
export function ident(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}
