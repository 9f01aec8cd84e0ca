// The scheduler's one config file (agro.schedule.json or AGRO_SCHEDULE_FILE), validated
// at start with errors that name the job and the field. Without a file, the defaults:
// SICAR per state nightly, embargoes daily, reference layers weekly, CNPJ monthly.
import fs from 'node:fs';
import cron from 'node-cron';
import { KNOWN_UFS, sourceSchemeProblem } from '../config.ts';
import { AgroError } from '../errors.ts';

export interface JobConfig {
  name: string;
  /** Five fields (minute hour day-of-month month day-of-week), in `timezone`. */
  cron: string;
  pipelines: string[];
  /** States of per-state pipelines (default: the config's SICAR states). */
  ufs?: string[];
  /** Source per pipeline; a pipeline without one uses its configured official source. */
  sources: Record<string, string>;
}

export interface ScheduleConfig {
  timezone: string;
  /** Attempts after a failed run, with exponential backoff from backoffMs, capped at maxBackoffMs. */
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  /** After SIGTERM, how long the run under way may take to finish its stage before the process exits anyway. */
  shutdownGraceMs: number;
  jobs: JobConfig[];
  /** Where the config came from: a file path or 'defaults'. */
  origin: string;
}

export const DEFAULT_JOBS: Omit<JobConfig, 'sources'>[] = [
  { name: 'sicar-nightly', cron: '0 1 * * *', pipelines: ['sicar'] },
  { name: 'embargoes-daily', cron: '0 5 * * *', pipelines: ['ibama-embargos', 'icmbio-embargos'] },
  { name: 'layers-weekly', cron: '0 22 * * 6', pipelines: ['ibge-municipios', 'dnit-snv', 'funai-tis', 'cnuc-ucs', 'incra-quilombos', 'zarc'] },
  { name: 'cnpj-monthly', cron: '0 3 2 * *', pipelines: ['receita-cnpj'] },
];

const DEFAULTS = { timezone: 'America/Sao_Paulo', retries: 3, backoffMs: 60_000, maxBackoffMs: 30 * 60_000, shutdownGraceMs: 5 * 60_000 };

const TOP_KEYS = ['timezone', 'retries', 'backoff_ms', 'max_backoff_ms', 'shutdown_grace_ms', 'jobs'];
const JOB_KEYS = ['cron', 'pipelines', 'ufs', 'sources'];

function bad(where: string, msg: string): never {
  throw new AgroError('schedule_config', `${where}: ${msg}`);
}

function count(where: string, v: unknown, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) bad(where, `must be a whole number ≥ 0, got ${JSON.stringify(v)}`);
  return v;
}

function validTimezone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Checks a cron expression: five fields, each valid for node-cron. */
export function checkCron(where: string, expr: unknown): string {
  if (typeof expr !== 'string') bad(where, 'cron must be a string such as "0 2 * * *"');
  if (expr.trim().split(/\s+/).length !== 5) bad(where, `cron "${expr}" must have five fields (minute hour day month weekday)`);
  const v = cron.validateDetailed(expr.trim());
  if (!v.valid) bad(where, `cron "${expr}": ${v.errors.map((e) => `${e.field} ${e.message}`).join('; ')}`);
  return expr.trim();
}

/**
 * Validates a parsed schedule file against the known pipelines. Unknown keys are errors
 * (a misspelt "pipeline" must not silently schedule nothing).
 */
