// The scheduler: node-cron fires each job in its timezone; every fire time is a slot that
// exactly one scheduler claims (claims.ts), runs under the job's advisory lock, in
// dependency order with the other jobs due at the same minute (plan.ts). A failed run is
// retried with bounded exponential backoff; every attempt is a run in the ledger.
// At start, a slot missed while no scheduler was up is run once (the latest one only); a
// fire time that passes while this process is suspended or stalled, or whose claim the database
// was down for, is run late the same way.
// stop() lets the stage under way finish, starts nothing more and marks the slot
// interrupted, so the next start runs it again.
import os from 'node:os';
import cron, { type ScheduledTask } from 'node-cron';
import type pg from 'pg';
import type { Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { isConnectionError } from '../db/pool.ts';
import { runPipeline, type RunOutcome } from '../etl/run.ts';
import { findPipeline } from '../../pipelines/registry.ts';
import * as claims from './claims.ts';
import type { JobConfig, ScheduleConfig } from './config.ts';
import { backoff, firesAt, floorMinute, planBatch, previousSlot, type PlannedRun } from './plan.ts';

export interface SchedulerDeps {
  cfg: Config;
  pool: pg.Pool;
  log: Logger;
  /** The clock (tests inject one). */
  now?: () => Date;
  /** Waits between retries; resolves early when the signal aborts. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Who claims slots (default host:pid). */
  owner?: string;
}

export interface SlotResult {
  job: string;
  slot: Date;
  catchUp: boolean;
  /** claimed: this scheduler ran it; taken: another one had; busy: skipped (the job still running, or a manual nightly holding the night). */
  claim: 'claimed' | 'taken' | 'busy';
  status?: claims.SlotStatus;
  /** Every attempt, retries included, in order. */
  runs: RunOutcome[];
}

/** The first wait before claiming again a fire time the database was down for, and the longest. */
const UNREACHABLE_RETRY_MS = 2_000;
const UNREACHABLE_RETRY_MAX_MS = 60_000;

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export class Scheduler {
  private readonly abort = new AbortController();
  private readonly tasks: ScheduledTask[] = [];
  private queue: Promise<unknown> = Promise.resolve();
  /** Fire times gathering their jobs (one batch per minute), and whether they are run late. */
  private readonly pending = new Map<number, { names: Set<string>; late: boolean }>();
  /** Per job, the latest fire time node-cron reported missed, waiting to be run late. */
  private readonly missedSlots = new Map<string, Date>();
  /** Per job, the latest fire time dispatched: a batch retried after an outage gives way to a later one. */
  private readonly lastFired = new Map<string, number>();
  readonly owner: string;
  private readonly now: () => Date;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  constructor(private readonly deps: SchedulerDeps, readonly schedule: ScheduleConfig) {
    this.owner = deps.owner ?? `${os.hostname()}:${process.pid}`;
    this.now = deps.now ?? (() => new Date());
    this.sleep = deps.sleep ?? abortableSleep;
  }

  get stopping(): boolean {
    return this.abort.signal.aborted;
  }

  /**
   * Registers every job and runs, once, the latest slot of each job that no scheduler
   * claimed while this one was down. A job seen for the first time waits for its next slot.
   */
  catchUp(): Promise<SlotResult[]> {
    return this.enqueue(() => this.catchUpNow());
  }

  private registered: Map<string, claims.ScheduleRow> | null = null;

  /** Registers every job (its row holds the last slot claimed); the first time, with its previous slot. */
  private async register(now: Date): Promise<Map<string, claims.ScheduleRow>> {
    const rows = new Map<string, claims.ScheduleRow>();
    for (const job of this.schedule.jobs) {
      rows.set(job.name, await claims.registerSchedule(this.deps.pool, job.name, job.cron, this.schedule.timezone, previousSlot(job.cron, this.schedule.timezone, now)));
    }
    this.registered = rows;
    return rows;
  }

  private async catchUpNow(): Promise<SlotResult[]> {
    const now = this.now();
    const due: { job: JobConfig; slot: Date }[] = [];
    const rows = await this.register(now);
    for (const job of this.schedule.jobs) {
      const prev = previousSlot(job.cron, this.schedule.timezone, now);
      const row = rows.get(job.name)!;
      if (row.inserted || !prev) continue;
      const dead = await claims.interruptDeadSlots(this.deps.pool, job.name);
      if (dead) this.deps.log.warn({ job: job.name, slots: dead }, 'slots left running by a scheduler that died are marked interrupted');
      const missed = !row.last_slot || row.last_slot.getTime() < prev.getTime();
      if (missed || (await claims.slotStatus(this.deps.pool, job.name, prev)) === 'interrupted') due.push({ job, slot: prev });
    }
    const results: SlotResult[] = [];
    // Jobs missed at the same minute run as one batch, in dependency order.
    const bySlot = new Map<number, JobConfig[]>();
    for (const d of due) bySlot.set(d.slot.getTime(), [...(bySlot.get(d.slot.getTime()) ?? []), d.job]);
    // The cron tasks run meanwhile (start() comes first): a fire time of a job being caught up is skipped and recorded.
    for (const [t, jobs] of [...bySlot].sort((a, b) => a[0] - b[0])) {
      for (const j of jobs) this.active.set(j.name, 'catch-up');
      try {
        results.push(...(await this.runBatch(jobs, new Date(t), true)));
      } finally {
        for (const j of jobs) this.active.delete(j.name);
      }
    }
    return results;
  }

  /** Runs the jobs that fire at the minute of `at` (what a cron tick does; tests call it with an injected time). */
  tick(at: Date): Promise<SlotResult[]> {
    const slot = floorMinute(at);
    return this.dispatch(this.schedule.jobs.filter((j) => firesAt(j.cron, this.schedule.timezone, slot)), slot);
  }

  /** Jobs whose batch is queued or running in this scheduler. */
  private readonly active = new Map<string, 'slot' | 'catch-up'>();

  /**
   * Queues the batch of a fire time. A job still queued or running from an earlier slot
   * (it outlasts its period) skips this one, as it does when another scheduler runs it:
   * fire times never pile up behind a long run.
   */
  private async dispatch(jobs: JobConfig[], slot: Date, late = false): Promise<SlotResult[]> {
    const busy = jobs.filter((j) => this.active.has(j.name));
    const free = jobs.filter((j) => !this.active.has(j.name));
    const skipped = await this.skipBatch(busy, slot, late, (job) => (this.active.get(job.name) === 'catch-up' ? 'a catch-up of this job was still running' : 'the previous slot was still running'));
    if (!free.length) return skipped;
    for (const j of free) this.active.set(j.name, 'slot');
    try {
      return [...skipped, ...(await this.enqueue(() => this.runBatch(free, slot, late)))];
    } finally {
      for (const j of free) this.active.delete(j.name);
    }
  }

  /** Starts the cron tasks (before catchUp, whose jobs skip the fire times meanwhile). Fires of one minute are gathered into one batch. */
  start(): void {
    for (const job of this.schedule.jobs) {
      // node-cron's own messages (a missed tick after a suspend) go to our logger, not to stdout.
      const logger = {
        info: (m: string) => this.deps.log.debug({ job: job.name }, m),
        warn: (m: string) => this.deps.log.warn({ job: job.name }, m),
        error: (m: string | Error) => this.deps.log.error({ job: job.name, err: m }, 'cron error'),
        debug: (m: string | Error) => this.deps.log.debug({ job: job.name }, String(m)),
      };
      const task = cron.schedule(job.cron, (ctx) => this.fired(job, ctx.date), { timezone: this.schedule.timezone, name: job.name, logger });
      // node-cron drops a tick that comes more than 1 s late (the process was suspended, the
      // clock jumped, the event loop was blocked) and only says so: the slot would pass unrun
      // and unrecorded until the next fire time.
      task.on('execution:missed', (ctx) => this.missed(job, ctx.date));
      this.tasks.push(task);
    }
  }

  private fired(job: JobConfig, date: Date, late = false): void {
    if (this.stopping) return;
    const slot = floorMinute(date).getTime();
    const batch = this.pending.get(slot);
    if (batch) {
      batch.names.add(job.name);
      return;
    }
    this.pending.set(slot, { names: new Set([job.name]), late });
    // Let the other tasks of the same minute fire, then run them together, one batch at a time.
    setTimeout(() => {
      const gathered = this.pending.get(slot);
      this.pending.delete(slot);
      const jobs = this.schedule.jobs.filter((j) => gathered?.names.has(j.name));
      this.dispatchUntilReachable(jobs, new Date(slot), gathered?.late ?? false);
    }, 500);
  }

  /**
   * Dispatches a fire time's batch. One whose claim failed because the database was
   * unreachable (a restart at the fire time) was lost until the job's next fire time (a night's
   * load until the next night): it is claimed again, with backoff, once the database answers
   * — late, as a catch-up, and never twice (a slot is claimed once) — unless a later fire time
   * of its jobs came first (it loads the same sources).
   */
  private dispatchUntilReachable(jobs: JobConfig[], slot: Date, late: boolean, attempt = 1): void {
    for (const j of jobs) this.lastFired.set(j.name, Math.max(this.lastFired.get(j.name) ?? 0, slot.getTime()));
    this.dispatch(jobs, slot, late).catch((e) => {
      if (!isConnectionError(e) || this.stopping) return this.deps.log.error({ err: e }, 'scheduled batch failed');
      const wait = backoff(attempt, UNREACHABLE_RETRY_MS, UNREACHABLE_RETRY_MAX_MS);
      this.deps.log.warn({ err: e, slot: slot.toISOString(), jobs: jobs.map((j) => j.name), retry_in_ms: wait }, 'the database is unreachable at a fire time: claiming it when it answers');
      setTimeout(() => {
        const still = jobs.filter((j) => this.lastFired.get(j.name) === slot.getTime());
        if (!this.stopping && still.length) this.dispatchUntilReachable(still, slot, true, attempt + 1);
      }, wait).unref();
    });
  }

  /**
   * A fire time that passed while this process could not keep it is run late, as a catch-up
   * (claimed like any slot, so never twice). Of several (suspended for days), the latest
   * only, as at start: each would load the same current source.
   */
  private missed(job: JobConfig, date: Date): void {
    if (this.stopping) return;
    const known = this.missedSlots.get(job.name);
    if (known) {
      if (date > known) this.missedSlots.set(job.name, date);
      return;
    }
    this.missedSlots.set(job.name, date);
    setTimeout(() => {
      const slot = this.missedSlots.get(job.name)!;
      this.missedSlots.delete(job.name);
      this.deps.log.warn({ job: job.name, slot: floorMinute(slot).toISOString() }, 'a fire time passed while the scheduler was suspended or busy: running it late');
      this.fired(job, slot, true);
    }, 500);
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch((e) => this.deps.log.error({ err: e }, 'scheduled batch failed'));
    return next;
  }

  /** Records each job's slot as skipped (once, by whichever scheduler claims it). */
  private async skipBatch(jobs: JobConfig[], slot: Date, catchUp: boolean, why: (job: JobConfig) => string): Promise<SlotResult[]> {
    const results: SlotResult[] = [];
    for (const job of jobs) {
      const result: SlotResult = { job: job.name, slot, catchUp, claim: 'taken', runs: [] };
      results.push(result);
      if (!(await claims.claimSlot(this.deps.pool, job.name, slot, this.owner, catchUp))) continue;
      Object.assign(result, { claim: 'busy', status: 'skipped' });
      await claims.finishSlot(this.deps.pool, job.name, slot, 'skipped', why(job));
      this.deps.log.warn({ job: job.name, slot: slot.toISOString() }, `skipped: ${why(job)}`);
    }
    return results;
  }

  /** Claims each job's slot, then runs the claimed jobs' runs in dependency order. */
  async runBatch(jobs: JobConfig[], slot: Date, catchUp: boolean): Promise<SlotResult[]> {
    const { pool, log } = this.deps;
    if (!this.registered) await this.register(this.now());
    const results: SlotResult[] = [];
    const held: { job: JobConfig; result: SlotResult; lock: { release(): Promise<void> }; finals: RunOutcome[] }[] = [];
    // A database error while claiming a later job, or a run that throws, must not leave the
    // jobs claimed so far holding their lock (every later slot would be skipped as "still
    // running in another scheduler") nor their slot `running`, nor record it `done`.
    let crash: Error | null = null;
    try {
      for (const job of jobs) {
        if (this.stopping) break;
        const result: SlotResult = { job: job.name, slot, catchUp, claim: 'taken', runs: [] };
        results.push(result);
        const { claimed, lock, nightBy } = await claims.claimWithLock(pool, job.name, slot, this.owner, catchUp);
        if (nightBy) {
          // A manual `agro nightly` runs these pipelines now; both at once fail each other's
          // runs (run_in_progress). The slot is recorded skipped, as an overlapping tick is,
          // not run after it: the night loads the same sources.
          Object.assign(result, (await this.skipBatch([job], slot, catchUp, () => `a manual \`agro nightly\` was running (${nightBy})`))[0]);
          continue;
        }
        if (!claimed) continue;
        if (!lock) {
          result.claim = 'busy';
          result.status = 'skipped';
          await claims.finishSlot(pool, job.name, slot, 'skipped', 'the job was still running in another scheduler');
          continue;
        }
        result.claim = 'claimed';
        held.push({ job, result, lock, finals: [] });
        log.info({ job: job.name, slot: slot.toISOString(), catch_up: catchUp }, catchUp ? 'catching up a missed slot' : 'slot claimed');
      }
      const plan = planBatch(held.map((h) => h.job), (p) => !!findPipeline(p)?.scopedByUf, this.deps.cfg.sicarUfs);
      for (const run of plan) {
        const h = held.find((x) => x.job.name === run.job)!;
        if (this.stopping) break;
        h.finals.push(await this.runWithRetries(run, h.job.name, slot, h.result.runs));
      }
    } catch (e) {
      crash = e as Error;
      throw e;
    } finally {
      for (const h of held) {
        const failed = h.finals.filter((r) => r.status === 'failed');
        const status: claims.SlotStatus = this.stopping ? 'interrupted' : crash || failed.length ? 'failed' : 'done';
        const error = this.stopping
          ? `stopped (${String(this.abort.signal.reason ?? 'stop')})`
          : crash
            ? `the batch stopped: ${crash.message}`
            : failed.map((r) => `${r.pipeline}${r.uf ? ' ' + r.uf : ''}: ${r.error?.message}`).join('; ') || null;
        h.result.status = status;
        await claims.finishSlot(pool, h.job.name, slot, status, error).catch((e) => log.error({ err: e }, 'could not record the slot'));
        await h.lock.release();
      }
    }
    return results;
  }

  /** Runs one planned run until it does not fail (or the retries are spent); every attempt goes to `attempts`. */
  private async runWithRetries(run: PlannedRun, job: string, slot: Date, attempts: RunOutcome[]): Promise<RunOutcome> {
    const { cfg, pool, log } = this.deps;
    const pipeline = findPipeline(run.pipeline)!;
    const s = this.schedule;
    for (let attempt = 1; ; attempt++) {
      const outcome = await runPipeline({ cfg, pool, log, signal: this.abort.signal }, pipeline, { source: run.source, uf: run.uf });
      attempts.push(outcome);
      await claims.addSlotRun(pool, job, slot, outcome.run_id);
      // Only failures are retried: a blocked gate or an unchanged source is an answer.
      if (outcome.status !== 'failed' || this.stopping || attempt > s.retries) return outcome;
      const wait = backoff(attempt, s.backoffMs, s.maxBackoffMs);
      log.warn({ job, pipeline: run.pipeline, uf: run.uf, run_id: outcome.run_id, attempt, retry_in_ms: wait, error: outcome.error?.message }, 'run failed; retrying');
      await this.sleep(wait, this.abort.signal);
      if (this.stopping) return outcome;
    }
  }

  /** Stops firing, lets the stage under way finish (the run then ends interrupted), waits for the batch. */
  async stop(reason = 'stop'): Promise<void> {
    for (const t of this.tasks) await t.destroy();
    this.tasks.length = 0;
    this.abort.abort(reason);
    await this.queue;
  }
}
