// `agro schedule [--check]`: runs the scheduler until SIGTERM/SIGINT (--check validates the
// schedule file and prints the jobs with their next fire times).
import cron from 'node-cron';
import { PIPELINES } from '../../pipelines/registry.ts';
import { loadSchedule, type ScheduleConfig } from '../schedule/config.ts';
import { planBatch } from '../schedule/plan.ts';
import { Scheduler } from '../schedule/loop.ts';
import pg from 'pg';
import { databaseUrl } from '../db/cluster.ts';
import * as claims from '../schedule/claims.ts';
import type { SlotRow } from '../schedule/claims.ts';
import { openDb, print, type Env } from './context.ts';
import { Drainer } from '../events/delivery.ts';
import { purgePlatform, PURGE_EVERY_MS } from '../platform/purge.ts';

/** `2026-11-25 01:00` in `timezone`: cron fields are local time, the host's clock is often UTC. */
function localMinute(d: Date, timezone: string): string {
  return new Intl.DateTimeFormat('sv-SE', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(d);
}

function describe(s: ScheduleConfig, sicarUfs: readonly string[]) {
  return s.jobs.map((j) => {
    const task = cron.createTask(j.cron, () => {}, { timezone: s.timezone });
    const fires = task.getNextRuns(3);
    void task.destroy();
    const runs = planBatch([j], (p) => !!PIPELINES.find((x) => x.name === p)?.scopedByUf, sicarUfs);
    return { job: j.name, cron: j.cron, pipelines: j.pipelines, runs: runs.length, next: fires.map((d) => d.toISOString()), next_local: fires.map((d) => localMinute(d, s.timezone)) };
  });
}

/**
 * The latest slot of each job, when the database answers (--check also validates a file
 * offline): a night skipped, failed or interrupted has no run in `agro runs` to show it.
 */
async function lastSlots(env: Env): Promise<Map<string, SlotRow> | null> {
  const client = new pg.Client({ connectionString: databaseUrl(env.cfg), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    return await claims.lastSlots(client);
  } catch (e) {
    env.log.debug({ err: e }, 'no last slots: the database did not answer');
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

export async function cmdSchedule(env: Env): Promise<number> {
  const schedule = loadSchedule(env.cfg.scheduleFile, PIPELINES.map((p) => p.name), env.cfg.scheduleFileExplicit);
  const jobs = describe(schedule, env.cfg.sicarUfs);
  if (env.values.check) {
    const last = await lastSlots(env);
    const checked = jobs.map((j) => {
      const l = last?.get(j.job);
      return { ...j, last: l ? { slot: l.slot.toISOString(), slot_local: localMinute(l.slot, schedule.timezone), status: l.status, error: l.error, run_ids: l.run_ids } : null };
    });
    print(env, { origin: schedule.origin, timezone: schedule.timezone, retries: schedule.retries, jobs: checked }, () =>
      [`schedule from ${schedule.origin} (${schedule.timezone}; ${schedule.retries} retries from ${schedule.backoffMs / 1000} s)`,
        ...checked.flatMap((j) => [
          `  ${j.job.padEnd(18)} ${j.cron.padEnd(14)} ${j.pipelines.join(', ')} (${j.runs} runs)  next ${j.next[0] ? `${j.next_local[0]} ${schedule.timezone} (${j.next[0].slice(0, 16).replace('T', ' ')} UTC)` : '—'}`,
          ...(j.last ? [`  ${' '.repeat(18)} last ${j.last.slot_local}: ${j.last.status}${j.last.error ? ` (${j.last.error})` : ''}`] : []),
        ])].join('\n'));
    return 0;
  }
  const pool = await openDb(env);
  const scheduler = new Scheduler({ cfg: env.cfg, pool, log: env.log }, schedule);
  // The webhook outbox is drained while the scheduler runs (contract §1).
  const drainer = new Drainer({ pool, cfg: env.cfg, log: env.log }).start();
  // The platform's retention (agro platform purge) at the start and every day after: a failure is a warning, retried the next day.
  let purged: Promise<void> = Promise.resolve();
  const purge = () => (purged = purgePlatform(pool, env.cfg).then((r) => env.log.info(r, 'platform purge'), (e) => env.log.warn({ err: e }, 'platform purge failed; retried in a day')));
  const purging = setInterval(purge, PURGE_EVERY_MS);
  purging.unref();
  purge();
  let signals = 0;
  let done!: () => void;
  const stopped = new Promise<void>((r) => (done = r));
  const onSignal = (sig: NodeJS.Signals) => {
    if (++signals > 1) {
      env.log.warn(`${sig} again: exiting now; the run under way is cleaned up by the next run`);
      process.exit(1);
    }
    env.log.info(`${sig}: the stage under way finishes, nothing more starts`);
    // A stage that outlasts the grace period is left to the dead-run cleanup (its lock dies with us).
    setTimeout(() => {
      env.log.warn(`still running after ${schedule.shutdownGraceMs} ms: exiting; the next run cleans up what this one left`);
      process.exit(1);
    }, schedule.shutdownGraceMs).unref();
    scheduler.stop(sig).then(done, done);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    env.log.info({ origin: schedule.origin, timezone: schedule.timezone, jobs: jobs.map((j) => `${j.job} ${j.cron}`) }, 'scheduler started');
    // The tasks first: a fire time that passes during a long catch-up is recorded (skipped), not lost.
    scheduler.start();
    await scheduler.catchUp();
    await stopped;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    // A start that failed (the catch-up could not register the jobs) must not leave the cron tasks keeping the process up.
    if (!scheduler.stopping) await scheduler.stop('the scheduler failed');
    clearInterval(purging);
    await purged;
    await drainer.stop();
    await pool.end();
  }
  print(env, { stopped: true }, () => 'scheduler stopped');
  return 0;
}
