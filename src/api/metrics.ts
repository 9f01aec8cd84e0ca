// GET /metrics in the Prometheus text format: the API's latency by route pattern, method and
// status (an in-process histogram, so per server process), and the ETL's figures read from the
// database at scrape time (runs by pipeline and status, rows, stage durations, snapshot age
// and freshness). Open unless AGRO_METRICS_TOKEN is set, then `Authorization: Bearer <token>`.
// Never in it: API keys or their ids, documents, raw URLs, error texts — labels are route
// patterns, pipeline, dataset, stage and status names only.
import crypto from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { Config } from '../config.ts';
import { AgroError } from '../errors.ts';
import { lastRunStages, rowsByPipeline, runsByStatus, stageDurations } from '../metrics/etl-sql.ts';
import { Histogram, renderFamily, type Family } from '../metrics/registry.ts';
import type { FailureLimiter } from '../platform/auth-failures.ts';
import type { HistoryWriter } from '../platform/history-writer.ts';
import { cadencesOf, sourceStates } from './meta/freshness.ts';
import { publishedSnapshots, sourceRuns } from './meta/sql.ts';

/** Upper bounds in seconds (Prometheus' defaults): a lookup answers in a few ms, an enrichment in tens to hundreds. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** The API process's own figures. */
export class ApiMetrics {
  readonly latency = new Histogram(
    'agro_api_request_duration_seconds',
    'Time from a request to its answer, by route pattern (not the URL), method and status; unmatched routes are route="unmatched"',
    ['route', 'method', 'status'],
    LATENCY_BUCKETS,
  );

