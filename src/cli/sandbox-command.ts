// `agro sandbox load`: the sandbox database of `ck_test_` keys, from the bundled fixtures.
import { databaseUrl } from '../db/cluster.ts';
import { AgroError } from '../errors.ts';
import { loadSandbox, type SandboxRun } from '../platform/sandbox.ts';
import { print, withDb, type Env } from './context.ts';
import type { Syntax } from './syntax.ts';

export const SANDBOX_COMMANDS: Syntax[] = [{ form: 'sandbox load', does: 'the sandbox data set of ck_test_ keys, from the bundled fixtures' }];

/** Loads the sandbox (the live database is opened first: it starts the embedded cluster if needed). */
export async function runSandboxLoad(ctx: Env, runs: SandboxRun[]): Promise<{ url: string; published: number }> {
  await withDb(ctx, async () => {});
  return loadSandbox({ cfg: ctx.cfg, liveUrl: databaseUrl(ctx.cfg), log: ctx.log, runs });
}

export async function cmdSandbox(ctx: Env, runs: SandboxRun[]): Promise<number> {
  if (ctx.args[1] !== 'load') throw new AgroError('usage', 'sandbox load');
  const r = await runSandboxLoad(ctx, runs);
  const safe = new URL(r.url);
  safe.password = '';
  print(ctx, { database: safe.toString(), published: r.published }, () => `sandbox loaded: ${r.published} fixture snapshots published in ${safe.toString()}`);
  return 0;
}
