// One key cannot hold more than about half of the API pool (security audit): an enrichment runs
// its statements at once, each up to the statement timeout, on the pool every key shares. The
// slow statement is forced: a second connection holds the lock of serving.funai_tis (ALTER VIEW
// in an open transaction), so an enrichment over `ti` waits on it. With the default pool (16)
// a key holds at most 8 connections: one enrichment (5) and lookups (1 each) go in, a second
// enrichment is a 429 rate_limited with Retry-After: 1 at once, another key is not refused; the
// units come back when the handler settles — after errors, and after a client abort only once
// the aborted request's statement has ended.
import pg from 'pg';
import { expect, test } from 'vitest';
import { call, eventually, expectEnvelope, fixtureApi, newKey, type Reply } from './helpers/api.ts';

const fx = fixtureApi();
const q = async <T = any>(sql: string, params: unknown[] = []) => (await fx.db.pool.query(sql, params)).rows as T[]; // eslint-disable-line @typescript-eslint/no-explicit-any

const within = <T>(p: Promise<T>, ms = 3_000): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms (waiting on the lock?)`)), ms))]);

/** Backends of this database waiting on a lock. */
const waiting = async () => (await q(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query NOT ILIKE '%pg_stat_activity%'`)).length;

async function withTisLocked(fn: () => Promise<void>): Promise<void> {
  const holder = new pg.Client({ connectionString: fx.db.url });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('ALTER VIEW serving.funai_tis RESET (security_barrier)');
    await fn();
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
}

test('a key over its share of the pool is refused (429, Retry-After: 1); other keys are not; every path gives the units back', async () => {
  expect(fx.db.cfg.api.poolSize).toBe(16);
  expect(fx.db.cfg.api.keyMaxInFlight).toBe(8);
  const [{ env }] = await q<{ env: string }>(`SELECT ST_AsGeoJSON(ST_Envelope(ST_Buffer(ST_PointOnSurface(geom), 0.001)), 7) AS env FROM serving.funai_tis WHERE codigo = '90101'`);
  const body = { geometry: JSON.parse(env), layers: ['ti'] };
  const enrich = (key: string, signal?: AbortSignal) =>
    fetch(`${fx.api.base}/v1/enriquecimento/territorial`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body), signal })
      .then(async (r): Promise<Reply> => {
        const text = await r.text();
        return { status: r.status, headers: r.headers, text, body: text ? JSON.parse(text) : null };
      });
  const refused = (r: Reply) => {
    expect(expectEnvelope(r, 429, 'rate_limited').message).toMatch(/^concurrency limit: /);
    expect(r.headers.get('retry-after')).toBe('1');
  };
  const a = await newKey(fx.db);
  const b = await newKey(fx.db);
  const bad = { geometry: { type: 'Polygon', coordinates: [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] } }; // self-intersecting: 422
  expect((await enrich(a)).status).toBe(200);

  // Failures give their units back: were they kept, the first enrichment below would be refused.
  for (let i = 0; i < 3; i++) expect((await call(fx.api.base, '/v1/enriquecimento/territorial', { key: a, body: bad })).status).toBe(422);

  let first: Promise<Reply> | null = null;
  let other: Promise<Reply> | null = null;
  await withTisLocked(async () => {
    first = enrich(a);
    await eventually(async () => expect(await waiting()).toBe(1), 10_000);
    refused(await within(enrich(a)));
    // Lookups fit in the rest of the key's share.
    for (let i = 0; i < 3; i++) expect((await within(call(fx.api.base, '/v1/car/history?limit=1', { key: a }))).status).toBe(200);
    other = enrich(b); // another key: not refused, it waits on the lock like the first
    await eventually(async () => expect(await waiting()).toBe(2), 10_000);
  });
  expect((await first!).status).toBe(200);
  expect((await other!).status).toBe(200);
  expect((await enrich(a)).status).toBe(200); // given back

  // A client that aborts: its statement still runs, so its units stay held until it ends.
  await withTisLocked(async () => {
    const abort = new AbortController();
    const gone = enrich(a, abort.signal).catch((e: Error) => e);
    await eventually(async () => expect(await waiting()).toBe(1), 10_000);
    abort.abort();
    expect(await gone).toBeInstanceOf(Error);
    await new Promise((r) => setTimeout(r, 200)); // the server sees the connection closed
    refused(await within(enrich(a)));
  });
  await eventually(async () => expect((await enrich(a)).status).toBe(200), 10_000);
}, 120_000);
