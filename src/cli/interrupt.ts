// SIGTERM or SIGINT (Ctrl-C) during `agro run`, `backfill` or `nightly`: the stage under way
// finishes, nothing more starts or is published, the run ends `failed` (interrupted) and
// removes what it made; a second signal exits at once (the next run cleans up, as after a
// kill). The same rule as `agro schedule`'s.
import type { Env } from './context.ts';

export async function stoppedBySignal<T>(env: Env, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (ac.signal.aborted) {
      env.log.warn(`${sig} again: exiting now; the next run cleans up what this one left`);
      process.exit(1);
    }
    env.log.warn(`${sig}: the stage under way finishes, then the run stops and cleans up (${sig} again exits at once)`);
    ac.abort(sig);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    return await fn(ac.signal);
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}
