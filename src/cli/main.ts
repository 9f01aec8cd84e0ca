// The `agro` command (contract §1). Results go to stdout (one JSON object with --json),
// logs to stderr. Exit codes: 0 success, 1 failure, 2 usage error, 3 quality gate refused.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig, type Config } from '../config.ts';
import { AgroError, diskFullError, isAgroError } from '../errors.ts';
import { createLogger } from '../log.ts';
import { EmbeddedCluster, databaseUrl } from '../db/cluster.ts';
import { createPool, isConnectionError } from '../db/pool.ts';
import { checkSourceScheme } from '../etl/download.ts';
import * as catalog from '../etl/catalog.ts';
import { keepSnapshot, publishSnapshot, rollback, type LockBudget } from '../etl/publish.ts';
import type { QualityReport } from '../etl/quality.ts';
import { reportExtras } from '../etl/report-data.ts';
import { renderReportHtml } from '../etl/report-html.ts';
import { publicationOf } from '../etl/report-status.ts';
import { checkAsOf, parseUf, reportPath, runPipeline, writeReportFiles, type RunOutcome } from '../etl/run.ts';
import { maskCpfsDeep, maskCpfsInText } from '../privacy.ts';
import { maskExampleValues } from '../etl/verdict-examples.ts';
import { setupTerminal } from '../progress.ts';
import { cmdBackfillSeries, keepBackfilled, keptLine } from './backfill-series.ts';
import { cmdDoctor } from './doctor.ts';
import { holdNightly } from '../etl/night-lock.ts';
import { stoppedBySignal } from './interrupt.ts';
import { cmdRuns } from './runs.ts';
import { cmdSchedule } from './schedule.ts';
import { namedSql, ROOT_DIR } from '../sql.ts';
import { describeRun, out, outVerbatim, pipelineArg, print, withDb, type Env } from './context.ts';
import { PIPELINES, findPipeline } from '../../pipelines/registry.ts';
import { defaultSicarRoute } from '../../pipelines/sicar/wfs-route.ts';
import { API_COMMANDS, cmdKeys, cmdServe, serveDemo } from './api-commands.ts';
import { cmdSandbox, runSandboxLoad, SANDBOX_COMMANDS } from './sandbox-command.ts';
import { migrateSandbox } from '../platform/sandbox.ts';
import { cmdPlatform, PLATFORM_COMMANDS } from './platform-command.ts';
import { cmdMonitors, MONITORS_COMMANDS } from './monitors-command.ts';
import { cmdWebhooks, WEBHOOKS_COMMANDS } from './webhooks-command.ts';
import { checkSyntax, grammar, usageLines, type Syntax } from './syntax.ts';

