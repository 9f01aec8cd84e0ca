// The HTTP API reference (agro-data-service-v1), line by line, where no other test held the code
// to it: parameters the reference gives a default are optional in /v1/openapi.json, the response
// headers of its Limits and Errors sections are declared there and carried by real answers, and
// `include` as clients write it.
// A real PostGIS loaded with every fixture, the API on loopback.
import { describe, expect, test } from 'vitest';
import { createKey } from '../src/platform/keys.ts';
import { call, expectEnvelope, fixtureApi, startApi, type Reply } from './helpers/api.ts';

const fx = fixtureApi();
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const SQUARE = { type: 'Polygon', coordinates: [[[-49.34, -16.59], [-49.3, -16.59], [-49.3, -16.55], [-49.34, -16.55], [-49.34, -16.59]]] };

interface Param { in: string; name: string; required?: boolean; schema: { default?: unknown } }
interface Header { required?: boolean; schema: { type?: string } }
interface Operation {
  security?: unknown[];
  parameters?: Param[];
  requestBody?: { content: Record<string, { schema: { required?: string[]; properties: Record<string, { default?: unknown }> } }> };
  responses: Record<string, { headers?: Record<string, Header> }>;
  'x-billed'?: boolean;
}

const openapi = async () => (await call(fx.api.base, '/v1/openapi.json')).body as { paths: Record<string, Record<string, Operation>> };
const operations = (doc: Awaited<ReturnType<typeof openapi>>) =>
  Object.entries(doc.paths).flatMap(([path, ms]) => Object.entries(ms).map(([method, op]) => ({ path, method, op })));

/** A request of each documented operation that answers 200 on the fixtures. */
const SAMPLES: Record<string, { path: string; body?: unknown }> = {
  'get /v1/health': { path: '/v1/health' },
  'get /v1/sources': { path: '/v1/sources' },
  'get /v1/car/{numero}': { path: `/v1/car/${GO1}` },
  'get /v1/car/by-document/{documento}': { path: '/v1/car/by-document/52998224725' },
  'post /v1/car/by-geometry': { path: '/v1/car/by-geometry', body: { geometry: SQUARE } },
  'get /v1/car/history': { path: '/v1/car/history' },
  'get /v1/socio/cnpj/{cnpj}': { path: '/v1/socio/cnpj/12ABC34501DE35' },
  'get /v1/socio/cpf/{cpf}': { path: `/v1/socio/cpf/${encodeURIComponent('***.123.456-**')}` },
  'get /v1/socio/search': { path: '/v1/socio/search?q=agropecuaria' },
  'post /v1/enriquecimento/territorial': { path: '/v1/enriquecimento/territorial', body: { geometry: SQUARE } },
};

describe('parameters with a default ("limit: 1 to 100; default 25", "geometry: default false")', () => {
  test('are optional in the OpenAPI document, query and body alike; the others stay required', async () => {
    const doc = await openapi();
    let defaulted = 0;
    for (const { path, method, op } of operations(doc)) {
      for (const p of op.parameters ?? []) {
        if (p.schema.default === undefined) continue;
        defaulted++;
        expect(p.required ?? false, `${method} ${path} ${p.in} ${p.name}`).toBe(false);
      }
      for (const c of Object.values(op.requestBody?.content ?? {})) {
        for (const name of c.schema.required ?? []) expect(c.schema.properties[name].default, `${method} ${path} body ${name}`).toBeUndefined();
      }
    }
    expect(defaulted).toBeGreaterThanOrEqual(5); // geometry ×2, limit ×3, as the reference writes them
    const param = (p: string, name: string) => doc.paths[p].get.parameters!.find((x) => x.name === name)!;
    expect(param('/v1/car/by-document/{documento}', 'limit')).toMatchObject({ required: false, schema: { default: 25 } });
    expect(param('/v1/car/{numero}', 'geometry')).toMatchObject({ required: false, schema: { default: false } });
    expect(param('/v1/socio/search', 'q').required).toBe(true);
    expect(param('/v1/car/{numero}', 'numero').required).toBe(true);
    expect(doc.paths['/v1/car/by-geometry'].post.requestBody!.content['application/json'].schema.required).toEqual(['geometry']);
    // and the server indeed fills them in: no limit, no min_overlap, no geometry flag
    const key = (await createKey(fx.db.pool, { env: 'live', plan: 'enterprise', name: 'ref' })).key;
    const r = await call(fx.api.base, '/v1/car/by-geometry', { key, body: { geometry: SQUARE } });
    expect(r.status).toBe(200);
    expect(r.body.count).toBeGreaterThan(1);
  });
});

