// GET /v1/health (no key), GET /v1/sources, GET /v1/openapi.json (no key).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { brazilDaysSince } from '../../dates.ts';
import type { ApiDeps } from '../deps.ts';
import { DateString, ErrorResponses, isoSeconds, Nullable, Timestamp } from '../schemas.ts';
import { cadencesOf, FRESHNESS_RULE, sourceStates } from './freshness.ts';
import { dbPing, publishedSnapshots, readableHistory, replayState, sourceRuns, walBytesPast, type PublishedSnapshot } from './sql.ts';

const Published = Type.Object({
  dataset: Type.String(), uf: Nullable(Type.String()), snapshot_id: Type.Integer(), as_of: DateString,
  published_at: Nullable(Timestamp), rows: Nullable(Type.Integer()),
});

const SnapshotRef = Type.Object({ dataset: Type.String(), uf: Nullable(Type.String()), snapshot_id: Type.Integer() });

const Replica = Type.Object({
  reachable: Type.Boolean(),
  in_recovery: Type.Boolean({ description: 'false: DATABASE_READ_URL is not a standby (lag unknown)' }),
  lag_bytes: Nullable(Type.Number({ description: 'WAL the primary has written that the replica has not replayed' })),
  lag_seconds: Type.Number({ description: 'how long the oldest publish not yet visible on the replica has been current on the primary; 0 when every publish is visible' }),
  pending_publishes: Type.Array(SnapshotRef, { description: 'published on the primary, not yet visible on the replica (datasets shows what is served)' }),
}, { description: 'present when the data is read from a streaming replica (DATABASE_READ_URL)' });

const HealthSchema = {
  summary: 'Service health: database reachable, each published snapshot and its age, the read replica\'s lag',
  tags: ['meta'],
  security: [],
  response: {
    200: Type.Object({
      status: Type.Literal('ok'),
      database: Type.Object({ reachable: Type.Boolean(), latency_ms: Type.Number() }),
      replica: Type.Optional(Replica),
      datasets: Type.Array(Type.Object({
        dataset: Type.String(), uf: Nullable(Type.String()), snapshot_id: Type.Integer(), as_of: DateString,
        published_at: Nullable(Timestamp), age_hours: Nullable(Type.Number({ description: 'hours since publication' })),
        as_of_age_days: Type.Integer({ description: 'days since the source as-of date (Brazilian calendar days)' }),
      })),
      consultado_em: Timestamp,
    }),
    ...ErrorResponses,
  },
};

const LastRun = Type.Object({
  run_id: Type.Integer({ description: 'as `agro runs` lists it; `agro report <run_id>` shows its report' }),
  status: Type.String({ description: 'running, dead (its process died; the next run of any pipeline cleans up after it), published, unchanged, blocked, failed or killed' }),
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

/**
 * The replica's position against the primary, and the publishes it has not replayed yet.
 * lag_seconds is what clients wait for: how long the oldest of those publishes has been
 * current on the primary (0: every publish is visible). The age of the replica's newest
 * replayed commit would call a replica one commit behind after a quiet night hours late.
 */
async function replicaHealth(deps: ApiDeps, served: PublishedSnapshot[]) {
  const [state, primary] = await Promise.all([replayState(deps.readPool), publishedSnapshots(deps.pool)]);
  const lagBytes = state.in_recovery && state.replay_lsn ? Math.max(0, await walBytesPast(deps.pool, state.replay_lsn)) : null;
  const key = (s: { dataset: string; uf: string | null }) => `${s.dataset}|${s.uf ?? ''}`;
  const visible = new Map(served.map((s) => [key(s), s.snapshot_id]));
  const pending = primary.filter((s) => visible.get(key(s)) !== s.snapshot_id);
  const now = Date.now();
  const waited = pending.map((s) => (s.published_at ? Math.max(0, now - s.published_at.getTime()) : 0));
  const lagSeconds = waited.length ? Math.round(Math.max(...waited) / 100) / 10 : 0;
  return {
    reachable: true, in_recovery: state.in_recovery, lag_bytes: lagBytes, lag_seconds: lagSeconds,
    pending_publishes: pending.map((s) => ({ dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id })),
  };
}

/** How long one /v1/health answer serves every request. */
export const HEALTH_REUSE_MS = 1000;

export function metaRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  // the data's metadata comes from where the data is read (a replica, if any)
  const pool = deps.readPool;
  return async (app) => {
    // Read once, like the rest of the config: the schedule file the scheduler runs.
    const cadences = cadencesOf(deps.cfg, app.log);
    // Public (no key, so no per-key limit): one answer computed at most once a second and
    // shared by every request meanwhile, so a flood of health checks costs the database nothing
    // more than one check a second.
    let last: { at: number; answer: ReturnType<typeof health> } | null = null;
    app.get('/health', { schema: HealthSchema, config: { public: true } }, async () => {
      const now = performance.now();
      if (!last || now - last.at >= HEALTH_REUSE_MS) last = { at: now, answer: health() };
      return last.answer;
    });
    async function health() {
      const t0 = performance.now();
      await dbPing(deps.pool);
      const latency = Math.round((performance.now() - t0) * 10) / 10;
      const now = Date.now();
      const served = await publishedSnapshots(pool);
      const replica = deps.replica ? await replicaHealth(deps, served) : undefined;
      const datasets = served.map((s) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at),
        age_hours: s.published_at ? hours(now - s.published_at.getTime()) : null,
        as_of_age_days: brazilDaysSince(s.as_of, new Date(now)),
      }));
      return { status: 'ok' as const, database: { reachable: true, latency_ms: latency }, ...(replica ? { replica } : {}), datasets, consultado_em: isoSeconds() };
    }

    // Metadata about the data, not a data endpoint (contract §4): never billed.
    app.get('/sources', { schema: SourcesSchema, config: { unbilled: true } }, async (req) => {
      // What the key reads: a test key's data is the sandbox's, and so are its snapshots.
      const db = deps.dataPool(req);
      const [published, history, runs] = await Promise.all([publishedSnapshots(db), readableHistory(db), sourceRuns(db)]);
      const sources = sourceStates(published, runs, cadences, Date.now()).map(({ snapshot: s, run, checkedAt, ageMs, cadenceMs, freshness }) => ({
        dataset: s.dataset, uf: s.uf, snapshot_id: s.snapshot_id, as_of: s.as_of, published_at: ts(s.published_at), rows: s.rows,
        as_of_disponiveis: history.filter((h) => h.dataset === s.dataset && h.uf === s.uf).map((h) => h.as_of),
        freshness,
        checked_at: ts(checkedAt),
        age_hours: ageMs === null ? null : hours(ageMs),
        cadence_hours: cadenceMs === null ? null : hours(cadenceMs),
        last_run: run ? { run_id: run.last_run_id, status: run.last_status, started_at: isoSeconds(run.last_started_at), finished_at: ts(run.last_finished_at), error_code: run.last_error_code } : null,
      }));
      return { sources, consultado_em: isoSeconds() };
    });
  };
}
