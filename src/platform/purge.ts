// The retention of the API platform's tables, in one place: `agro platform purge` runs it on
// demand and `agro schedule` once at its start and then every day, so a deployment that only
// runs the scheduler does not grow its history, idempotency and webhook tables for ever.
import type pg from 'pg';
import type { Config } from '../config.ts';
import { purgeDeliveries } from '../events/retention.ts';
import { purgeIdempotency } from './idempotency.ts';
import { purgeRevokedKeys } from './keys.ts';
import { purgeHistory } from './limits.ts';
import { purgeFormTokens } from './panel-sql.ts';

export interface PurgeCounts {
  history_rows: number;
  rate_windows: number;
  revoked_keys: number;
  idempotency_answers: number;
  webhook_deliveries: number;
  form_tokens: number;
}

/** History past AGRO_HISTORY_RETENTION_MONTHS, keys revoked 30+ days ago, expired idempotency answers, old rate windows, settled webhook deliveries, the panel's used form tokens. */
export async function purgePlatform(pool: pg.Pool, cfg: Pick<Config, 'api'>): Promise<PurgeCounts> {
  const h = await purgeHistory(pool, cfg.api.historyRetentionMonths);
  return {
    history_rows: h.requests,
    rate_windows: h.windows,
    revoked_keys: await purgeRevokedKeys(pool),
    idempotency_answers: await purgeIdempotency(pool),
    webhook_deliveries: await purgeDeliveries(pool, cfg.api.historyRetentionMonths),
    form_tokens: await purgeFormTokens(pool),
  };
}

/** How often `agro schedule` purges. */
export const PURGE_EVERY_MS = 24 * 3600_000;