// What each command takes is its line here (syntax.ts): an argument or option it does not name is refused.
const PIPELINE = ['<pipeline>'];
const SNAPSHOT = ['<snapshot_id>'];
const COMMANDS: Syntax[] = [
  { form: 'db start|stop|status|url', does: 'the embedded PostGIS cluster under .data/' },
  { form: 'migrate', does: 'apply sql/ migrations' },
  { form: 'run <pipeline> [--source S] [--uf UF] [--as-of DATE] [--force] [--reload]', args: PIPELINE, does: '--reload: load bytes a snapshot already holds again (after an upgrade)' },
  { form: 'backfill <pipeline> --as-of DATE --source S [--uf UF] [--force]', args: PIPELINE },
  { form: 'backfill <pipeline> --series DIR | --series-file F [--uf UF] [--force]', args: PIPELINE, does: '(DIR/YYYY-MM-DD/ or lines "DATE SOURCE"; each kept)' },
  { form: 'schedule [--check]', does: 'run the jobs of agro.schedule.json (AGRO_SCHEDULE_FILE) until SIGTERM' },
  { form: 'runs [pipeline] [--limit N]', args: ['[pipeline]'], does: 'recent runs: status, duration, rows, error' },
  { form: 'doctor', does: 'check the installation (PostgreSQL, PostGIS, GDAL, disk, migrations), dead runs and the schedule' },
  { form: 'nightly [--sources official|fixtures] [--force]', does: '(--force: publish past the quality gate)' },
  { form: 'snapshots [dataset] [--uf UF]', args: ['[dataset]'] },
  { form: 'rollback <dataset> [--uf UF]', args: ['<dataset>'] },
  { form: 'publish <snapshot_id> [--force]', args: SNAPSHOT, does: '(--force: a snapshot the quality gate blocked)' },
  { form: 'keep <snapshot_id> [--release]', args: SNAPSHOT, does: "exempt a snapshot from retention (a backfill's is); --release: give it back" },
  { form: 'report <run_id|snapshot_id> [--format json|html] [--out FILE]', args: ['<run_id|snapshot_id>'] },
  { form: 'demo [--port 8080] [--host 127.0.0.1]', does: 'start the cluster, load every fixture, print what was published, serve the API' },
  ...API_COMMANDS,
  ...SANDBOX_COMMANDS,
  ...PLATFORM_COMMANDS,
  ...MONITORS_COMMANDS,
  ...WEBHOOKS_COMMANDS,
];
const GRAMMAR = grammar(COMMANDS);

const USAGE = `usage: agro <command> [options]

${usageLines(COMMANDS)}

pipelines: ${PIPELINES.map((p) => p.name).join(', ')}
every command accepts --json (one JSON object on stdout) and --help; any other argument or option its line does not name is a usage error`;

const lockBudget = (cfg: Config): LockBudget => ({ lockTimeoutMs: cfg.publishLockTimeoutMs, maxWaitMs: cfg.publishMaxWaitMs });

/** --uf for commands that read (snapshots, rollback): validated like a run's. */
function ufOption(env: Env): string | undefined {
  const uf = env.values.uf as string | undefined;
  return uf === undefined ? undefined : parseUf('this command', uf);
}

function runExit(o: RunOutcome): number {
  return o.status === 'failed' ? 1 : o.status === 'blocked' ? 3 : 0;
}

async function cmdRun(env: Env, backfill: boolean): Promise<number> {
  const pipeline = pipelineArg(env);
  const asOf = env.values['as-of'] as string | undefined;
  if (asOf !== undefined) checkAsOf(asOf);
  if (backfill && (!asOf || !env.values.source)) throw new AgroError('usage', 'backfill needs --as-of DATE and --source S');
  if (env.values.source !== undefined) checkSourceScheme(env.values.source as string, '--source');
  if (pipeline.scopedByUf) parseUf(pipeline.name, env.values.uf as string | undefined);
  const outcome = await stoppedBySignal(env, (signal) => withDb(env, async (pool) => {
    const o = await runPipeline({ cfg: env.cfg, pool, log: env.log, signal }, pipeline, {
      source: env.values.source as string | undefined,
      uf: env.values.uf as string | undefined,
      asOf,
      force: !!env.values.force,
      backfill,
      reload: !!env.values.reload,
    });
    return backfill ? { ...o, kept: await keepBackfilled(pool, o) } : o;
  }));
  print(env, outcome, () => describeRun(outcome) + ('kept' in outcome && outcome.kept ? keptLine(outcome.snapshot_id!) : ''));
  return runExit(outcome);
}

/** The bundled fixtures as sources: fixtures/<pipeline>/ (and one folder per UF for sicar). */
export function fixtureRuns(root = path.join(ROOT_DIR, 'fixtures')): { pipeline: string; source: string; uf?: string }[] {
  const runs: { pipeline: string; source: string; uf?: string }[] = [];
  for (const p of PIPELINES) {
    const dir = path.join(root, p.name);
    if (!fs.existsSync(dir)) continue;
    if (p.scopedByUf) {
      for (const uf of fs.readdirSync(dir).filter((d) => /^[A-Z]{2}$/.test(d)).sort()) runs.push({ pipeline: p.name, source: path.join(dir, uf), uf });
    } else runs.push({ pipeline: p.name, source: dir });
  }
  return runs;
}

