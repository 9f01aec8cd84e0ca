// When jobs fire and in which order their runs go. Time is always a parameter (tests
// inject it); cron fields are matched in the schedule's timezone at minute precision.
import cron from 'node-cron';
import type { JobConfig } from './config.ts';

/** Pipelines that must run before another when both are in one batch. */
export const DEPENDS_ON: Readonly<Record<string, readonly string[]>> = {
  // ZARC's municipality codes and the CNPJ crosswalk are checked against the municipalities.
  zarc: ['ibge-municipios'],
  'receita-cnpj': ['ibge-municipios'],
  // A CAR state's overlaps are computed against the layers current when it publishes.
  sicar: ['ibge-municipios', 'dnit-snv', 'funai-tis', 'cnuc-ucs', 'incra-quilombos', 'ibama-embargos', 'icmbio-embargos'],
  'car-titulares': ['sicar'],
};

export interface PlannedRun {
  job: string;
  pipeline: string;
  uf?: string;
  source?: string;
}

interface Matcher {
  minute: Set<number>;
  hour: Set<number>;
  dom: Set<number>;
  month: Set<number>;
  dow: Set<number>;
  domAny: boolean;
  dowAny: boolean;
  parts: Intl.DateTimeFormat;
}

const matchers = new Map<string, Matcher>();

function matcher(expr: string, timezone: string): Matcher {
  const key = `${timezone} ${expr}`;
  let m = matchers.get(key);
  if (!m) {
    const f = cron.parse(expr);
    const fields = expr.trim().split(/\s+/);
    m = {
      minute: new Set(f.minute), hour: new Set(f.hour), dom: new Set(f.dayOfMonth.map(Number)), month: new Set(f.month),
      dow: new Set(f.dayOfWeek.map((d) => Number(d) % 7)), domAny: fields[2] === '*', dowAny: fields[4] === '*',
      parts: new Intl.DateTimeFormat('en-US', { timeZone: timezone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', weekday: 'short' }),
    };
    matchers.set(key, m);
  }
  return m;
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };

function local(m: Matcher, t: Date) {
  const p = Object.fromEntries(m.parts.formatToParts(t).map((x) => [x.type, x.value]));
  return { month: Number(p.month), day: Number(p.day), hour: Number(p.hour), minute: Number(p.minute), dow: WEEKDAYS[p.weekday] };
}

function dayMatches(m: Matcher, l: ReturnType<typeof local>): boolean {
  if (!m.month.has(l.month)) return false;
  // Standard cron: when both day fields are restricted, either may match.
  if (!m.domAny && !m.dowAny) return m.dom.has(l.day) || m.dow.has(l.dow);
  return m.dom.has(l.day) && m.dow.has(l.dow);
}

export const floorMinute = (t: Date) => new Date(Math.floor(t.getTime() / 60_000) * 60_000);

/** Whether the expression fires at the minute of `t`. */
export function firesAt(expr: string, timezone: string, t: Date): boolean {
  const m = matcher(expr, timezone);
  const l = local(m, t);
  return dayMatches(m, l) && m.hour.has(l.hour) && m.minute.has(l.minute);
}

/**
 * The latest minute ≤ `now` at which the expression fires (null if none within `maxDays`).
 * Walks back a day or an hour at a time when those do not match.
 */
export function previousSlot(expr: string, timezone: string, now: Date, maxDays = 400): Date | null {
  const m = matcher(expr, timezone);
  let t = floorMinute(now).getTime();
  const stop = t - maxDays * 86_400_000;
  while (t >= stop) {
    const l = local(m, new Date(t));
    if (!dayMatches(m, l)) t -= (l.hour * 60 + l.minute + 1) * 60_000;
    else if (!m.hour.has(l.hour)) t -= (l.minute + 1) * 60_000;
    else if (!m.minute.has(l.minute)) t -= 60_000;
    else return new Date(t);
  }
  return null;
}

/**
 * The runs of the jobs due together, in dependency order (a pipeline after those it
 * depends on when they are in the batch), otherwise in the order the jobs list them.
 */
export function planBatch(jobs: JobConfig[], scopedByUf: (pipeline: string) => boolean, defaultUfs: readonly string[]): PlannedRun[] {
  const entries: { job: JobConfig; pipeline: string }[] = [];
  for (const job of jobs) for (const p of job.pipelines) if (!entries.some((e) => e.pipeline === p)) entries.push({ job, pipeline: p });
  const names = entries.map((e) => e.pipeline);
  const ordered: typeof entries = [];
  const visit = (e: (typeof entries)[number], path: string[]) => {
    if (ordered.includes(e) || path.includes(e.pipeline)) return;
    for (const d of DEPENDS_ON[e.pipeline] ?? []) {
      const dep = entries.find((x) => x.pipeline === d);
      if (dep && names.includes(d)) visit(dep, [...path, e.pipeline]);
    }
    ordered.push(e);
  };
  for (const e of entries) visit(e, []);
  return ordered.flatMap(({ job, pipeline }) => {
    const source = job.sources[pipeline];
    const base = { job: job.name, pipeline, ...(source ? { source } : {}) };
    return scopedByUf(pipeline) ? (job.ufs ?? defaultUfs).map((uf) => ({ ...base, uf })) : [base];
  });
}

/** Delay before retry `attempt` (1-based): exponential from `base`, capped. */
export function backoff(attempt: number, base: number, max: number): number {
  return Math.min(max, base * 2 ** (attempt - 1));
}