export function parseSchedule(raw: unknown, knownPipelines: readonly string[], origin: string): ScheduleConfig {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) bad(origin, 'must be a JSON object with "jobs"');
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!TOP_KEYS.includes(k)) bad(origin, `unknown key "${k}" (known: ${TOP_KEYS.join(', ')})`);
  const timezone = o.timezone === undefined ? DEFAULTS.timezone : String(o.timezone);
  if (!validTimezone(timezone)) bad(origin, `unknown timezone "${timezone}"`);
  if (!o.jobs || typeof o.jobs !== 'object' || Array.isArray(o.jobs)) bad(origin, '"jobs" must be an object of named jobs');
  const jobs: JobConfig[] = [];
  for (const [name, j] of Object.entries(o.jobs as Record<string, unknown>)) {
    const where = `${origin}: job "${name}"`;
    if (!/^[a-z0-9][a-z0-9_.-]*$/i.test(name)) bad(where, 'job names are letters, digits, ".", "_" and "-"');
    if (!j || typeof j !== 'object' || Array.isArray(j)) bad(where, 'must be an object with "cron" and "pipelines"');
    const job = j as Record<string, unknown>;
    for (const k of Object.keys(job)) if (!JOB_KEYS.includes(k)) bad(where, `unknown key "${k}" (known: ${JOB_KEYS.join(', ')})`);
    const c = checkCron(where, job.cron);
    if (!Array.isArray(job.pipelines) || job.pipelines.length === 0) bad(where, '"pipelines" must be a non-empty list');
    for (const p of job.pipelines) {
      if (typeof p !== 'string' || !knownPipelines.includes(p)) bad(where, `unknown pipeline ${JSON.stringify(p)} (known: ${knownPipelines.join(', ')})`);
    }
    let ufs: string[] | undefined;
    if (job.ufs !== undefined) {
      if (!Array.isArray(job.ufs)) bad(where, '"ufs" must be a list of states');
      ufs = job.ufs.map((u) => String(u).trim().toUpperCase());
      for (const u of ufs) if (!KNOWN_UFS.includes(u)) bad(where, `"${u}" is not a Brazilian state`);
      // As AGRO_SICAR_UFS: an empty list planned no run of the job's per-state pipelines.
      if (!ufs.length) bad(where, '"ufs" names no state (leave it out for the configured states)');
    }
    const sources: Record<string, string> = {};
    if (job.sources !== undefined) {
      if (!job.sources || typeof job.sources !== 'object' || Array.isArray(job.sources)) bad(where, '"sources" must map pipelines to sources');
      for (const [p, s] of Object.entries(job.sources as Record<string, unknown>)) {
        if (!(job.pipelines as string[]).includes(p)) bad(where, `"sources" names "${p}", which the job does not run`);
        if (typeof s !== 'string' || !s) bad(where, `source of ${p} must be a non-empty string`);
        const problem = sourceSchemeProblem(s);
        if (problem) bad(where, `source of ${p} ${problem}`);
        sources[p] = s;
      }
    }
    jobs.push({ name, cron: c, pipelines: job.pipelines as string[], ...(ufs ? { ufs } : {}), sources });
  }
  if (jobs.length === 0) bad(origin, '"jobs" is empty: nothing would ever run');
  return {
    timezone,
    retries: count(`${origin}: retries`, o.retries, DEFAULTS.retries),
    backoffMs: count(`${origin}: backoff_ms`, o.backoff_ms, DEFAULTS.backoffMs),
    maxBackoffMs: count(`${origin}: max_backoff_ms`, o.max_backoff_ms, DEFAULTS.maxBackoffMs),
    shutdownGraceMs: count(`${origin}: shutdown_grace_ms`, o.shutdown_grace_ms, DEFAULTS.shutdownGraceMs),
    jobs,
    origin,
  };
}

/** The defaults, keeping only pipelines this installation has (the CNPJ job appears with its pipeline). */
export function defaultSchedule(knownPipelines: readonly string[]): ScheduleConfig {
  const jobs = DEFAULT_JOBS.map((j) => ({ ...j, pipelines: j.pipelines.filter((p) => knownPipelines.includes(p)), sources: {} })).filter((j) => j.pipelines.length);
  return { ...DEFAULTS, jobs, origin: 'defaults' };
}

/**
 * Reads the schedule file; a missing file means the defaults, unless it was named explicitly
 * (AGRO_SCHEDULE_FILE: a typo must not run the defaults instead); a broken one is an error.
 */
export function loadSchedule(file: string, knownPipelines: readonly string[], explicit = false): ScheduleConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') {
      if (explicit) bad(file, 'no such file (named by AGRO_SCHEDULE_FILE)');
      return defaultSchedule(knownPipelines);
    }
    bad(file, (e as Error).message);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    bad(file, `not valid JSON (${(e as Error).message})`);
  }
  return parseSchedule(raw, knownPipelines, file);
}