/**
 * The official plan: every pipeline with a configured source. SICAR runs once per UF of
 * AGRO_SICAR_UFS, from a zip mirror when one is configured (the official zips need a
 * CAPTCHA), otherwise AREA_IMOVEL from the GeoServer WFS (AGRO_SOURCE_SICAR_WFS).
 */
export function officialRuns(cfg: Config): { plan: { pipeline: string; source?: string; uf?: string }[]; skipped: string[] } {
  const plan: { pipeline: string; source?: string; uf?: string }[] = [];
  const skipped: string[] = [];
  for (const p of PIPELINES) {
    const source = p.name === 'sicar' ? sicarSource(cfg) : cfg.sources[p.name];
    if (!source) {
      skipped.push(`${p.name}: no source configured (set AGRO_SOURCE_${p.name.toUpperCase().replace(/-/g, '_')})`);
      continue;
    }
    if (p.scopedByUf) for (const uf of cfg.sicarUfs) plan.push({ pipeline: p.name, source, uf });
    else plan.push({ pipeline: p.name, source });
  }
  return { plan, skipped };
}

/** SICAR's nightly source: the zip mirror or the WFS endpoint; undefined when neither is configured. */
function sicarSource(cfg: Config): string | undefined {
  try {
    const r = defaultSicarRoute(cfg.sources);
    return r.kind === 'wfs' ? r.endpoint : r.base;
  } catch {
    return undefined;
  }
}

/** A connection URL as printed: its password replaced (the output ends up in CI logs). */
function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (!u.password) return url;
    u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

const where = (r: { pipeline: string; uf?: string | null }) => `${r.pipeline}${r.uf ? ' ' + r.uf : ''}`;

/** What a night ended as: runs per status, the failed and blocked ones by name, the runs a signal left unstarted. */
function nightSummary(outcomes: RunOutcome[], notRun: string[]) {
  const byStatus: Record<string, number> = {};
  for (const o of outcomes) byStatus[o.status] = (byStatus[o.status] ?? 0) + 1;
  const named = (status: string) => outcomes.filter((o) => o.status === status).map(where);
  return { runs: outcomes.length, by_status: byStatus, failed: named('failed'), blocked: named('blocked'), not_run: notRun };
}

/** The night's last line: a failure among thirty run lines and the logs is named again here. */
function summaryLine(s: ReturnType<typeof nightSummary>, outcomes: RunOutcome[]): string {
  const order = ['published', 'loaded', 'unchanged', 'blocked', 'failed'];
  const parts = order.filter((st) => s.by_status[st]).map((st) => {
    const of = outcomes.filter((o) => o.status === st);
    const names = st === 'failed' ? of.map((o) => `${where(o)}: ${o.error?.code ?? 'failed'}`) : st === 'blocked' ? of.map(where) : [];
    return `${of.length} ${st}${names.length ? ` (${names.join(', ')})` : ''}`;
  });
  return `nightly: ${s.runs} runs — ${parts.join(', ') || 'none'}${s.not_run.length ? `; not started: ${s.not_run.join(', ')}` : ''}`;
}

