// What every `agro` command shares: its environment, the one stdout writer (results only,
// every line through the CPF mask, exactly one JSON object with --json; contract §1), the
// database opened and migrated for the command, and the run line.
import type { Config } from '../config.ts';
import { EmbeddedCluster, databaseUrl } from '../db/cluster.ts';
import { migrate } from '../db/migrate.ts';
import { createPool, isConnectionError, type Pool } from '../db/pool.ts';
import { AgroError } from '../errors.ts';
import type { RunOutcome } from '../etl/run.ts';
import type { Logger } from '../log.ts';
import { maskCpfsDeep, maskCpfsInText } from '../privacy.ts';
import { PIPELINES, findPipeline } from '../../pipelines/registry.ts';

// A reader that closes stdout early (`agro nightly | head -1`) ends the output, not the command:
// a night goes on to its end (it was stopped as "the database is unreachable: write EPIPE").
let stdoutClosed = false;
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
  stdoutClosed = true;
});

export function out(text: string): void {
  if (!stdoutClosed) process.stdout.write(maskCpfsInText(text) + '\n');
}

/** Unmasked: only for what the user asked to see in full (`agro db url`, whose password a client needs). */
export function outVerbatim(text: string): void {
  if (!stdoutClosed) process.stdout.write(text + '\n');
}

export interface Env {
  cfg: Config;
  log: Logger;
  json: boolean;
  values: Record<string, string | boolean | undefined>;
  args: string[];
  /** Migrations applied when the database was opened. */
  applied?: string[];
}

/** Everything a command prints goes through here: CPFs masked, one JSON object with --json. */
export function print(env: Env, obj: unknown, human: () => string) {
  out(env.json ? JSON.stringify(maskCpfsDeep(obj)) : human());
}

/**
 * A list that grows with the data (every monitor), printed as it is read, never held whole: a
 * line per item, or with --json the one object `{"<field>": [...]}` written a batch at a time.
 * Nothing is written before the first batch (a failure to open the read prints only the error);
 * a failure after it ends the partial line, so the error object stands on its own line.
 */
export async function printList<T>(env: Env, field: string, read: (emit: (items: T[]) => void) => Promise<unknown>, line: (item: T) => string, none: string): Promise<number> {
  let n = 0;
  let open = false;
  const write = (text: string) => {
    if (!stdoutClosed) process.stdout.write(maskCpfsInText(text));
  };
  const begin = () => {
    if (env.json && !open) write(`{${JSON.stringify(field)}:[`);
    open = true;
  };
  try {
    await read((items) => {
      if (!items.length) return;
      begin();
      if (env.json) write((n ? ',' : '') + items.map((x) => JSON.stringify(maskCpfsDeep(x))).join(','));
      else write(items.map((x) => line(x) + '\n').join(''));
      n += items.length;
    });
  } catch (e) {
    if (open && env.json) write('\n');
    throw e;
  }
  begin();
  if (env.json) write(']}\n');
  else if (n === 0) out(none);
  return n;
}

/** Opens the database (starting the embedded cluster when DATABASE_URL is unset) and migrates it. */
export async function openDb(env: Env): Promise<Pool> {
  // start() is idempotent: it starts the server if needed and creates the database if it is missing.
  if (!env.cfg.databaseUrl) await new EmbeddedCluster(env.cfg).start((m) => env.log.info(m));
  const pool = createPool(databaseUrl(env.cfg));
  try {
    env.applied = (await migrate(pool, { onWait: (m) => env.log.warn(m) })).applied;
  } catch (e) {
    await pool.end();
    if (isConnectionError(e)) throw new AgroError('database_unavailable', (e as Error).message);
    throw e;
  }
  return pool;
}

export async function withDb<T>(env: Env, fn: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = await openDb(env);
  try {
    return await fn(pool);
  } finally {
    await pool.end();
  }
}

export function pipelineArg(env: Env, i = 1) {
  const name = env.args[i];
  if (!name) throw new AgroError('usage', 'missing <pipeline>');
  const p = findPipeline(name);
  if (!p) throw new AgroError('usage', `unknown pipeline "${name}" (known: ${PIPELINES.map((x) => x.name).join(', ')})`);
  // Nor is --uf on a dataset loaded whole: a run loaded the whole country, a rollback looked for a state's snapshot.
  if (env.values.uf !== undefined && !p.scopedByUf) {
    throw new AgroError('usage', `--uf: ${name} is not loaded per state (only ${PIPELINES.filter((x) => x.scopedByUf).map((x) => x.name).join(', ')} is)`);
  }
  return p;
}

export function describeRun(o: RunOutcome): string {
  const where = `${o.pipeline}${o.uf ? ' ' + o.uf : ''}`;
  const base = `${where}: ${o.status}${o.snapshot_id ? ` snapshot ${o.snapshot_id}` : ''}${o.as_of ? ` as of ${o.as_of}` : ''}`;
  const counts = o.status === 'unchanged' ? '' : ` — read ${o.rows_read}, loaded ${o.rows_loaded}${o.rows_dropped ? `, dropped ${o.rows_dropped}` : ''}, rejected ${o.rows_rejected} in ${(o.duration_ms / 1000).toFixed(1)} s`;
  // a blocked run's message is its gate's (it may also carry the reader's error: required_field_missing)
  const extra = o.error && o.status !== 'blocked' ? `\n  error (${o.error.code}): ${o.error.message}` : o.message ? `\n  ${o.message}` : '';
  return base + counts + (o.forced ? ' (forced past the quality gate)' : '') + extra + (o.report ? `\n  report: ${o.report}` : '');
}
