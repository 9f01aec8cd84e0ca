// `agro schedule [--check]`: runs the scheduler until SIGTERM/SIGINT (--check validates the
// schedule file and prints the jobs with their next fire times).
import cron from 'node-cron';
import { PIPELINES } from '../../pipelines/registry.ts';
import { loadSchedule, type ScheduleConfig } from '../schedule/config.ts';
import { planBatch } from '../schedule/plan.ts';
import { Scheduler } from '../schedule/loop.ts';
import { openDb, print, type Env } from './context.ts';
import { Drainer } from '../events/delivery.ts';

function describe(s: ScheduleConfig, sicarUfs: readonly string[]) {
  return s.jobs.map((j) => {
    const task = cron.createTask(j.cron, () => {}, { timezone: s.timezone });
    const next = task.getNextRuns(3).map((d) => d.toISOString());
    void task.destroy();
    const runs = planBatch([j], (p) => !!PIPELINES.find((x) => x.name === p)?.scopedByUf, sicarUfs);
    return { job: j.name, cron: j.cron, pipelines: j.pipelines, runs: runs.length, next };
  });
}

export async function cmdSchedule(env: Env): Promise<number> {
  const schedule = loadSchedule(env.cfg.scheduleFile, PIPELINES.map((p) => p.name), env.cfg.scheduleFileExplicit);
  const jobs = describe(schedule, env.cfg.sicarUfs);
  if (env.values.check) {
    print(env, { origin: schedule.origin, timezone: schedule.timezone, retries: schedule.retries, jobs }, () =>
      [`schedule from ${schedule.origin} (${schedule.timezone}; ${schedule.retries} retries from ${schedule.backoffMs / 1000} s)`,
        ...jobs.map((j) => `  ${j.job.padEnd(18)} ${j.cron.padEnd(14)} ${j.pipelines.join(', ')} (${j.runs} runs)  next ${j.next[0] ?? '—'}`)].join('\n'));
    return 0;
  }
  const pool = await openDb(env);
  const scheduler = new Scheduler({ cfg: env.cfg, pool, log: env.log }, schedule);
  // The webhook outbox is drained while the scheduler runs (contract §1).
  const drainer = new Drainer({ pool, cfg: env.cfg, log: env.log }).start();
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
    await scheduler.catchUp();
    if (!scheduler.stopping) scheduler.start();
    await stopped;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await drainer.stop();
    await pool.end();
  }
  print(env, { stopped: true }, () => 'scheduler stopped');
  return 0;
}