describe('response headers of the reference (Limits, Errors) and CONTRACT §4', () => {
  const LIMITS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'X-Quota-Used', 'X-Quota-Limit'];

  test('declared on every operation: X-Request-Id everywhere; the rate-limit and quota headers on authenticated ones; 401, 402 (billed operations), 429 and 503 with theirs', async () => {
    const doc = await openapi();
    const ops = operations(doc);
    expect(ops.map((o) => `${o.method} ${o.path}`).sort()).toEqual(Object.keys(SAMPLES).sort());
    for (const { path, method, op } of ops) {
      const at = `${method} ${path}`;
      for (const [status, r] of Object.entries(op.responses)) expect(r.headers?.['X-Request-Id']?.required, `${at} ${status}`).toBe(true);
      const isPublic = Array.isArray(op.security) && op.security.length === 0;
      if (isPublic) {
        expect(Object.keys(op.responses['200'].headers!), at).toEqual(['X-Request-Id']);
        expect(op.responses['401'], at).toBeUndefined();
        continue;
      }
      for (const h of LIMITS) expect(op.responses['200'].headers![h], `${at} ${h}`).toMatchObject({ required: true, schema: { type: 'integer' } });
      expect(op.responses['401'].headers!['WWW-Authenticate'], at).toBeDefined();
      expect(op.responses['429'].headers!['Retry-After'], at).toMatchObject({ required: true, schema: { type: 'integer' } });
      // declared, not required: a 429 for an address's failed authentications has no key (test/openapi-truth.test.ts)
      for (const h of LIMITS) expect(op.responses['429'].headers![h]?.required, `${at} 429 ${h}`).toBe(false);
      expect(op.responses['503'].headers!['Retry-After'], at).toMatchObject({ required: true });
      const billed = !['/v1/car/history', '/v1/sources'].includes(path);
      expect(op['x-billed'], at).toBe(billed);
      expect(op.responses['402'] !== undefined, `${at} 402`).toBe(billed);
      expect(op.responses['200'].headers!['Idempotent-Replayed'] !== undefined, `${at} Idempotent-Replayed`).toBe(method === 'post');
    }
  });

  test('every answer carries the headers declared required for it: a 200 of each operation, a 401, a 429', async () => {
    const doc = await openapi();
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'ref' });
    const present = (r: Reply, declared: Record<string, Header>, at: string) => {
      for (const [name, h] of Object.entries(declared)) {
        if (!h.required) continue;
        const v = r.headers.get(name);
        expect(v, `${at}: ${name}`).not.toBeNull();
        if (h.schema.type === 'integer') expect(v, `${at}: ${name}`).toMatch(/^\d+$/);
      }
    };
    for (const { path, method, op } of operations(doc)) {
      const s = SAMPLES[`${method} ${path}`];
      const r = await call(fx.api.base, s.path, { key: k.key, body: s.body });
      expect(r.status, `${method} ${path}: ${r.text.slice(0, 200)}`).toBe(200);
      present(r, op.responses['200'].headers!, `${method} ${path}`);
    }
    const byNumber = doc.paths['/v1/car/{numero}'].get.responses;
    const unauthorized = await call(fx.api.base, `/v1/car/${GO1}`);
    expectEnvelope(unauthorized, 401, 'unauthorized');
    present(unauthorized, byNumber['401'].headers!, '401');
    // the starter plan allows 30 a minute: the sources (never billed) until refused
    let limited: Reply | null = null;
    for (let i = 0; i < 40 && !limited; i++) {
      const r = await call(fx.api.base, '/v1/sources', { key: k.key });
      if (r.status === 429) limited = r;
    }
    expectEnvelope(limited!, 429, 'rate_limited');
    present(limited!, byNumber['429'].headers!, '429');
    // a key's own 429 carries its limits (the document requires them only where a key is known)
    for (const h of LIMITS) expect(limited!.headers.get(h), `429 ${h}`).toMatch(/^\d+$/);
  });
});

