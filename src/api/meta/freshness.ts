// Freshness of a published source against its expected cadence. The cadence is not a second
// table of intervals: it is read from the scheduler's own config (agro.schedule.json, or its
// defaults in src/schedule/config.ts), as the longest gap between consecutive firings of the
// job that runs the dataset — nightly SICAR 24 h, daily embargoes 24 h, weekly layers 7 d,
// monthly CNPJ 28–31 d. A dataset no job runs has no cadence and no freshness.
import { PIPELINES } from '../../../pipelines/registry.ts';
import type { Config } from '../../config.ts';
import { loadSchedule, type ScheduleConfig } from '../../schedule/config.ts';
import { previousSlot } from '../../schedule/plan.ts';
import type { PublishedSnapshot, SourceRuns } from './sql.ts';

export type Freshness = 'fresh' | 'stale' | 'critical';

/** Stale once the copy is older than this many cadences: a scheduled run was missed. */
export const STALE_AFTER_CADENCES = 1.5;
/** Critical once older than this many: several runs in a row were missed or failed. */
export const CRITICAL_AFTER_CADENCES = 3;

export const FRESHNESS_RULE =
  `age = now − the later of the snapshot's publication and the last run that found the source unchanged; ` +
  `cadence = the longest gap between consecutive firings of the schedule job that runs the dataset (agro.schedule.json or its defaults); ` +
  `fresh while age ≤ ${STALE_AFTER_CADENCES} × cadence, stale up to ${CRITICAL_AFTER_CADENCES} × cadence, critical beyond; ` +
  `null when no job runs the dataset.`;

/** The longest gap between consecutive firings of a cron expression over its last `firings` (irregular crons: weekdays only, …). */
export function cadenceMs(cron: string, timezone: string, now: Date, firings = 8): number | null {
  let t = previousSlot(cron, timezone, now);
  let longest = 0;
  for (let i = 0; t && i < firings; i++) {
    const before = previousSlot(cron, timezone, new Date(t.getTime() - 60_000));
    if (!before) break;
    longest = Math.max(longest, t.getTime() - before.getTime());
    t = before;
  }
  return longest > 0 ? longest : null;
}

/** The expected cadence of each scheduled pipeline (dataset): the shortest of the jobs that run it. */
export function pipelineCadences(schedule: ScheduleConfig, now: Date): Map<string, number> {
  const out = new Map<string, number>();
  for (const job of schedule.jobs) {
    const c = cadenceMs(job.cron, schedule.timezone, now);
    if (c === null) continue;
    for (const p of job.pipelines) out.set(p, Math.min(out.get(p) ?? Infinity, c));
  }
  return out;
}

const loaded = new WeakMap<Config, Map<string, number>>();

/**
 * The cadences of the installation's schedule, read once per config (the routes and /metrics
 * share them). A broken schedule file is logged and gives none: the API still serves.
 */
export function cadencesOf(cfg: Config, log: { warn(o: object, msg: string): void }): Map<string, number> {
  let c = loaded.get(cfg);
  if (!c) {
    try {
      c = pipelineCadences(loadSchedule(cfg.scheduleFile, PIPELINES.map((p) => p.name), cfg.scheduleFileExplicit), new Date());
    } catch (err) {
      log.warn({ err }, 'schedule config unreadable: no freshness for /v1/sources and /metrics');
      c = new Map();
    }
    loaded.set(cfg, c);
  }
  return c;
}

export function freshnessOf(ageMs: number, cadence: number): Freshness {
  if (ageMs > CRITICAL_AFTER_CADENCES * cadence) return 'critical';
  if (ageMs > STALE_AFTER_CADENCES * cadence) return 'stale';
  return 'fresh';
}

export interface SourceState {
  snapshot: PublishedSnapshot;
  run: SourceRuns | null;
  /** The later of the publication and the last run that found the source unchanged. */
  checkedAt: Date | null;
  ageMs: number | null;
  cadenceMs: number | null;
  freshness: Freshness | null;
}

/** Each published snapshot with its last runs and its freshness at `now`. */
export function sourceStates(published: readonly PublishedSnapshot[], runs: readonly SourceRuns[], cadences: ReadonlyMap<string, number>, now: number): SourceState[] {
  return published.map((snapshot) => {
    const run = runs.find((r) => r.dataset === snapshot.dataset && r.uf === snapshot.uf) ?? null;
    const candidates = [snapshot.published_at, run?.confirmed_at ?? null].filter((d): d is Date => d !== null);
    const checkedAt = candidates.length ? new Date(Math.max(...candidates.map((d) => d.getTime()))) : null;
    const ageMs = checkedAt ? Math.max(0, now - checkedAt.getTime()) : null;
    const cadenceMs = cadences.get(snapshot.dataset) ?? null;
    return { snapshot, run, checkedAt, ageMs, cadenceMs, freshness: ageMs !== null && cadenceMs !== null ? freshnessOf(ageMs, cadenceMs) : null };
  });
}