  /** onResponse: one observation per answer. */
  observe(req: FastifyRequest, reply: FastifyReply): void {
    this.latency.observe({ route: req.routeOptions.url ?? 'unmatched', method: req.method, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
  }
}

const scope = (uf: string | null) => uf ?? 'BR';
const num = (s: string) => Number(s);

/** The ETL and snapshot families, from the database. */
async function etlFamilies(pool: pg.Pool, cadences: ReadonlyMap<string, number>): Promise<Family[]> {
  const [runs, rows, stages, last, published, sr] = await Promise.all([
    runsByStatus(pool), rowsByPipeline(pool), stageDurations(pool), lastRunStages(pool), publishedSnapshots(pool), sourceRuns(pool),
  ]);
  const states = sourceStates(published, sr, cadences, Date.now());
  return [
    { name: 'agro_etl_runs', type: 'gauge', help: 'Runs in the ledger by pipeline and status (a running run moves to its final status; dead: its process died, not cleaned up yet)',
      samples: runs.map((r) => ({ labels: { pipeline: r.pipeline, status: r.status }, value: r.n })) },
    { name: 'agro_etl_rows_loaded_total', type: 'counter', help: 'Rows loaded by finished runs, by pipeline',
      samples: rows.map((r) => ({ labels: { pipeline: r.pipeline }, value: num(r.loaded) })) },
    { name: 'agro_etl_rows_rejected_total', type: 'counter', help: 'Rows rejected (counted in the quality reports) by finished runs, by pipeline',
      samples: rows.map((r) => ({ labels: { pipeline: r.pipeline }, value: num(r.rejected) })) },
    { name: 'agro_etl_stage_duration_seconds', type: 'summary', help: 'Completed stages by pipeline and stage: count and total seconds',
      samples: stages.flatMap((s) => [
        { labels: { pipeline: s.pipeline, stage: s.stage }, value: num(s.ms) / 1000, suffix: '_sum' as const },
        { labels: { pipeline: s.pipeline, stage: s.stage }, value: s.n, suffix: '_count' as const },
      ]) },
    { name: 'agro_etl_last_run_stage_duration_seconds', type: 'gauge', help: 'Stages of the latest finished run of each pipeline and scope (BR: national), with their status',
      samples: last.map((s) => ({ labels: { pipeline: s.pipeline, scope: scope(s.scope || null), stage: s.stage, status: s.status }, value: s.ms / 1000 })) },
    { name: 'agro_snapshot_age_seconds', type: 'gauge', help: 'Seconds since the current snapshot of each dataset and scope was published',
      samples: states.filter((s) => s.snapshot.published_at).map((s) => ({ labels: { dataset: s.snapshot.dataset, scope: scope(s.snapshot.uf) }, value: Math.round((Date.now() - s.snapshot.published_at!.getTime()) / 1000) })) },
    { name: 'agro_source_check_age_seconds', type: 'gauge', help: 'Seconds since the later of the publication and the last run that found the source unchanged (the age freshness is judged on)',
      samples: states.filter((s) => s.ageMs !== null).map((s) => ({ labels: { dataset: s.snapshot.dataset, scope: scope(s.snapshot.uf) }, value: Math.round(s.ageMs! / 1000) })) },
    { name: 'agro_source_expected_cadence_seconds', type: 'gauge', help: 'The expected interval between loads of a dataset, from the schedule config',
      samples: [...cadences].sort((a, b) => a[0].localeCompare(b[0])).map(([dataset, ms]) => ({ labels: { dataset }, value: ms / 1000 })) },
    { name: 'agro_source_freshness', type: 'gauge', help: 'Freshness of each published source (1 on its current state: fresh, stale or critical; see /v1/sources)',
      samples: states.filter((s) => s.freshness).flatMap((s) => (['fresh', 'stale', 'critical'] as const).map((f) => ({ labels: { dataset: s.snapshot.dataset, scope: scope(s.snapshot.uf), freshness: f }, value: s.freshness === f ? 1 : 0 }))) },
  ];
}

/**
 * The token, when one is set. Open, every scrape reads the database: it counts against the
 * address like a failed authentication (a scraper makes a few a minute); a wrong token counts too.
 */
function checkToken(cfg: Config, failures: FailureLimiter, req: FastifyRequest, reply: FastifyReply): void {
  failures.check(req, reply);
  const want = cfg.api.metricsToken;
  if (want === null) return failures.fail(req.ip);
  const m = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  const a = crypto.createHash('sha256').update(m?.[1] ?? '').digest();
  const b = crypto.createHash('sha256').update(want).digest();
  if (!m || !crypto.timingSafeEqual(a, b)) {
    failures.fail(req.ip);
    throw new AgroError('unauthorized', 'GET /metrics needs Authorization: Bearer <AGRO_METRICS_TOKEN>');
  }
}

export function metricsRoutes(o: { cfg: Config; pool: pg.Pool; metrics: ApiMetrics; history: HistoryWriter; failures: FailureLimiter }): FastifyPluginAsync {
  return async (app) => {
    const cadences = cadencesOf(o.cfg, app.log);
    app.get('/metrics', { schema: { hide: true }, config: { public: true } }, async (req, reply) => {
      checkToken(o.cfg, o.failures, req, reply);
      const api: Family[] = [
        { name: 'agro_api_history_buffered_rows', type: 'gauge', help: 'Query history rows of this process not yet written (flushed every 200 ms)', samples: [{ labels: {}, value: o.history.buffered }] },
        { name: 'agro_api_history_dropped_rows_total', type: 'counter', help: 'Query history rows dropped because the buffer overflowed while the database was unreachable', samples: [{ labels: {}, value: o.history.dropped }] },
        { name: 'agro_api_history_refused_rows_total', type: 'counter', help: 'Query history rows the database refused (a value the table cannot hold): dropped alone, the rest of their batch written', samples: [{ labels: {}, value: o.history.refused }] },
      ];
      const text = o.metrics.latency.render() + [...api, ...(await etlFamilies(o.pool, cadences))].map(renderFamily).join('');
      reply.type('text/plain; version=0.0.4; charset=utf-8');
      return text;
    });
  };
}
