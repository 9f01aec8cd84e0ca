// `agro backfill <pipeline> --series DIR | --series-file F`: loads historical sources in
// date order, each as a kept snapshot (exempt from retention). The engine's backfill rule
// decides what becomes current: only a snapshot newer than the current one. A failed or
// blocked date stops the series (the dates not run are listed); a signal stops it as it stops `agro run`
// (interrupt.ts). Run again, the dates loaded already end `unchanged`.
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import * as catalog from '../etl/catalog.ts';
import { checkSourceScheme } from '../etl/download.ts';
import { isCalendarDate } from '../dates.ts';
import { checkAsOf, parseUf, runPipeline, type RunOutcome } from '../etl/run.ts';
import { describeRun, out, pipelineArg, print, withDb, type Env } from './context.ts';
import { stoppedBySignal } from './interrupt.ts';

export interface SeriesEntry {
  asOf: string;
  source: string;
}

/**
 * A backfill's snapshot of its date (a new one, or an identical one loaded before) is kept out
 * of retention, as `agro keep` does: history is what a backfill is for, and the next run's
 * retention (3 snapshots by date) would drop a past date first. `agro keep <id> --release`
 * gives it back. False when the run left no good snapshot (failed, blocked).
 */
export async function keepBackfilled(pool: pg.Pool, o: RunOutcome): Promise<boolean> {
  const snap = o.snapshot_id ? await catalog.getSnapshot(pool, o.snapshot_id) : null;
  return !!snap && catalog.GOOD_STATUSES.includes(snap.status) && (await catalog.setKept(pool, snap.snapshot_id, true));
}

/** What a kept backfill's lines end with. */
export const keptLine = (snapshotId: number) => `\n  kept out of retention (\`agro keep ${snapshotId} --release\` gives it back)`;

/** A folder of dated subfolders (YYYY-MM-DD/), in date order. Other entries are errors, not skipped. */
export function seriesFromDir(dir: string): SeriesEntry[] {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new AgroError('usage', `--series ${dir}: not a folder`);
  const entries = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => !e.name.startsWith('.'));
  const bad = entries.filter((e) => !e.isDirectory() || !isCalendarDate(e.name));
  if (bad.length) throw new AgroError('usage', `--series ${dir}: every entry must be a folder named YYYY-MM-DD (not: ${bad.map((e) => e.name).join(', ')})`);
  if (!entries.length) throw new AgroError('usage', `--series ${dir}: no dated folders`);
  return entries.map((e) => ({ asOf: e.name, source: path.join(dir, e.name) })).sort((a, b) => a.asOf.localeCompare(b.asOf));
}

/** Lines `DATE SOURCE` (blank lines and # comments ignored); relative sources are relative to the file. */
export function seriesFromFile(file: string): SeriesEntry[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new AgroError('usage', `--series-file ${file}: ${(e as Error).message}`);
  }
  const list: SeriesEntry[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const m = /^(\S+)\s+(.+)$/.exec(line);
    if (!m || !isCalendarDate(m[1])) throw new AgroError('usage', `--series-file ${file} line ${i + 1}: expected "YYYY-MM-DD SOURCE", got "${line}"`);
    const src = checkSourceScheme(m[2].trim(), `--series-file ${file} line ${i + 1}: SOURCE`);
    list.push({ asOf: m[1], source: /^[a-z][a-z0-9+.-]*:/i.test(src) || path.isAbsolute(src) ? src : path.resolve(path.dirname(file), src) });
  });
  if (!list.length) throw new AgroError('usage', `--series-file ${file}: no entries`);
  const dates = list.map((e) => e.asOf);
  const dup = dates.find((d, i) => dates.indexOf(d) !== i);
  if (dup) throw new AgroError('usage', `--series-file ${file}: ${dup} appears twice`);
  return list.sort((a, b) => a.asOf.localeCompare(b.asOf));
}

export async function cmdBackfillSeries(env: Env): Promise<number> {
  const pipeline = pipelineArg(env);
  if (env.values.source || env.values['as-of']) throw new AgroError('usage', '--series/--series-file take the dates and sources from the folder or file: drop --source and --as-of');
  if (env.values.series && env.values['series-file']) throw new AgroError('usage', 'give --series or --series-file, not both');
  const uf = pipeline.scopedByUf ? parseUf(pipeline.name, env.values.uf as string | undefined) : undefined;
  const series = env.values.series ? seriesFromDir(env.values.series as string) : seriesFromFile(env.values['series-file'] as string);
  for (const e of series) checkAsOf(e.asOf); // a date in the future refuses the series before anything loads
  const outcomes: (RunOutcome & { kept: boolean })[] = [];
  // Ctrl-C or SIGTERM: the stage under way finishes, the run ends interrupted, later dates do not start.
  await stoppedBySignal(env, (signal) => withDb(env, async (pool) => {
    for (const e of series) {
      if (signal.aborted) break;
      const o = await runPipeline({ cfg: env.cfg, pool, log: env.log, signal }, pipeline, { source: e.source, uf, asOf: e.asOf, backfill: true, force: !!env.values.force });
      const kept = await keepBackfilled(pool, o);
      outcomes.push({ ...o, kept });
      if (!env.json) out(describeRun(o) + (kept ? keptLine(o.snapshot_id!) : ''));
      // later dates would be published over a gap: as_of reads of this date would answer an earlier date's data
      if (o.status === 'failed' || o.status === 'blocked') break;
    }
  }));
  // The dates after a failure (or a signal) are said, not left for the reader to work out.
  const notRun = series.slice(outcomes.length).map((e) => ({ as_of: e.asOf, source: e.source }));
  if (env.json) print(env, { runs: outcomes, not_run: notRun }, () => '');
  else if (notRun.length) {
    const last = outcomes.at(-1);
    const why = last?.status === 'blocked'
      ? 'the series stops at a date the quality gate blocked: a later one would be published over the gap; check its report, then run the series again (--force loads it anyway)'
      : last?.status === 'failed' && last.error?.code !== 'interrupted'
        ? 'the series stops at a failed date: a later one would be published over the gap; fix it and run the series again'
        : 'stopped by a signal; run the series again to load them';
    out(`not run: ${notRun.map((e) => e.as_of).join(', ')} (${why})`);
  }
  return outcomes.some((o) => o.status === 'failed') ? 1 : outcomes.some((o) => o.status === 'blocked') ? 3 : 0;
}
