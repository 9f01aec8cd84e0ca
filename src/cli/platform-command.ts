// `agro platform purge`: the retention of the API platform's tables (src/platform/purge.ts),
// on demand; `agro schedule` also runs it every day.
import { AgroError } from '../errors.ts';
import { purgePlatform } from '../platform/purge.ts';
import { print, withDb, type Env } from './context.ts';
import type { Syntax } from './syntax.ts';

export const PLATFORM_COMMANDS: Syntax[] = [
  { form: 'platform purge', does: 'drop history past its retention, keys revoked 30+ days ago, expired idempotency answers, old webhook deliveries, used panel form tokens' },
];

export async function cmdPlatform(ctx: Env): Promise<number> {
  if (ctx.args[1] !== 'purge') throw new AgroError('usage', 'platform purge');
  const r = await withDb(ctx, (pool) => purgePlatform(pool, ctx.cfg));
  print(ctx, r, () => `purged ${r.history_rows} history rows, ${r.revoked_keys} revoked keys, ${r.idempotency_answers} idempotency answers, ${r.rate_windows} rate windows, ${r.webhook_deliveries} webhook deliveries, ${r.form_tokens} used panel form tokens`);
  return 0;
}
