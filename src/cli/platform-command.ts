// `agro platform purge`: the retention of the API platform's tables — history older than
// AGRO_HISTORY_RETENTION_MONTHS (13), keys revoked more than 30 days ago (with their history),
// expired idempotency answers, old rate-limit windows and the settled deliveries of webhook
// events as old as the history (src/events/retention.ts). Meant for the nightly schedule.
import { AgroError } from '../errors.ts';
import { purgeDeliveries } from '../events/retention.ts';
import { purgeIdempotency } from '../platform/idempotency.ts';
import { purgeRevokedKeys } from '../platform/keys.ts';
import { purgeHistory } from '../platform/limits.ts';
import { print, withDb, type Env } from './context.ts';

export const PLATFORM_USAGE = `  platform purge                    drop history past its retention, keys revoked 30+ days ago, expired idempotency answers, old webhook deliveries`;

export async function cmdPlatform(ctx: Env): Promise<number> {
  if (ctx.args[1] !== 'purge') throw new AgroError('usage', 'platform purge');
  const r = await withDb(ctx, async (pool) => {
    const h = await purgeHistory(pool, ctx.cfg.api.historyRetentionMonths);
    return { history_rows: h.requests, rate_windows: h.windows, revoked_keys: await purgeRevokedKeys(pool), idempotency_answers: await purgeIdempotency(pool), webhook_deliveries: await purgeDeliveries(pool, ctx.cfg.api.historyRetentionMonths) };
  });
  print(ctx, r, () => `purged ${r.history_rows} history rows, ${r.revoked_keys} revoked keys, ${r.idempotency_answers} idempotency answers, ${r.rate_windows} rate windows, ${r.webhook_deliveries} webhook deliveries`);
  return 0;
}
