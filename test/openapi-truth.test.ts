// Every answer against the document the API publishes (/v1/openapi.json): the body and the
// declared headers of each status of each route, success and failures, records whose optional
// fields are null included. fast-json-stringify does not validate (a null under `number` goes
// out as 0, an undeclared field is dropped, a missing required one left out), so the object each
// handler returned is checked too, before serialization: its nulls must stay nulls, and it must
// hold no field the document does not declare. Then a few fields against the database rows.
import type { AddressInfo } from 'node:net';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import formats from 'ajv-formats';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { buildServer, createApiPool, type ApiServer } from '../src/api/server.ts';
import { createKey, revokeKey } from '../src/platform/keys.ts';
import { call, loadFixtures, newKey, type Reply } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB';
const JOSE_CPF = '52998224725';
const INFERRED_CPF = '31847620507';
const ALNUM_CNPJ = '12ABC34501DE35';
const SQUARE = (x0: number, y0: number, x1: number, y1: number) => ({ type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] });

type Schema = Record<string, unknown>;
interface Doc { paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, { required?: boolean; schema: Schema }>; content?: Record<string, { schema: Schema }> }> }>> }

let db: TestDb;
let app: ApiServer;
let base: string;
let closePool: () => Promise<void>;
let key: string;
let sandboxKey: string;
let doc: Doc;
/** What each handler returned, by request id (a preSerialization hook: before fast-json-stringify). */
const returned = new Map<string, unknown>();

