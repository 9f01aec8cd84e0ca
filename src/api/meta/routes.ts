// GET /v1/health (no key), GET /v1/sources, GET /v1/openapi.json (no key).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ApiDeps } from '../deps.ts';
import { DateString, ErrorResponses, isoSeconds, Nullable, Timestamp } from '../schemas.ts';
import { cadencesOf, FRESHNESS_RULE, sourceStates } from './freshness.ts';
import { dbPing, publishedSnapshots, readableHistory, sourceRuns } from './sql.ts';

const Published = Type.Object({
  dataset: Type.String(), uf: Nullable(Type.String()), snapshot_id: Type.Integer(), as_of: DateString,
  published_at: Nullable(Timestamp), rows: Nullable(Type.Integer()),
});

const HealthSchema = {
  summary: 'Service health: database reachable, each published snapshot and its age',
  tags: ['meta'],
  security: [],
  response: {
    200: Type.Object({
      status: Type.Literal('ok'),
      database: Type.Object({ reachable: Type.Boolean(), latency_ms: Type.Number() }),
      datasets: Type.Array(Type.Object({
        dataset: Type.String(), uf: Nullable(Type.String()), snapshot_id: Type.Integer(), as_of: DateString,
        published_at: Nullable(Timestamp), age_hours: Nullable(Type.Number({ description: 'hours since publication' })),
        as_of_age_days: Type.Integer({ description: 'days since the source as-of date' }),
      })),
      consultado_em: Timestamp,
    }),
    ...ErrorResponses,
  },
};

const LastRun = Type.Object({
  status: Type.String({ description: 'running, published, unchanged, blocked, failed or killed' }),
  started_at: Timestamp,
  finished_at: Nullable(Timestamp),
  error_code: Nullable(Type.String()),
});

const SourcesSchema = {
  summary: 'Each dataset and state: the published snapshot, its freshness, the last run, and the as-of dates kept for as_of reads',
  description: `Freshness: ${FRESHNESS_RULE}`,
  tags: ['meta'],
  response: {
    200: Type.Object({
      sources: Type.Array(Type.Object({
        ...Published.properties,
        as_of_disponiveis: Type.Array(DateString),
        freshness: Nullable(Type.Union([Type.Literal('fresh'), Type.Literal('stale'), Type.Literal('critical')], { description: FRESHNESS_RULE })),
        checked_at: Nullable(Type.String({ format: 'date-time', description: "UTC: the later of the snapshot's publication and the last run that found the source unchanged" })),
        age_hours: Nullable(Type.Number({ description: 'hours since checked_at' })),
        cadence_hours: Nullable(Type.Number({ description: 'the expected interval between loads, from the schedule (null: no job runs this dataset)' })),
        last_run: Nullable(LastRun),
      })),
      consultado_em: Timestamp,
    }),
    ...ErrorResponses,
  },
};

const ts = (d: Date | null) => (d ? isoSeconds(d) : null);

const hours = (ms: number) => Math.round(ms / 36e4) / 10;

export function metaRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  const { pool } = deps;
  return async (app) => {
    // Read once, like the rest of the config: the schedule file the scheduler runs.
    const cadences = cadencesOf(deps.cfg, app.log);
    app.get('/health', { schema: HealthSchema, config: { public: true } }, async () => {
      const t0 = performance.now();
      await dbPing(pool);
      const latency = Math.round((performance.now() - t0) * 10) / 10;
      const now = Date.now();
      const datasets = (await publishedSnapshots(pool)).map((s) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at),
        age_hours: s.published_at ? hours(now - s.published_at.getTime()) : null,
        as_of_age_days: Math.floor((now - Date.parse(`${s.as_of}T00:00:00Z`)) / 864e5),
      }));
      return { status: 'ok' as const, database: { reachable: true, latency_ms: latency }, datasets, consultado_em: isoSeconds() };
    });

    // Metadata about the data, not a data endpoint (contract §4): never billed.
    app.get('/sources', { schema: SourcesSchema, config: { unbilled: true } }, async () => {
      const [published, history, runs] = await Promise.all([publishedSnapshots(pool), readableHistory(pool), sourceRuns(pool)]);
      const sources = sourceStates(published, runs, cadences, Date.now()).map(({ snapshot: s, run, checkedAt, ageMs, cadenceMs, freshness }) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at), rows: s.rows,
        as_of_disponiveis: history.filter((h) => h.dataset === s.dataset && h.uf === s.uf).map((h) => h.as_of),
        freshness,
        checked_at: ts(checkedAt),
        age_hours: ageMs === null ? null : hours(ageMs),
        cadence_hours: cadenceMs === null ? null : hours(cadenceMs),
        last_run: run ? { status: run.last_status, started_at: isoSeconds(run.last_started_at), finished_at: ts(run.last_finished_at), error_code: run.last_error_code } : null,
      }));
      return { sources, consultado_em: isoSeconds() };
    });
  };
}
