// GET /v1/health (no key), GET /v1/sources, GET /v1/openapi.json (no key).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ApiDeps } from '../deps.ts';
import { DateString, ErrorResponses, isoSeconds, Nullable, Timestamp } from '../schemas.ts';
import { dbPing, publishedSnapshots, readableHistory } from './sql.ts';

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

const SourcesSchema = {
  summary: 'Each dataset and state: the published snapshot, and the as-of dates kept for as_of reads',
  tags: ['meta'],
  response: {
    200: Type.Object({
      sources: Type.Array(Type.Object({ ...Published.properties, as_of_disponiveis: Type.Array(DateString) })),
      consultado_em: Timestamp,
    }),
    ...ErrorResponses,
  },
};

const ts = (d: Date | null) => (d ? isoSeconds(d) : null);

export function metaRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  const { pool } = deps;
  return async (app) => {
    app.get('/health', { schema: HealthSchema, config: { public: true } }, async () => {
      const t0 = performance.now();
      await dbPing(pool);
      const latency = Math.round((performance.now() - t0) * 10) / 10;
      const now = Date.now();
      const datasets = (await publishedSnapshots(pool)).map((s) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at),
        age_hours: s.published_at ? Math.round((now - s.published_at.getTime()) / 36e4) / 10 : null,
        as_of_age_days: Math.floor((now - Date.parse(`${s.as_of}T00:00:00Z`)) / 864e5),
      }));
      return { status: 'ok' as const, database: { reachable: true, latency_ms: latency }, datasets, consultado_em: isoSeconds() };
    });

    app.get('/sources', { schema: SourcesSchema }, async () => {
      const [published, history] = await Promise.all([publishedSnapshots(pool), readableHistory(pool)]);
      const sources = published.map((s) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at), rows: s.rows,
        as_of_disponiveis: history.filter((h) => h.dataset === s.dataset && h.uf === s.uf).map((h) => h.as_of),
      }));
      return { sources, consultado_em: isoSeconds() };
    });
  };
}