async function cmdNightly(env: Env): Promise<number> {
  const which = (env.values.sources as string | undefined) ?? 'official';
  if (which !== 'official' && which !== 'fixtures') throw new AgroError('usage', '--sources is official or fixtures');
  const { plan, skipped } = which === 'fixtures' ? { plan: fixtureRuns(), skipped: [] as string[] } : officialRuns(env.cfg);
  for (const s of skipped) env.log.warn(`skipped ${s}`);
  const outcomes: RunOutcome[] = [];
  await stoppedBySignal(env, (signal) => withDb(env, async (pool) => {
    const night = await holdNightly(databaseUrl(env.cfg));
    try {
      for (const r of plan) {
        if (signal.aborted) break; // the rest of the night is not started
        const p = findPipeline(r.pipeline)!;
        const o = await runPipeline({ cfg: env.cfg, pool, log: env.log, signal }, p, { source: r.source, uf: r.uf, force: !!env.values.force });
        outcomes.push(o);
        if (!env.json) out(describeRun(o));
      }
    } finally {
      await night.release();
    }
  }));
  const notRun = plan.slice(outcomes.length).map(where);
  const summary = nightSummary(outcomes, notRun);
  if (env.json) print(env, { runs: outcomes, skipped, summary }, () => '');
  else {
    for (const s of skipped) out(`skipped ${s}`);
    out(summaryLine(summary, outcomes));
  }
  return outcomes.some((o) => o.status === 'failed') ? 1 : outcomes.some((o) => o.status === 'blocked') ? 3 : 0;
}

async function cmdSnapshots(env: Env): Promise<number> {
  // An unknown dataset is a usage error (as for runs), not an empty list.
  if (env.args[1] !== undefined) pipelineArg(env);
  const rows = await withDb(env, (pool) => catalog.listSnapshots(pool, env.args[1] ?? null, ufOption(env) ?? null));
  const snapshots = rows.map((s) => ({
    snapshot_id: s.snapshot_id, dataset: s.dataset, uf: s.uf, as_of: s.as_of,
    status: s.is_current ? 'current' : s.status, rows: s.rows, source_sha256: s.source_sha256,
    published_at: s.published_at, forced: s.forced, kept: s.kept, run_id: s.run_id,
  }));
  print(env, { snapshots }, () =>
    snapshots.length === 0
      ? 'no snapshots'
      : snapshots.map((s) => `${String(s.snapshot_id).padStart(5)}  ${s.dataset.padEnd(16)} ${(s.uf ?? '').padEnd(3)} ${s.as_of}  ${s.status.padEnd(11)} ${String(s.rows ?? '').padStart(9)} rows  ${(s.source_sha256 ?? '').slice(0, 12)}`).join('\n'),
  );
  return 0;
}

async function cmdRollback(env: Env): Promise<number> {
  const pipeline = pipelineArg(env);
  const uf = ufOption(env);
  if (pipeline.scopedByUf && !uf) throw new AgroError('usage', `${pipeline.name} rollback needs --uf UF`);
  const r = await withDb(env, (pool) => rollback(pool, pipeline, uf ?? '', lockBudget(env.cfg), env.log));
  print(env, { dataset: pipeline.name, uf: uf ?? null, from_snapshot_id: r.from, snapshot_id: r.to }, () => `${pipeline.name}${uf ? ' ' + uf : ''}: snapshot ${r.to} is current again (was ${r.from})`);
  return 0;
}

async function cmdPublish(env: Env): Promise<number> {
  const id = Number(env.args[1]);
  if (!Number.isInteger(id) || id <= 0) throw new AgroError('usage', 'publish needs a snapshot id');
  const r = await withDb(env, async (pool) => {
    const snap = await catalog.getSnapshot(pool, id);
    if (!snap) throw new AgroError('snapshot_not_found', String(id));
    const p = findPipeline(snap.dataset);
    if (!p) throw new AgroError('snapshot_not_found', `unknown dataset ${snap.dataset}`);
    // A blocked snapshot needs --force (publishSnapshot refuses it, naming the failed rules).
    const done = await publishSnapshot(pool, p, id, { force: !!env.values.force, budget: lockBudget(env.cfg), log: env.log });
    // Forced past its gate: the report files the run wrote say so too, as the catalogue's report does.
    const quality = done.forced && snap.status === 'blocked' ? (await catalog.getSnapshot(pool, id))?.quality : null;
    if (quality && fs.existsSync(reportPath(env.cfg, id))) writeReportFiles(env.cfg, quality as unknown as QualityReport);
    return done;
  });
  print(env, { snapshot_id: id, published: r.published, status: r.status, forced: r.forced }, () => `snapshot ${id} is current${r.forced ? ' (forced past the quality gate)' : ''}`);
  return 0;
}