describe('include: "comma-separated extra layers"', () => {
  test('an empty element (a trailing comma) is no layer, as include= is; a repeated parameter is the same list; an unknown name still 400', async () => {
    const key = (await createKey(fx.db.pool, { env: 'live', plan: 'enterprise', name: 'ref' })).key;
    const get = (q: string) => call(fx.api.base, `/v1/car/${GO1}?${q}`, { key });
    const listed = await get('include=ucs,tis');
    expect(listed.status).toBe(200);
    const layers = (b: Record<string, unknown>) => ['embargos', 'ucs', 'tis', 'quilombos', 'zarc'].filter((l) => l in b);
    expect(layers(listed.body)).toEqual(['ucs', 'tis']);
    for (const q of ['include=ucs,tis,', 'include=ucs,,tis', 'include=ucs&include=tis', 'include=ucs,tis&include=']) {
      const r = await get(q);
      expect(r.status, `${q}: ${r.text.slice(0, 200)}`).toBe(200);
      expect(layers(r.body), q).toEqual(['ucs', 'tis']);
    }
    expect(layers((await get('include=')).body)).toEqual([]);
    const doc = await call(fx.api.base, '/v1/car/by-document/52998224725?include=tis&include=zarc', { key });
    expect(doc.status, doc.text.slice(0, 200)).toBe(200);
    expect(layers(doc.body.results[0])).toEqual(['tis', 'zarc']);
    for (const q of ['include=ucs&include=nope', 'include=UCS']) expect(expectEnvelope(await get(q), 400, 'invalid_request').message, q).toMatch(/^include: unknown layer/);
  });
});

describe('Errors: "500 internal_error: internal error; report with request_id"; "4xx or 5xx do not consume plan quota"', () => {
  test('a failure the server did not expect (a database function missing after a bad deploy): 500 internal_error, no detail leaked, not billed, in the history', async () => {
    // a server of its own: fresh connections, no statement prepared before the function goes
    const api = await startApi(fx.db.cfg, fx.db.url, fx.db);
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'ref' });
    await fx.db.pool.query('ALTER FUNCTION serving.socio_busca_snapshot RENAME TO socio_busca_snapshot_gone');
    try {
      const r = await call(api.base, '/v1/socio/search?q=agropecuaria', { key: k.key });
      const e = expectEnvelope(r, 500, 'internal_error');
      expect(e.message).toMatch(/request_id/);
      expect(e.message).not.toMatch(/socio_busca|function|serving|does not exist/i);
      expect(r.headers.get('x-quota-used')).toBe('0');
      await api.app.flushHistory();
      const rows = (await fx.db.pool.query(`SELECT id, status, billable FROM platform.requests WHERE key_id = $1`, [k.id])).rows;
      expect(rows).toEqual([{ id: e.request_id, status: 500, billable: false }]);
    } finally {
      await fx.db.pool.query('ALTER FUNCTION serving.socio_busca_snapshot_gone RENAME TO socio_busca_snapshot');
      await api.close();
    }
    const used = await fx.db.pool.query(`SELECT coalesce(sum(used), 0)::int AS n FROM platform.usage_months WHERE key_id = $1`, [k.id]);
    expect(used.rows[0].n).toBe(0);
  });
});
