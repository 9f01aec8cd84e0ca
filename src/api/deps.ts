// What every route group receives: the frozen config, the API's pools and the cursor signer.
import type { FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { Config } from '../config.ts';
import type { FailureLimiter } from '../platform/auth-failures.ts';
import type { Cursors } from './cursor.ts';

export interface ApiDeps {
  cfg: Config;
  pool: pg.Pool;
  cursors: Cursors;
  /** Failed authentications per client address (API keys, panel sign-ins and sessions, /metrics). */
  failures: FailureLimiter;
  /** The pool a request's data comes from: the sandbox database for `ck_test_` keys, else readPool. */
  dataPool(req: FastifyRequest): pg.Pool;
  /** Where live data is read: the replica of DATABASE_READ_URL, or the primary (`pool`). */
  readPool: pg.Pool;
  /** A replica serves the reads (readPool is not pool). */
  replica: boolean;
}

export const UFS = ['AC', 'AL', 'AM', 'AP', 'BA', 'CE', 'DF', 'ES', 'GO', 'MA', 'MG', 'MS', 'MT', 'PA', 'PB', 'PE', 'PI', 'PR', 'RJ', 'RN', 'RO', 'RR', 'RS', 'SC', 'SE', 'SP', 'TO'] as const;