async function cmdKeep(env: Env): Promise<number> {
  const id = Number(env.args[1]);
  if (!Number.isInteger(id) || id <= 0) throw new AgroError('usage', 'keep needs a snapshot id');
  const release = !!env.values.release;
  const ok = await withDb(env, (pool) => keepSnapshot(pool, id, !release, env.log));
  print(env, { snapshot_id: id, kept: ok }, () => (release ? `snapshot ${id} is back under retention (the next run's may drop it)` : `snapshot ${id} is exempt from retention`));
  return 0;
}

async function cmdReport(env: Env): Promise<number> {
  const arg = env.args[1];
  if (!arg || !/^[rs]?\d+$/.test(arg)) throw new AgroError('usage', 'report needs a run id or a snapshot id (r123 / s123 to be explicit)');
  const format = (env.values.format as string | undefined) ?? 'json';
  if (format !== 'json' && format !== 'html') throw new AgroError('usage', '--format is json or html');
  const { report, extras } = await withDb(env, async (pool) => {
    const n = Number(arg.replace(/^[rs]/, ''));
    let snap = arg.startsWith('r') ? null : await catalog.getSnapshot(pool, n);
    const run = !snap && !arg.startsWith('s') ? await catalog.getRun(pool, n) : null;
    if (run?.snapshot_id) snap = await catalog.getSnapshot(pool, run.snapshot_id);
    // A run (or a snapshot's run) that ended before its quality stage says why, rather than that nothing exists.
    const ended = run ?? (snap && !snap.quality && snap.run_id ? await catalog.getRun(pool, snap.run_id) : null);
    const why = ended && !snap?.quality ? ` (run ${ended.run_id} ended ${ended.status} before its quality stage${ended.error ? `: ${ended.error}` : ''})` : '';
    if (!snap?.quality) throw new AgroError('snapshot_not_found', `no quality report for ${arg}${why}`);
    let q = snap.quality as unknown as QualityReport;
    // A run that found its source unchanged loaded nothing: the report is the identical snapshot's, and says so.
    if (run?.status === 'unchanged') {
      const note = `run ${run.run_id} loaded nothing (${run.message ?? `source identical to snapshot ${snap.snapshot_id}`}): this is the report of snapshot ${snap.snapshot_id}${q.run_id ? ` (run ${q.run_id})` : ''}`;
      q = { ...q, facts: { ...q.facts, notes: [note, ...q.facts.notes] } };
    }
    // Served or not, and what to do: the catalogue's word now, not the run's.
    const answering = (await catalog.answeringSnapshot(pool, snap.dataset, snap.scope, snap.as_of))?.snapshot_id ?? null;
    q = { ...q, publication: publicationOf(q, snap, await catalog.currentSnapshot(pool, snap.dataset, snap.scope), answering) };
    // Example rows stored before their numbers were masked too (verdict-examples.ts).
    if (q.facts.examples) q = { ...q, facts: { ...q.facts, examples: maskExampleValues(q.facts.examples) } };
    const relation = findPipeline(snap.dataset)?.mainRelation;
    return { report: q, extras: format === 'html' && relation ? await reportExtras(pool, relation, q) : undefined };
  });
  const safe = maskCpfsDeep(report);
  const text = format === 'html' ? renderReportHtml(safe, maskCpfsDeep(extras)) : JSON.stringify(safe, null, 2);
  if (env.values.out) {
    try {
      fs.writeFileSync(env.values.out as string, text);
    } catch (e) {
      // A full disk says so (fail()); a folder that does not exist or cannot be written is the argument's fault.
      if (diskFullError(e)) throw e;
      throw new AgroError('usage', `--out ${env.values.out}: cannot write the report (${(e as Error).message})`);
    }
    print(env, { snapshot_id: report.snapshot_id, format, out: env.values.out }, () => `report written to ${env.values.out}`);
  } else if (!env.json) out(text);
  else if (format === 'html') print(env, { snapshot_id: report.snapshot_id, format, html: text }, () => text);
  else print(env, safe, () => text);
  return 0;
}