beforeAll(async () => {
  db = await testDatabase();
  await loadFixtures(db);
  key = await newKey(db);
  sandboxKey = await newKey(db, 'test');
  const pool = createApiPool(db.cfg, db.url);
  app = await buildServer({ cfg: db.cfg, pool, log: db.log });
  app.addHook('preSerialization', async (req, _reply, payload) => {
    returned.set(req.id, JSON.parse(JSON.stringify(payload)));
    return payload;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  closePool = () => pool.end();
  doc = (await call(base, '/v1/openapi.json')).body;
}, 300_000);

afterAll(async () => {
  await app?.close();
  await closePool?.();
  await db?.drop();
});

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
// A CommonJS module whose module.exports is the plugin: the default import is the function at run time.
(formats as unknown as (a: Ajv2020) => void)(ajv);

/** A copy of a schema in which every object without its own additionalProperties admits no other member. */
function closed(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(closed);
  if (!s || typeof s !== 'object') return s;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as object).map(([p, ps]) => [p, closed(ps)])) : closed(v);
  if (out.type === 'object' && out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

const errorsOf = (schema: unknown, value: unknown): string[] => {
  const validate = ajv.compile(schema as Schema);
  return validate(value) ? [] : (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath || '/'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` (${e.params.additionalProperty})` : ''}`);
};

/** The document's answer for a status: its own, else 4XX/5XX, else default. */
function declared(route: string, method: string, status: number) {
  const op = doc.paths[route]?.[method];
  if (!op) return null;
  return op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default ?? null;
}

const findings: string[] = [];
let checked = 0;

/** Checks one answer against the document (body, headers, the handler's own object); returns the reply. */
async function check(route: string, path: string, o: { method?: string; key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string>; status: number }): Promise<Reply> {
  const method = (o.method ?? (o.body !== undefined || o.raw !== undefined ? 'post' : 'get')).toLowerCase();
  const r = await call(base, path, { method: method.toUpperCase(), key: o.key === null ? undefined : (o.key ?? key), body: o.body, raw: o.raw, headers: o.headers });
  const where = `${method.toUpperCase()} ${route} ${r.status} (${path.slice(0, 80)})`;
  if (r.status !== o.status) {
    findings.push(`${where}: expected status ${o.status}, got ${r.text.slice(0, 200)}`);
    return r;
  }
  checked++;
  const d = declared(route, method, r.status);
  if (!d) {
    findings.push(`${where}: status not declared`);
    return r;
  }
  const schema = d.content?.['application/json']?.schema;
  if (!schema) findings.push(`${where}: no body schema declared`);
  else {
    for (const e of errorsOf(schema, r.body)) findings.push(`${where}: body ${e}`);
    const raw = returned.get(r.headers.get('x-request-id') ?? '');
    // The handler's object, before the serializer: the same schema, and no member the document does not name.
    if (raw !== undefined) for (const e of errorsOf(closed(schema), raw)) findings.push(`${where}: handler returned ${e}`);
  }
  for (const [name, h] of Object.entries(d.headers ?? {})) {
    const v = r.headers.get(name);
    if (v === null) {
      if (h.required) findings.push(`${where}: header ${name} missing`);
      continue;
    }
    const value = h.schema.type === 'integer' && /^-?\d+$/.test(v) ? Number(v) : v;
    for (const e of errorsOf(h.schema, value)) findings.push(`${where}: header ${name}=${v} ${e}`);
  }
  return r;
}

async function q<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db.pool.query(sql, params)).rows as T[];
}

test('every route, every status it answers, against /v1/openapi.json', async () => {
  const routes = Object.keys(doc.paths).sort();
  expect(routes.length).toBeGreaterThanOrEqual(10);
  const seen = new Set<string>();
  const c = async (route: string, path: string, o: Parameters<typeof check>[2]) => {
    seen.add(route);
    return check(route, path, o);
  };

  // meta
  await c('/v1/health', '/v1/health', { key: null, status: 200 });
  await c('/v1/sources', '/v1/sources', { status: 200 });
  await c('/v1/sources', '/v1/sources', { key: null, status: 401 });
  await c('/v1/sources', '/v1/sources', { key: sandboxKey, status: 503 }); // the sandbox database is not there

  // GET /v1/car/{numero}: a record with every layer, one with the polygon, a historical read, and
  // records whose optional fields are null (no themes, no overlaps)
  const all = 'embargos,ucs,tis,quilombos,zarc,embargos_icmbio';
  for (const car of [GO1, MT1]) {
    await c('/v1/car/{numero}', `/v1/car/${car}?include=${all}`, { status: 200 });
    await c('/v1/car/{numero}', `/v1/car/${car}?geometry=true`, { status: 200 });
    await c('/v1/car/{numero}', `/v1/car/${car}?as_of=2030-01-01&include=${all}`, { status: 200 });
  }
  const bare = await q<{ car: string }>(
    `SELECT car FROM serving.car_imovel
      WHERE area_consolidada_ha IS NULL OR reserva_legal_ha IS NULL OR app_ha IS NULL OR area_total_ha IS NULL OR data_inscricao IS NULL OR situacao IS NULL OR municipio IS NULL
      ORDER BY car LIMIT 8`,
  );
  expect(bare.length).toBeGreaterThan(0);
  for (const { car } of bare) await c('/v1/car/{numero}', `/v1/car/${car}?include=${all}`, { status: 200 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}`, { key: null, status: 401 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}`, { key: 'ck_live_nope', status: 401 });
  await c('/v1/car/{numero}', `/v1/car/XX-5208707-${'A'.repeat(32)}`, { status: 400 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}?as_of=2025-13-45`, { status: 400 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}?include=florestas`, { status: 400 });
  await c('/v1/car/{numero}', `/v1/car/GO-5208707-${'0'.repeat(32)}`, { status: 404 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}?as_of=2020-01-01`, { status: 404 });
  await c('/v1/car/{numero}', `/v1/car/BA-2903201-${'0'.repeat(32)}`, { status: 503 });
  await c('/v1/car/{numero}', `/v1/car/${GO1}`, { key: sandboxKey, status: 503 });

  // by-document: declared and inferred links, a CNPJ, masked CPFs
  for (const d of [JOSE_CPF, INFERRED_CPF, ALNUM_CNPJ]) {
    await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${d}?include=${all}`, { status: 200 });
    await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${d}?geometry=true&limit=1`, { status: 200 });
    await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${d}?as_of=2030-01-01`, { status: 200 });
  }
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}?uf=MT`, { status: 200 });
  await c('/v1/car/by-document/{documento}', '/v1/car/by-document/11144477735', { status: 200 }); // nobody's
  await c('/v1/car/by-document/{documento}', '/v1/car/by-document/123', { status: 400 });
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}?limit=0`, { status: 400 });
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}`, { headers: { 'x-lgpd-base-legal': 'nenhuma' }, status: 400 });
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}?as_of=2020-01-01`, { status: 404 });
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}`, { key: sandboxKey, status: 503 });
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}`, { key: null, status: 401 });

  // by-geometry and enrichment: hits, none, invalid
  const g = SQUARE(-49.34, -16.59, -49.30, -16.55);
  const far = SQUARE(-40, -10, -39.9, -9.9);
  for (const geometry of [g, far]) {
    await c('/v1/car/by-geometry', '/v1/car/by-geometry', { body: { geometry }, status: 200 });
    await c('/v1/enriquecimento/territorial', '/v1/enriquecimento/territorial', { body: { geometry }, status: 200 });
  }
  const mt = await q<{ g: string }>(`SELECT ST_AsGeoJSON(ST_Envelope(geom), 6) AS g FROM serving.car_imovel WHERE car = $1`, [MT1]);
  if (mt[0]) {
    await c('/v1/car/by-geometry', '/v1/car/by-geometry', { body: { geometry: JSON.parse(mt[0].g) }, status: 200 });
    await c('/v1/enriquecimento/territorial', '/v1/enriquecimento/territorial', { body: { geometry: JSON.parse(mt[0].g) }, status: 200 });
  }
  const bowtie = { type: 'Polygon', coordinates: [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] };
  for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) {
    await c(route, route, { body: { geometry: bowtie }, status: 422 });
    await c(route, route, { body: { geometry: g, extra: 1 }, status: 400 });
    await c(route, route, { body: [], status: 400 });
    await c(route, route, { body: { geometry: g }, key: null, status: 401 });
    await c(route, route, { body: { geometry: g }, key: sandboxKey, status: 503 });
  }

  // socio: a company, one without partners, a partner CPF, a search; failures
  await c('/v1/socio/cnpj/{cnpj}', `/v1/socio/cnpj/${ALNUM_CNPJ}`, { status: 200 });
  const companies = await q<{ cnpj: string }>(
    `SELECT s.cnpj FROM serving.cnpj_estabelecimentos s LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = s.cnpj_basico
      ORDER BY (EXISTS (SELECT 1 FROM serving.cnpj_socios p WHERE p.cnpj_basico = s.cnpj_basico)), e.capital_social IS NULL DESC, s.cnpj LIMIT 12`,
  );
  for (const { cnpj } of companies) await c('/v1/socio/cnpj/{cnpj}', `/v1/socio/cnpj/${cnpj}`, { status: 200 });
  await c('/v1/socio/cnpj/{cnpj}', '/v1/socio/cnpj/45.723.174%2F0001-11', { status: 400 });
  await c('/v1/socio/cnpj/{cnpj}', '/v1/socio/cnpj/11.222.333%2F0001-81', { status: 404 });
  await c('/v1/socio/cnpj/{cnpj}', `/v1/socio/cnpj/${ALNUM_CNPJ}?as_of=2020-01-01`, { status: 404 });
  await c('/v1/socio/cnpj/{cnpj}', `/v1/socio/cnpj/${ALNUM_CNPJ}`, { key: sandboxKey, status: 503 });
  const partners = await q<{ d: string }>(`SELECT DISTINCT cnpj_cpf_do_socio AS d FROM serving.cnpj_socios WHERE identificador_de_socio = '2' AND cnpj_cpf_do_socio ~ '^\\*{3}[0-9]{6}\\*{2}$' ORDER BY 1 LIMIT 6`);
  for (const { d } of partners) await c('/v1/socio/cpf/{cpf}', `/v1/socio/cpf/${encodeURIComponent(d)}`, { status: 200 });
  await c('/v1/socio/cpf/{cpf}', `/v1/socio/cpf/${encodeURIComponent('***424242**')}`, { status: 200 });
  await c('/v1/socio/cpf/{cpf}', '/v1/socio/cpf/123', { status: 400 });
  await c('/v1/socio/cpf/{cpf}', `/v1/socio/cpf/${JOSE_CPF}?as_of=2020-01-01`, { status: 404 });
  await c('/v1/socio/cpf/{cpf}', `/v1/socio/cpf/${JOSE_CPF}`, { key: sandboxKey, status: 503 });
  for (const term of ['agropecuaria', 'ltda', 'nothing like it at all']) await c('/v1/socio/search', `/v1/socio/search?q=${encodeURIComponent(term)}&limit=50`, { status: 200 });
  await c('/v1/socio/search', '/v1/socio/search?q=ab', { status: 400 });
  await c('/v1/socio/search', '/v1/socio/search?q=agro', { key: sandboxKey, status: 503 });
  await c('/v1/socio/search', '/v1/socio/search?q=agro', { key: null, status: 401 });

  // Idempotency-Key: the stored answer replayed, another body under the same key
  const idem = { 'idempotency-key': 'openapi-truth-1' };
  for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) {
    await c(route, route, { body: { geometry: g }, headers: idem, status: 200 });
    const replay = await c(route, route, { body: { geometry: g }, headers: idem, status: 200 });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    await c(route, route, { body: { geometry: far }, headers: idem, status: 422 });
    await c(route, route, { raw: 'x'.repeat(100), headers: { 'content-type': 'text/plain' }, status: 400 });
    await c(route, route, { raw: '<x/>', headers: { 'content-type': 'application/xml' }, status: 415 });
    await c(route, route, { raw: '{"geometry":', headers: { 'content-type': 'application/json' }, status: 400 });
  }

  // history (after the calls above: its rows have paths, statuses, legal bases)
  await c('/v1/car/by-document/{documento}', `/v1/car/by-document/${JOSE_CPF}`, { headers: { 'x-lgpd-base-legal': 'protecao_credito' }, status: 200 });
  await c('/v1/car/history', '/v1/car/history?limit=100', { status: 200 });
  await c('/v1/car/history', '/v1/car/history?limit=2', { status: 200 });
  await c('/v1/car/history', '/v1/car/history?from=2026-02-30', { status: 400 });
  await c('/v1/car/history', '/v1/car/history?cursor=nonsense', { status: 400 });

  // 429: a starter key (30 a minute) over its minute
  const starter = (await createKey(db.pool, { env: 'live', plan: 'starter', name: 'starter' })).key;
  let limited: Reply | null = null;
  for (let i = 0; i < 40 && !limited; i++) {
    const r = await call(base, '/v1/car/history', { key: starter });
    if (r.status === 429) limited = r;
  }
  expect(limited).not.toBeNull();
  await c('/v1/car/history', '/v1/car/history', { key: starter, status: 429 });
  await c('/v1/sources', '/v1/sources', { key: starter, status: 429 });

  expect(routes.filter((r) => !seen.has(r))).toEqual([]);
  console.log(`${checked} answers checked`);
  expect(findings).toEqual([]);
}, 120_000);

test('the checker itself: a null turned 0, a missing member, an undeclared member and a missing header are each reported', async () => {
  const before = findings.length;
  const r = await call(base, `/v1/car/${GO1}`, { key });
  const schema = declared('/v1/car/{numero}', 'get', 200)!.content!['application/json'].schema;
  expect(errorsOf(schema, r.body)).toEqual([]);
  expect(errorsOf(schema, { ...r.body, snapshot_id: null })).not.toEqual([]);
  const { consultado_em: _c, ...missing } = r.body;
  expect(errorsOf(schema, missing)).not.toEqual([]);
  expect(errorsOf(schema, { ...r.body, surprise: 1 })).toEqual([]);
  expect(errorsOf(closed(schema), { ...r.body, surprise: 1 })).toEqual(['/ must NOT have additional properties (surprise)']);
  expect(findings.length).toBe(before);
});

test('a null in the database is a null in the answer, never 0 or "" (the fields the serializer could coerce)', async () => {
  const cars = await q<Record<string, unknown>>(
    `SELECT car, area_total_ha, area_calculada_ha, area_consolidada_ha, reserva_legal_ha, app_ha, situacao, tipo, cod_municipio_ibge, municipio,
            to_char(data_inscricao, 'YYYY-MM-DD') AS data_inscricao
       FROM serving.car_imovel
      WHERE area_consolidada_ha IS NULL OR reserva_legal_ha IS NULL OR app_ha IS NULL OR area_total_ha IS NULL OR data_inscricao IS NULL OR situacao IS NULL OR municipio IS NULL
      ORDER BY car LIMIT 20`,
  );
  expect(cars.length).toBeGreaterThan(0);
  for (const row of cars) {
    const body = (await call(base, `/v1/car/${row.car}`, { key })).body;
    for (const f of ['area_total_ha', 'area_calculada_ha', 'area_consolidada_ha', 'reserva_legal_ha', 'app_ha', 'situacao', 'tipo', 'cod_municipio_ibge', 'data_inscricao']) {
      if (row[f] === null) expect(body[f], `${row.car} ${f}`).toBeNull();
      else expect(body[f], `${row.car} ${f}`).not.toBeNull();
    }
    if (row.municipio === null) expect(body.municipio).toBeNull();
  }
  const companies = await q<Record<string, unknown>>(
    `SELECT s.cnpj, e.capital_social, e.razao_social, s.nome_fantasia, s.situacao_cadastral, s.data_inicio_atividade, e.natureza_juridica, s.cnae_fiscal_principal, s.uf, s.cep
       FROM serving.cnpj_estabelecimentos s LEFT JOIN serving.cnpj_empresas e ON e.cnpj_basico = s.cnpj_basico ORDER BY s.cnpj LIMIT 40`,
  );
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const fields: Record<string, (b: Record<string, any>) => unknown> = {
    capital_social: (b) => b.capital_social, razao_social: (b) => b.razao_social, nome_fantasia: (b) => b.nome_fantasia,
    situacao_cadastral: (b) => b.situacao, data_inicio_atividade: (b) => b.data_abertura, natureza_juridica: (b) => b.natureza_juridica,
    cnae_fiscal_principal: (b) => b.cnae_principal, uf: (b) => b.endereco.uf, cep: (b) => b.endereco.cep,
  };
  for (const row of companies) {
    const body = (await call(base, `/v1/socio/cnpj/${row.cnpj}`, { key })).body;
    for (const [f, get] of Object.entries(fields)) {
      if (row[f] === null) expect(get(body), `${row.cnpj} ${f}`).toBeNull();
      else expect(get(body), `${row.cnpj} ${f}`).not.toBeNull();
    }
  }
}, 60_000);

// Last: it leaves this address over its limit of failed authentications.
test('429 for failed authentications from an address: no key, so no rate-limit headers, and the document says so', async () => {
  const before = findings.length;
  // A well-formed key that is no longer valid (a malformed one is refused before the limiter).
  const gone = await createKey(db.pool, { env: 'live', plan: 'growth', name: 'gone' });
  await revokeKey(db.pool, gone!.id);
  let limited = false;
  for (let i = 0; i < 40 && !limited; i++) limited = (await call(base, '/v1/sources', { key: gone!.key })).status === 429;
  expect(limited).toBe(true);
  await check('/v1/sources', '/v1/sources', { key: gone!.key, status: 429 });
  await check('/v1/car/{numero}', `/v1/car/${GO1}`, { key: gone!.key, status: 429 });
  expect(findings.slice(before)).toEqual([]);
});