async function cmdDb(env: Env): Promise<number> {
  const sub = env.args[1];
  const cluster = new EmbeddedCluster(env.cfg);
  if (sub === 'url') {
    const url = databaseUrl(env.cfg);
    outVerbatim(env.json ? JSON.stringify({ url }) : url);
    return 0;
  }
  if (env.cfg.databaseUrl && (sub === 'start' || sub === 'stop')) {
    throw new AgroError('usage', 'DATABASE_URL is set: the embedded cluster is not used');
  }
  if (env.cfg.databaseUrl && sub === 'status') {
    // The database in use is DATABASE_URL's: say whether it answers, not that an unused cluster is stopped.
    const pool = createPool(env.cfg.databaseUrl, 1);
    const error = await pool.query('SELECT 1').then(() => null, (e: Error) => e.message);
    await pool.end();
    const st = { running: error === null, url: withoutPassword(env.cfg.databaseUrl), note: 'DATABASE_URL is set: the embedded cluster is not used', ...(error ? { error } : {}) };
    print(env, st, () => `${st.note}\n${st.running ? 'reachable' : `unreachable (${error})`}  ${st.url}`);
    return st.running ? 0 : 1;
  }
  let st;
  if (sub === 'start') st = await cluster.start((m) => env.log.info(m));
  else if (sub === 'stop') st = await cluster.stop();
  else if (sub === 'status') st = await cluster.status();
  else throw new AgroError('usage', 'db start|stop|status|url');
  print(env, st, () => `${st.note ? st.note + '\n' : ''}${st.running ? 'running' : 'stopped'}  ${st.url}  (${st.dataDir})`);
  return sub === 'status' && !st.running ? 1 : 0;
}

async function cmdDemo(env: Env): Promise<number> {
  const code = await cmdNightly({ ...env, values: { ...env.values, sources: 'fixtures' } });
  await withDb(env, async (pool) => {
    const r = await pool.query(namedSql('queries/demo_summary'));
    if (env.json) return;
    process.stdout.write('\nWhat a lender would ask of each property (serving.car_imovel and its overlaps):\n');
    for (const x of r.rows) {
      const flags = [
        x.embargo_ibama ? 'EMBARGO IBAMA' : null,
        Number(x.embargos_icmbio) ? `${x.embargos_icmbio} EMBARGO ICMBIO` : null,
        x.ucs ? `${x.ucs} UC` : null,
        x.tis ? `${x.tis} TI` : null,
        x.quilombos ? `${x.quilombos} quilombo` : null,
      ].filter(Boolean);
      process.stdout.write(
        `  ${x.car}  ${x.situacao.padEnd(9)} ${String(x.area_ha).padStart(8)} ha  ${x.municipio}/${x.uf}  road ${x.rodovia_km ?? '?'} km  ${flags.length ? flags.join(', ') : 'clean'}\n`,
      );
    }
    process.stdout.write(`\nSnapshots: npx agro snapshots    Reports: npx agro report <snapshot_id> --format html --out report.html\nDatabase: ${databaseUrl(env.cfg)}\n`);
  });
  if (code !== 0) return code;
  await runSandboxLoad(env, fixtureRuns());
  return serveDemo(env);
}

/** The one failure output: `{"error": {code, message}}` on stdout with --json, a line on stderr always. */
function fail(json: boolean, e: unknown): number {
  const err = isAgroError(e)
    ? e
    : isConnectionError(e)
      ? new AgroError('database_unavailable', (e as Error).message)
      : (diskFullError(e) ?? new AgroError('internal', (e as Error)?.message ?? String(e)));
  const details = Object.keys(err.details).length ? { details: err.details } : {};
  if (json) out(JSON.stringify(maskCpfsDeep({ error: { code: err.code, message: err.message, ...details } })));
  // The command line's usage follows a usage error, not a configuration one (the environment is wrong, not the command).
  const showUsage = err.code === 'usage' && !/^usage error: configuration: /.test(err.message);
  process.stderr.write(`agro: ${maskCpfsInText(err.message)}${showUsage ? `\n\n${USAGE}` : ''}\n`);
  return err.exitCode;
}
export async function main(argv: string[]): Promise<number> {
  // Known before parsing, so that even a parse error answers in JSON.
  const json = argv.includes('--json');
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: GRAMMAR.options, allowPositionals: true, strict: true });
  } catch (e) {
    return fail(json, new AgroError('usage', (e as Error).message));
  }
  let cfg: Config;
  try {
    cfg = loadConfig();
  } catch (e) {
    return fail(json, new AgroError('usage', `configuration: ${(e as Error).message}`));
  }
  // No option is `multiple`: a value is a string or a switch.
  const env: Env = { cfg, log: createLogger(cfg.logLevel, setupTerminal(cfg.logFormat, cfg.dumbTerminal)), json, values: parsed.values as Env['values'], args: parsed.positionals };
  const cmd = env.args[0];
  if (parsed.values.help) {
    if (json) print(env, { usage: USAGE }, () => USAGE);
    else out(USAGE);
    return 0;
  }
  if (!cmd) {
    if (!json) {
      out(USAGE);
      return 2;
    }
    return fail(json, new AgroError('usage', 'missing <command>'));
  }
  // A last resort: an error event nobody listened to still ends in one result.
  const onUncaught = (e: unknown) => {
    process.exitCode = fail(json, e);
    process.exit();
  };
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  try {
    checkSyntax(GRAMMAR, env.args, parsed.values);
    switch (cmd) {
      case 'db': return await cmdDb(env);
      case 'migrate': {
        await withDb(env, async () => {});
        const applied = env.applied ?? [];
        // the sandbox of test keys follows the live database's schema
        const sandbox = await migrateSandbox(env.cfg, databaseUrl(env.cfg));
        print(env, { ok: true, applied, ...(sandbox && { sandbox_applied: sandbox }) }, () =>
          (applied.length ? `applied ${applied.join(', ')}` : 'already up to date') + (sandbox?.length ? `\nsandbox: applied ${sandbox.join(', ')}` : ''));
        return 0;
      }
      case 'run': return await cmdRun(env, false);
      case 'backfill': return await (env.values.series || env.values['series-file'] ? cmdBackfillSeries(env) : cmdRun(env, true));
      case 'schedule': return await cmdSchedule(env);
      case 'runs': return await cmdRuns(env);
      case 'doctor': return await cmdDoctor(env);
      case 'nightly': return await cmdNightly(env);
      case 'snapshots': return await cmdSnapshots(env);
      case 'rollback': return await cmdRollback(env);
      case 'publish': return await cmdPublish(env);
      case 'keep': return await cmdKeep(env);
      case 'report': return await cmdReport(env);
      case 'demo': return await cmdDemo(env);
      case 'serve': return await cmdServe(env);
      case 'keys': return await cmdKeys(env);
      case 'sandbox': return await cmdSandbox(env, fixtureRuns());
      case 'platform': return await cmdPlatform(env);
      case 'monitors': return await cmdMonitors(env);
      case 'webhooks': return await cmdWebhooks(env);
      default:
        throw new AgroError('usage', `unknown command "${cmd}"`);
    }
  } catch (e) {
    if (!isAgroError(e) && !isConnectionError(e) && !diskFullError(e)) env.log.error({ err: e }, 'unexpected error');
    return fail(json, e);
  } finally {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
  }
}
