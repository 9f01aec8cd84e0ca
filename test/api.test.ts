// The v1 API on a real PostGIS loaded with every fixture through the pipelines: every field
// of every route against the reference and the contract (expectations computed directly from
// the serving views), every error code, as_of, cursors across a publish, masking, OpenAPI.
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { area as turfArea } from '@turf/turf';
import { validate as validateOpenApi } from '@readme/openapi-parser';
import pg from 'pg';
import { findPipeline } from '../pipelines/registry.ts';
import { brazilDay, brazilDaysSince, todayInBrazil } from '../src/dates.ts';
import { runPipeline } from '../src/etl/run.ts';
import { revokeKey, createKey } from '../src/platform/keys.ts';
import { HEALTH_REUSE_MS } from '../src/api/meta/routes.ts';
import { buildServer, createApiPool } from '../src/api/server.ts';
import { call, expectEnvelope, loadFixtures, newKey, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const FIXTURES = path.resolve(__dirname, '../fixtures');
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const GO3 = 'GO-5218805-AAF1C29A7B405DE2CFFBC6375A497711'; // multipart
const GO8 = 'GO-5218805-14B20428DC33C2A3B8653C586EA3527C';
const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB'; // TI 90101, point embargo
const JOSE_CPF = '529.982.247-25'; // declared owner of GO1 and GO8
const INFERRED_CPF = '31847620507'; // named by the point embargo inside MT1
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

let db: TestDb;
let api: Running;
let key: string;
let work: string;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'api-test-'));
  await loadFixtures(db);
  key = await newKey(db);
  api = await startApi(db.cfg, db.url, db);
}, 300_000);

afterAll(async () => {
  await api?.close();
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

const get = (p: string, headers: Record<string, string> = {}) => call(api.base, p, { key, headers });
const post = (p: string, body: unknown) => call(api.base, p, { key, body });

async function q<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db.pool.query(sql, params)).rows as T[];
}

/** Retries an assertion for up to a second (asynchronous notifications). */
async function eventually(fn: () => Promise<unknown>, ms = 1_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      await fn();
      return;
    } catch (e) {
      if (Date.now() > until) throw e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** Signed area of a ring (lon/lat): > 0 counter-clockwise. */
const signedArea = (ring: number[][]) => ring.slice(1).reduce((s, p, i) => s + (ring[i][0] * p[1] - p[0] * ring[i][1]), 0) / 2;
const sevenDecimals = (x: number) => Math.abs(Math.round(x * 1e7) / 1e7 - x) < 1e-12;

describe('meta routes', () => {
  test('health needs no key: database reachable, every published snapshot with its age', async () => {
    const r = await call(api.base, '/v1/health');
    expect(r.status).toBe(200);
    expect(r.headers.get('x-request-id')).toMatch(/^req_[0-9a-f]{24}$/);
    expect(r.body.status).toBe('ok');
    expect(r.body.database.reachable).toBe(true);
    const want = await q<{ dataset: string; uf: string | null; snapshot_id: number }>(`SELECT dataset, uf, snapshot_id FROM serving.snapshots WHERE status = 'current' ORDER BY dataset, uf NULLS FIRST`);
    expect(r.body.datasets.map((d: { dataset: string; uf: string | null; snapshot_id: number }) => [d.dataset, d.uf, d.snapshot_id])).toEqual(want.map((w) => [w.dataset, w.uf, Number(w.snapshot_id)]));
    for (const d of r.body.datasets) {
      expect(d.published_at).toMatch(TIMESTAMP);
      expect(d.age_hours).toBeGreaterThanOrEqual(0);
      expect(d.age_hours).toBeLessThan(1);
      expect(d.as_of).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      // Brazilian calendar days: at 21:00–23:59 in Brasília (already tomorrow in UTC) too.
      expect(d.as_of_age_days).toBe(brazilDaysSince(d.as_of, new Date()));
      if (d.as_of === todayInBrazil()) expect(d.as_of_age_days).toBe(0);
    }
    expect(r.body.consultado_em).toMatch(TIMESTAMP);
  });

  test("an as_of's age counts Brazilian calendar days, not days since midnight UTC", () => {
    expect(brazilDaysSince('2026-11-29', new Date('2026-11-30T01:30:00Z'))).toBe(0); // 22:30 on the 29th in Brasília
    expect(brazilDaysSince('2026-11-29', new Date('2026-11-30T03:00:00Z'))).toBe(1);
    expect(brazilDaysSince('2026-12-31', new Date('2027-01-01T02:00:00Z'))).toBe(0);
    expect(brazilDaysSince('2026-02-28', new Date('2026-03-01T12:00:00Z'))).toBe(1);
  });

  test('a flood of health checks (no key, no per-key limit) costs the database one check a second', async () => {
    // The server's own pool, counting the checks it is sent (a real pool: the count is what reached PostgreSQL).
    const pool = createApiPool(db.cfg, db.url);
    let pings = 0;
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    pool.query = ((...a: unknown[]) => {
      if (a[0] === 'SELECT 1') pings++;
      return query(...a);
    }) as typeof pool.query;
    const app = await buildServer({ cfg: db.cfg, pool, log: db.log });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const answers = await Promise.all(Array.from({ length: 40 }, () => call(base, '/v1/health')));
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
      expect(new Set(answers.map((a) => a.body.database.latency_ms)).size).toBe(1);
      expect(pings).toBe(1);
      await new Promise((r) => setTimeout(r, HEALTH_REUSE_MS + 50));
      expect((await call(base, '/v1/health')).status).toBe(200);
      expect(pings).toBe(2); // a second later, checked again
    } finally {
      await app.close();
      await pool.end();
    }
  });

  test('sources lists each dataset and state with rows and the as-of dates kept', async () => {
    expectEnvelope(await call(api.base, '/v1/sources'), 401, 'unauthorized');
    const r = await get('/v1/sources');
    expect(r.status).toBe(200);
    const go = r.body.sources.find((s: { dataset: string; uf: string }) => s.dataset === 'sicar' && s.uf === 'GO');
    const [want] = await q<{ snapshot_id: number; rows: number; as_of: string }>(`SELECT snapshot_id, rows, to_char(as_of, 'YYYY-MM-DD') AS as_of FROM serving.snapshots WHERE dataset = 'sicar' AND uf = 'GO' AND status = 'current'`);
    expect(go).toMatchObject({ snapshot_id: Number(want.snapshot_id), rows: Number(want.rows), as_of: want.as_of, as_of_disponiveis: [want.as_of] });
    expect(r.body.sources).toHaveLength(13); // 10 national datasets (receita-cnpj and icmbio-embargos among them) + 3 states
  });

  test('the OpenAPI document is valid 3.1, covers every route and the webhook events; docs work offline', async () => {
    const r = await call(api.base, '/v1/openapi.json');
    expect(r.status).toBe(200);
    const doc = r.body;
    expect(doc.openapi).toBe('3.1.0');
    const verdict = await validateOpenApi(structuredClone(doc));
    expect(verdict).toMatchObject({ valid: true });
    expect(Object.keys(doc.paths).sort()).toEqual(
      ['/v1/car/by-document/{documento}', '/v1/car/by-geometry', '/v1/car/history', '/v1/car/{numero}', '/v1/enriquecimento/territorial', '/v1/health', '/v1/sources', '/v1/socio/cnpj/{cnpj}', '/v1/socio/cpf/{cpf}', '/v1/socio/search'].sort(),
    );
    expect(Object.keys(doc.webhooks).sort()).toEqual(['car.embargo.criado', 'car.situacao.alterada', 'quota.threshold', 'socio.qsa.alterado', 'webhook.test']);
    expect(doc.paths['/v1/health'].get.security).toEqual([]);
    expect(JSON.stringify(doc)).not.toContain('"nullable"');
    const car = doc.paths['/v1/car/{numero}'].get.responses['200'].content['application/json'].schema;
    for (const f of ['car', 'situacao', 'tipo', 'area_total_ha', 'area_consolidada_ha', 'reserva_legal_ha', 'app_ha', 'municipio', 'data_inscricao', 'embargo_ibama', 'sobreposicao_ucs', 'geometria', 'srid', 'centroid', 'bbox', 'consultado_em', 'fonte', 'snapshot_id']) {
      expect(car.properties, f).toHaveProperty(f);
    }
    const docs = await call(api.base, '/v1/docs/');
    const page = docs.status === 200 ? docs : await call(api.base, '/v1/docs');
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/swagger/i);
    expect(page.text).not.toMatch(/<(script|link)[^>]+(src|href)="https?:/i);
    const js = /src="\.?\/?([^"]*swagger-ui-bundle\.js)"/.exec(page.text);
    expect(js).not.toBeNull();
    // the UI's own assets are served by the API itself (offline): no key needed, no CDN
    const bundle = await call(api.base, `/v1/docs/${js![1].replace(/^.*static\//, 'static/')}`);
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toMatch(/javascript/);
    expect(bundle.text.length).toBeGreaterThan(100_000);
  });
});

test('the OpenAPI document declares the request headers of the reference: Idempotency-Key on both POST routes, X-LGPD-Base-Legal on every authenticated route', async () => {
  const doc = (await call(api.base, '/v1/openapi.json')).body;
  const headers = (p: string, m: string) => (doc.paths[p][m].parameters ?? []).filter((x: { in: string }) => x.in === 'header').map((x: { name: string }) => x.name.toLowerCase());
  expect(headers('/v1/car/by-geometry', 'post')).toContain('idempotency-key');
  expect(headers('/v1/enriquecimento/territorial', 'post')).toContain('idempotency-key');
  expect(headers('/v1/car/by-document/{documento}', 'get')).toContain('x-lgpd-base-legal');
  expect(headers('/v1/socio/cpf/{cpf}', 'get')).toContain('x-lgpd-base-legal');
  // checked on every authenticated route (src/api/lgpd-base.ts), so declared on each of them
  const ops = Object.entries(doc.paths as Record<string, Record<string, { security?: unknown[] }>>).flatMap(([p, ms]) => Object.keys(ms).map((m) => [p, m] as const));
  const authenticated = ops.filter(([p]) => p !== '/v1/health');
  expect(authenticated.length).toBeGreaterThan(8);
  for (const [p, m] of authenticated) expect(headers(p, m), `${m} ${p}`).toContain('x-lgpd-base-legal');
  expect(headers('/v1/health', 'get')).not.toContain('x-lgpd-base-legal');
  expect(doc.paths['/v1/health'].get.security).toEqual([]);
});

describe('keys', () => {
  test('missing, malformed, unknown and revoked keys are 401 unauthorized; no key is needed for health', async () => {
    const path = `/v1/car/${GO1}`;
    expectEnvelope(await call(api.base, path), 401, 'unauthorized');
    expectEnvelope(await call(api.base, path, { headers: { authorization: 'Basic abc' } }), 401, 'unauthorized');
    expectEnvelope(await call(api.base, path, { key: 'ck_live_short' }), 401, 'unauthorized');
    // A well-formed key with one character changed fails its checksum.
    const flipped = key.slice(0, 12) + (key[12] === 'a' ? 'b' : 'a') + key.slice(13);
    expect((await call(api.base, path, { key: flipped })).status).toBe(401);
    // A key with a valid checksum that was never issued.
    const other = await createKey(db.pool, { env: 'test', plan: 'starter' });
    await db.pool.query('DELETE FROM platform.api_keys WHERE id = $1', [other.id]);
    expect(expectEnvelope(await call(api.base, path, { key: other.key }), 401, 'unauthorized').message).toMatch(/unknown or revoked/);
    const revoked = await createKey(db.pool, { env: 'live', plan: 'scale' });
    expect((await call(api.base, path, { key: revoked.key })).status).toBe(200);
    await revokeKey(db.pool, revoked.id);
    // the server caches checked keys; the revocation reaches it by NOTIFY within milliseconds
    await eventually(async () => expectEnvelope(await call(api.base, path, { key: revoked.key }), 401, 'unauthorized'));
    // a revocation by plain SQL too (the trigger notifies any change to a key row)
    const sqlRevoked = await createKey(db.pool, { env: 'live', plan: 'scale' });
    expect((await call(api.base, path, { key: sqlRevoked.key })).status).toBe(200);
    await db.pool.query('UPDATE platform.api_keys SET revoked_at = now() WHERE id = $1', [sqlRevoked.id]);
    await eventually(async () => expectEnvelope(await call(api.base, path, { key: sqlRevoked.key }), 401, 'unauthorized'));
    // test keys read the sandbox database only (issue 10): not loaded here, so 503, never the live rows
    expectEnvelope(await call(api.base, path, { key: (await createKey(db.pool, { env: 'test', plan: 'starter' })).key }), 503, 'upstream_unavailable');
  });

  test('only a SHA-256 of the key is stored', async () => {
    const [row] = await q<Record<string, unknown>>(`SELECT * FROM platform.api_keys WHERE key_sha256 = sha256(convert_to($1, 'UTF8'))`, [key]);
    expect(row).toBeDefined();
    expect(JSON.stringify(row)).not.toContain(key.slice(8, 40));
  });
});

interface CarExpect {
  car: string; uf: string; municipio: string; situacao: string; tipo: string; cod_municipio_ibge: string;
  area_total_ha: number; area_calculada_ha: number; app_ha: number | null; reserva_legal_ha: number | null; area_consolidada_ha: number | null;
  data_inscricao: string | null; embargo_ibama: boolean | null; sobreposicao_ucs: unknown[];
  cx: number; cy: number; xmin: number; ymin: number; xmax: number; ymax: number; parts: number; snapshot_id: number; as_of: string;
}

const EXPECT_SQL = `
SELECT c.car, c.uf, c.municipio, c.situacao, c.tipo, c.cod_municipio_ibge, c.area_total_ha, c.area_calculada_ha, c.app_ha, c.reserva_legal_ha,
       c.area_consolidada_ha, to_char(c.data_inscricao, 'YYYY-MM-DD') AS data_inscricao, c.embargo_ibama, c.sobreposicao_ucs,
       ST_X(c.centroid) AS cx, ST_Y(c.centroid) AS cy, ST_XMin(c.geom) AS xmin, ST_YMin(c.geom) AS ymin, ST_XMax(c.geom) AS xmax, ST_YMax(c.geom) AS ymax,
       ST_NumGeometries(c.geom) AS parts, c.snapshot_id, to_char(s.as_of, 'YYYY-MM-DD') AS as_of
FROM serving.car_imovel c JOIN serving.snapshots s ON s.snapshot_id = c.snapshot_id ORDER BY c.car`;

describe('GET /v1/car/{numero}', () => {
  test('every field of every fixture property, against the serving views and contract §3', async () => {
    const rows = await q<CarExpect>(EXPECT_SQL);
    expect(rows.length).toBe(15);
    const t0 = Date.now();
    for (const w of rows) {
      const r = await get(`/v1/car/${w.car}`);
      expect(r.status, w.car).toBe(200);
      const b = r.body;
      expect(b.car).toBe(w.car);
      expect(b.uf).toBe(w.uf);
      expect(b.situacao).toBe(w.situacao);
      expect(['ativo', 'pendente', 'cancelado', 'suspenso']).toContain(b.situacao);
      expect(b.tipo).toBe(w.tipo);
      expect(['imovel_rural', 'assentamento', 'territorio_tradicional']).toContain(b.tipo);
      expect(b.municipio).toBe(`${w.municipio}/${w.uf}`);
      expect(b.cod_municipio_ibge).toBe(w.cod_municipio_ibge);
      expect(b.area_total_ha).toBe(w.area_total_ha);
      expect(b.area_calculada_ha).toBeCloseTo(w.area_calculada_ha, 4);
      for (const f of ['app_ha', 'reserva_legal_ha', 'area_consolidada_ha'] as const) {
        if (w[f] === null) expect(b[f], `${w.car} ${f}`).toBeNull();
        else expect(b[f], `${w.car} ${f}`).toBeCloseTo(w[f]!, 4);
      }
      expect(b.data_inscricao).toBe(w.data_inscricao);
      expect(b.embargo_ibama).toBe(w.embargo_ibama);
      expect(b.sobreposicao_ucs).toEqual(w.sobreposicao_ucs);
      expect(b.srid).toBe(4326);
      expect(b.centroid.type).toBe('Point');
      expect(b.centroid.coordinates[0]).toBeCloseTo(w.cx, 7);
      expect(b.centroid.coordinates[1]).toBeCloseTo(w.cy, 7);
      expect(b.bbox).toHaveLength(4);
      [w.xmin, w.ymin, w.xmax, w.ymax].forEach((v, i) => expect(b.bbox[i]).toBeCloseTo(v, 7));
      expect(b).not.toHaveProperty('geometria');
      expect(b.consultado_em).toMatch(TIMESTAMP);
      expect(Math.abs(Date.parse(b.consultado_em) - t0)).toBeLessThan(60_000);
      expect(b.fonte).toBe(`SICAR/SFB ${w.uf} ${w.as_of}`);
      expect(b.snapshot_id).toBe(Number(w.snapshot_id));
      expect(b.as_of).toBe(w.as_of);
      expect(b).not.toHaveProperty('avisos');
    }
    // the fixture's placeholder date (00/00/0000) is published as null
    expect(rows.some((w) => w.data_inscricao === null)).toBe(true);
  });

  test('geometry=true: Polygon for one part, MultiPolygon otherwise, exterior rings counter-clockwise, ≤ 7 decimals', async () => {
    for (const [car, type] of [[GO1, 'Polygon'], [GO3, 'MultiPolygon']] as const) {
      const r = await get(`/v1/car/${car}?geometry=true`);
      expect(r.status).toBe(200);
      const g = r.body.geometria;
      expect(g.type).toBe(type);
      const polygons: number[][][][] = type === 'Polygon' ? [g.coordinates] : g.coordinates;
      for (const rings of polygons) {
        expect(signedArea(rings[0])).toBeGreaterThan(0);
        for (const p of rings.flat()) p.forEach((x) => expect(sevenDecimals(x)).toBe(true));
      }
      const [w] = await q<{ ha: number }>(`SELECT ST_Area(geom::geography) / 10000 AS ha FROM serving.car_imovel WHERE car = $1`, [car]);
      expect(Math.abs(turfArea(g) / 10000 - w.ha) / w.ha).toBeLessThan(0.005); // turf's sphere vs the ellipsoid
    }
    expect((await get(`/v1/car/${GO1}?geometry=false`)).body).not.toHaveProperty('geometria');
  });

  test("geometry=True (Python's requests, .NET), TRUE, 1 and their false forms are the boolean; anything else → 400 naming geometry", async () => {
    for (const v of ['True', 'TRUE', '1']) {
      expect((await get(`/v1/car/${GO1}?geometry=${v}`)).body.geometria?.type, v).toBe('Polygon');
      const doc = await get(`/v1/car/by-document/52998224725?geometry=${v}`);
      expect(doc.body.results.every((x: { geometria?: unknown }) => x.geometria !== undefined), v).toBe(true);
    }
    for (const v of ['False', 'FALSE', '0']) {
      const r = await get(`/v1/car/${GO1}?geometry=${v}`);
      expect(r.status, v).toBe(200);
      expect(r.body, v).not.toHaveProperty('geometria');
    }
    // A cursor's query fingerprint sees the boolean, not its spelling.
    const p1 = (await get('/v1/car/by-document/52998224725?limit=1&geometry=True')).body;
    expect((await get(`/v1/car/by-document/52998224725?limit=1&geometry=true&cursor=${p1.next_cursor}`)).status).toBe(200);
    for (const v of ['yes', 'on', '2', '', 'truee']) expect(expectEnvelope(await get(`/v1/car/${GO1}?geometry=${v}`), 400, 'invalid_request').message, v).toMatch(/^geometry: /);
  });

  test('the number is case-insensitive; malformed → 400 naming numero; unknown → 404 car_not_found', async () => {
    expect((await get(`/v1/car/${GO1.toLowerCase()}`)).body.car).toBe(GO1);
    expect(expectEnvelope(await get('/v1/car/GO-123'), 400, 'invalid_request').message).toMatch(/^numero: /);
    expect(expectEnvelope(await get(`/v1/car/XX-5208707-${'A'.repeat(32)}`), 400, 'invalid_request').message).toMatch(/numero: "XX" is not a Brazilian state/);
    expect(expectEnvelope(await get(`/v1/car/GO-5208707-${'0'.repeat(32)}`), 404, 'car_not_found').message).toContain('GO-5208707-');
    // a state without a published snapshot: the data is unavailable, not "not found"
    const e = expectEnvelope(await get(`/v1/car/BA-2903201-${'0'.repeat(32)}`), 503, 'upstream_unavailable');
    expect(e.message).toMatch(/BA/);
  });

  test('include: every layer against the precomputed overlaps and the layers’ attributes; unknown → 400', async () => {
    const r = await get(`/v1/car/${MT1}?include=embargos,ucs,tis,quilombos,zarc`);
    expect(r.status).toBe(200);
    const ov = await q<{ camada: string; feicao_id: string; area_sobreposta_ha: number | null; percentual: number | null; ativo: boolean | null }>(
      `SELECT camada, feicao_id, area_sobreposta_ha, percentual, ativo FROM serving.car_sobreposicoes WHERE car = $1`, [MT1]);
    const of = (c: string) => ov.filter((o) => o.camada === c);
    expect(r.body.tis).toHaveLength(of('ti').length);
    expect(of('ti').length).toBeGreaterThan(0);
    const [ti] = await q<Record<string, unknown>>(`SELECT codigo, nome, etnias, fase, modalidade FROM serving.funai_tis WHERE codigo = $1`, [of('ti')[0].feicao_id]);
    expect(r.body.tis[0]).toEqual({ ...ti, area_sobreposta_ha: Math.round(of('ti')[0].area_sobreposta_ha! * 1e4) / 1e4, percentual: Math.round(of('ti')[0].percentual! * 1e6) / 1e6 });
    expect(r.body.embargos).toHaveLength(of('embargo').length);
    const emb = r.body.embargos[0];
    const [e] = await q<Record<string, unknown>>(`SELECT numero_tad, to_char(data_embargo, 'YYYY-MM-DD') AS data_embargo, situacao, area_embargada_ha FROM serving.ibama_embargos WHERE numero_tad = $1 ORDER BY ativo DESC LIMIT 1`, [emb.numero_tad]);
    expect(emb).toMatchObject({ ...e, ativo: of('embargo')[0].ativo });
    expect(emb.area_sobreposta_ha).toBeNull(); // a point-only term
    expect(r.body.ucs).toEqual([]);
    expect(r.body.quilombos).toEqual([]);
    // ZARC: the risk table of the property's municipality, per crop/cycle/soil/management
    const zarc = await q<Record<string, number | string | null>>(`SELECT * FROM serving.zarc_risco WHERE geocodigo = '5107925'`);
    expect(r.body.zarc.geocodigo).toBe('5107925');
    expect(r.body.zarc.culturas).toHaveLength(zarc.length);
    for (const c of r.body.zarc.culturas) {
      const w = zarc.find((z) => z.cultura === c.cultura && z.safra === c.safra && z.ciclo === c.ciclo && z.solo === c.solo && z.manejo === c.manejo)!;
      for (const level of [20, 30, 40]) {
        expect(c[`risco_${level}`]).toEqual(Array.from({ length: 36 }, (_, i) => i + 1).filter((n) => w[`dec${n}`] === level));
      }
    }
    // GO1: a conservation unit and a polygon embargo; include=ucs equals sobreposicao_ucs
    const go1 = (await get(`/v1/car/${GO1}?include=ucs,embargos`)).body;
    expect(go1.ucs).toEqual(go1.sobreposicao_ucs);
    expect(go1.embargos[0].area_sobreposta_ha).toBeGreaterThan(0);
    expect(go1).not.toHaveProperty('tis');
    expect(expectEnvelope(await get(`/v1/car/${GO1}?include=ucs,florestas`), 400, 'invalid_request').message).toMatch(/^include: unknown layer "florestas"/);
  });
});

describe('include=embargos_icmbio', () => {
  test('ICMBio embargoes over the property from the precomputed overlaps, with the layer\'s attributes and never its document or name', async () => {
    const [ov] = await q<{ car: string; feicao_id: string; area_sobreposta_ha: number; percentual: number }>(
      `SELECT car, feicao_id, area_sobreposta_ha, percentual FROM serving.car_sobreposicoes WHERE camada = 'embargo_icmbio' ORDER BY car, feicao_id LIMIT 1`);
    expect(ov).toBeDefined();
    const r = await get(`/v1/car/${ov.car}?include=embargos_icmbio`);
    expect(r.status).toBe(200);
    const [e] = await q<Record<string, unknown>>(
      `SELECT id_embargo, numero_embargo, serie_embargo, to_char(data_embargo, 'YYYY-MM-DD') AS data_embargo, nome_uc, cnuc, tipo_infracao, julgamento,
              round(area_calculada_ha::numeric, 4)::float8 AS area_embargada_ha, documento, nome_autuado FROM serving.icmbio_embargos WHERE id_embargo = $1`, [ov.feicao_id]);
    const { documento, nome_autuado, ...served } = e;
    expect(r.body.embargos_icmbio).toEqual([{ ...served, area_sobreposta_ha: Math.round(ov.area_sobreposta_ha * 1e4) / 1e4, percentual: Math.round(ov.percentual * 1e6) / 1e6 }]);
    expect(documento && nome_autuado).toBeTruthy();
    expect(r.text).not.toContain(String(documento));
    expect(r.text).not.toContain(String(nome_autuado));
    expect(r.body).not.toHaveProperty('embargos');
    // A property no ICMBio embargo crosses: an empty list, not null.
    expect((await get(`/v1/car/${GO1}?include=embargos_icmbio`)).body.embargos_icmbio).toEqual([]);
  });
});

describe('GET /v1/car/by-document/{documento}', () => {
  test('a CPF: masked, holder name, one summary per property with the fields of the record', async () => {
    const r = await get(`/v1/car/by-document/${encodeURIComponent(JOSE_CPF)}`, { 'x-lgpd-base-legal': 'protecao_credito' });
    expect(r.status).toBe(200);
    const b = r.body;
    expect(b.documento).toBe('***.982.247-**');
    expect(r.text).not.toContain('52998224725');
    expect(r.text).not.toContain('529.982.247-25');
    expect(b.tipo_documento).toBe('cpf');
    expect(b.titular).toBe('José Antônio da Conceição');
    expect(b.results.map((x: { car: string }) => x.car)).toEqual([GO1, GO8]);
    expect(b.count).toBe(2);
    expect(b.next_cursor).toBeNull();
    expect(b.consultado_em).toMatch(TIMESTAMP);
    expect(b.area_total_ha).toBeCloseTo(b.results[0].area_total_ha + b.results[1].area_total_ha, 4);
    for (const s of b.results) {
      const full = (await get(`/v1/car/${s.car}`)).body;
      for (const f of ['car', 'uf', 'situacao', 'tipo', 'municipio', 'area_total_ha', 'area_calculada_ha', 'data_inscricao', 'embargo_ibama', 'srid', 'centroid', 'bbox', 'snapshot_id', 'fonte']) {
        expect(s[f], `${s.car} ${f}`).toEqual(full[f]);
      }
      expect(s).toMatchObject({ vinculo: 'proprietario', origem: 'declarado' });
      expect(s).not.toHaveProperty('geometria');
    }
    const withGeom = (await get(`/v1/car/by-document/52998224725?geometry=true`)).body;
    expect(withGeom.results[0].geometria.type).toBe('Polygon');
  });

  test('a property whose area SICAR did not publish (NULL) is no 0 in the sum: the total says how many it sums', async () => {
    const before = (await get('/v1/car/by-document/52998224725')).body;
    // the GO snapshot's own table (the views above it are not updatable)
    const table = (await db.pool.query(`SELECT format('snap.%I', 'car_imovel__s' || snapshot_id) AS t FROM "current".car_imovel WHERE car = $1`, [GO8])).rows[0].t;
    await db.pool.query(`UPDATE ${table} SET area_total_ha = NULL WHERE car = $1`, [GO8]);
    try {
      const b = (await get('/v1/car/by-document/52998224725')).body;
      expect(b.results.find((x: { car: string }) => x.car === GO8).area_total_ha).toBeNull();
      const known = b.results.find((x: { car: string }) => x.car === GO1).area_total_ha;
      expect(b.area_total_ha).toBeCloseTo(known, 4);
      expect(b.avisos).toContain(`area_total_ha sums 1 of the 2 properties returned: 1 has no area published by SICAR (area_total_ha null)`);
      expect(before.avisos ?? []).not.toEqual(expect.arrayContaining([expect.stringMatching(/^area_total_ha sums/)]));
    } finally {
      await db.pool.query(`UPDATE ${table} SET area_total_ha = $2 WHERE car = $1`, [GO8, before.results.find((x: { car: string }) => x.car === GO8).area_total_ha]);
    }
  });

  test('a CNPJ (numeric and alphanumeric) is returned formatted; filters uf and situacao; include', async () => {
    const r = await get('/v1/car/by-document/45723174000110');
    expect(r.body).toMatchObject({ documento: '45.723.174/0001-10', tipo_documento: 'cnpj', titular: 'Agropecuária Boa Vista Ltda', count: 1 });
    expect(r.body.results[0]).toMatchObject({ car: GO1, vinculo: 'possuidor', origem: 'declarado' });
    const alnum = await get(`/v1/car/by-document/${encodeURIComponent('12.ABC.345/01DE-35')}`);
    expect(alnum.body).toMatchObject({ documento: '12.ABC.345/01DE-35', count: 1 });
    expect(alnum.body.results[0].car).toBe(GO3);
    expect((await get('/v1/car/by-document/52998224725?uf=MT')).body.count).toBe(0);
    expect((await get('/v1/car/by-document/52998224725?uf=go')).body.count).toBe(2);
    const pend = (await get('/v1/car/by-document/52998224725?situacao=pendente')).body;
    expect(pend.results.map((x: { car: string }) => x.car)).toEqual([GO8]);
    const inc = (await get('/v1/car/by-document/52998224725?include=ucs')).body;
    expect(inc.results[0].ucs).toEqual((await get(`/v1/car/${GO1}`)).body.sobreposicao_ucs);
  });

  test("a masked CNPJ written as is (its '/' not escaped) is that CNPJ, not an unknown route: by-document and socio/cnpj", async () => {
    for (const [masked, bare] of [['45.723.174/0001-10', '45723174000110'], ['12.ABC.345/01DE-35', '12ABC34501DE35'], ['12.abc.345/01de-35', '12ABC34501DE35']]) {
      const r = await get(`/v1/car/by-document/${masked}?uf=GO`);
      expect(r.status, r.text).toBe(200);
      const { consultado_em: _a, ...got } = r.body;
      const { consultado_em: _b, ...want } = (await get(`/v1/car/by-document/${bare}?uf=GO`)).body;
      expect(got).toEqual(want);
      expect(got.count).toBe(1);
      const s = await get(`/v1/socio/cnpj/${masked}`);
      const sBare = await get(`/v1/socio/cnpj/${bare}`);
      expect(s.status, s.text).toBe(sBare.status);
      expect(s.body?.cnpj ?? s.body?.error?.code).toBe(sBare.body?.cnpj ?? sBare.body?.error?.code);
    }
    expect((await get('/v1/socio/cnpj/12.ABC.345/01DE-35')).body.razao_social).toBe('AGROPECUÁRIA SÃO JOSÉ LTDA');
    // Still validated as a document: wrong check digits, or two segments that are no CNPJ → 400 naming it.
    expect(expectEnvelope(await get('/v1/car/by-document/45.723.174/0001-11'), 400, 'invalid_request').message).toMatch(/^documento: /);
    expect(expectEnvelope(await get('/v1/socio/cnpj/45.723.174/0001-11'), 400, 'invalid_request').message).toMatch(/^cnpj: /);
    // Anything longer stays an unknown route.
    expectEnvelope(await get('/v1/car/by-document/45.723.174/0001-10/x'), 404, 'not_found');
  });

  test('links inferred from an IBAMA embargo carry origem inferido', async () => {
    const r = await get(`/v1/car/by-document/${INFERRED_CPF}`);
    expect(r.status).toBe(200);
    expect(r.body.documento).toBe('***.476.205-**');
    expect(r.body.results).toHaveLength(1);
    expect(r.body.results[0]).toMatchObject({ car: MT1, origem: 'inferido', vinculo: null, embargo_ibama: true });
    expect(r.body.titular).toBe('Maria das Graças Lúcio');
  });

  test('every link carries its evidence (contract §3): an inferred one its embargo term, a declared one the extract', async () => {
    const inferred = (await get(`/v1/car/by-document/${INFERRED_CPF}`)).body.results[0];
    const [want] = await q<{ evidencia: Record<string, unknown> }>(`SELECT evidencia FROM serving.car_titulares WHERE car = $1 AND documento = $2 AND origem = 'inferido'`, [MT1, INFERRED_CPF]);
    expect(want.evidencia).toMatchObject({ fonte: 'embargo IBAMA', numero_tad: expect.any(String), confianca: 'baixa' });
    expect(inferred.evidencia).toEqual(want.evidencia);
    const declared = (await get(`/v1/car/by-document/52998224725`)).body.results;
    expect(declared).toHaveLength(2);
    for (const d of declared) expect(d.evidencia).toMatchObject({ fonte: 'extrato do operador', snapshot_id: expect.any(Number) });
  });

  test('validation: check digits, limit, situacao, LGPD basis → 400 naming the parameter', async () => {
    expect(expectEnvelope(await get('/v1/car/by-document/52998224724'), 400, 'invalid_request').message).toMatch(/^documento: /);
    expect(expectEnvelope(await get('/v1/car/by-document/45723174000111'), 400, 'invalid_request').message).toMatch(/^documento: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725?limit=0'), 400, 'invalid_request').message).toMatch(/^limit: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725?limit=101'), 400, 'invalid_request').message).toMatch(/^limit: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725?situacao=vendido'), 400, 'invalid_request').message).toMatch(/^situacao: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725?uf=XX'), 400, 'invalid_request').message).toMatch(/^uf: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725', { 'x-lgpd-base-legal': 'curiosidade' }), 400, 'invalid_request').message).toMatch(/^x-lgpd-base-legal: /);
    expect(expectEnvelope(await get('/v1/car/by-document/52998224725?cursor=abc'), 400, 'invalid_request').message).toMatch(/^cursor: /);
  });
});

const SQUARE = (x0: number, y0: number, x1: number, y1: number) => ({ type: 'Polygon', coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]] });

describe('POST /v1/car/by-geometry', () => {
  test('properties intersecting the polygon, by overlap_ratio descending, against a direct computation', async () => {
    const g = SQUARE(-49.34, -16.59, -49.30, -16.55);
    const r = await post('/v1/car/by-geometry', { geometry: g });
    expect(r.status).toBe(200);
    const want = await q<{ car: string; ha: number; ratio: number; area_total_ha: number }>(
      `SELECT c.car, ST_Area(ST_Transform(ST_Intersection(c.geom, q.g), 10857)) / 10000 AS ha, c.area_total_ha,
              least(1, ST_Area(ST_Transform(ST_Intersection(c.geom, q.g), 10857)) / 10000 / c.area_calculada_ha) AS ratio
         FROM serving.car_imovel c, (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS g) q
        WHERE ST_Intersects(c.geom, q.g) ORDER BY ratio DESC, c.car`, [JSON.stringify(g)]);
    const kept = want.filter((w) => w.ha >= 0.0001);
    expect(r.body.results.map((x: { car: string }) => x.car)).toEqual(kept.map((w) => w.car));
    expect(r.body.count).toBe(kept.length);
    expect(kept.length).toBeGreaterThanOrEqual(2);
    r.body.results.forEach((x: { overlap_ratio: number; overlap_ha: number; area_ha: number }, i: number) => {
      expect(x.overlap_ratio).toBeCloseTo(kept[i].ratio, 6);
      expect(x.overlap_ha).toBeCloseTo(kept[i].ha, 3);
      expect(x.area_ha).toBe(kept[i].area_total_ha);
      expect(x.overlap_ratio).toBeGreaterThanOrEqual(0);
      expect(x.overlap_ratio).toBeLessThanOrEqual(1);
    });
    expect(r.body.results[0]).toMatchObject({ car: GO1, overlap_ratio: 1 });
    expect(Math.abs(r.body.area_consulta_ha / (turfArea(g as never) / 10000) - 1)).toBeLessThan(0.005);
    const min = await post('/v1/car/by-geometry', { geometry: g, min_overlap: 0.5 });
    expect(min.body.results.every((x: { overlap_ratio: number }) => x.overlap_ratio >= 0.5)).toBe(true);
    expect(min.body.count).toBe(kept.filter((w) => w.ratio >= 0.5).length);
    expect((await post('/v1/car/by-geometry', { geometry: g, limit: 1 })).body.count).toBe(1);
    // MultiPolygon accepted; far away → no results
    expect((await post('/v1/car/by-geometry', { geometry: { type: 'MultiPolygon', coordinates: [SQUARE(-40, -10, -39.9, -9.9).coordinates] } })).body).toMatchObject({ count: 0, results: [] });
  });

  test('every geometry rule → 422 geometry_invalid saying which; parameters out of range → 400', async () => {
    const bad: [unknown, RegExp][] = [
      [{ type: 'Point', coordinates: [-49, -16] }, /Polygon or MultiPolygon/],
      [{ type: 'Polygon', coordinates: [[[-49, -16], [-48, -16], [-48, -15], [-49, -16.5]]] }, /not closed/],
      [{ type: 'Polygon', coordinates: [[[-49, -16], [-48, -16], [-49, -16]]] }, /at least 4/],
      [SQUARE(-200, -16, -199, -15), /longitude -200/],
      [SQUARE(-49, -95, -48, -94), /latitude -95/],
      [{ type: 'Polygon', coordinates: [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]] }, /self-intersecting/],
      [SQUARE(-60, -20, -45, -5), /covers .* ha; at most 1,000,000/],
      [{ type: 'Polygon', coordinates: [Array.from({ length: 10_001 }, (_, i) => { const a = (2 * Math.PI * i) / 10_000; return [-49 + 0.01 * Math.cos(a), -16 + 0.01 * Math.sin(a)]; })] }, /vertices/],
      // a hole outside its shell: turf sees no kink, PostGIS says why
      [{ type: 'Polygon', coordinates: [SQUARE(-49, -16, -48.9, -15.9).coordinates[0], SQUARE(-48, -16, -47.9, -15.9).coordinates[0]] }, /PostGIS: Hole lies outside shell/],
      [{ type: 'MultiPolygon', coordinates: [SQUARE(-49, -16, -48.9, -15.9).coordinates, SQUARE(-48.95, -16, -48.85, -15.9).coordinates] }, /self-intersecting/],
      // one part inside another: no edges cross, PostGIS says why
      [{ type: 'MultiPolygon', coordinates: [SQUARE(-49, -16, -48.9, -15.9).coordinates, SQUARE(-48.97, -15.97, -48.93, -15.93).coordinates] }, /PostGIS: Nested shells/],
      [{ type: 'Polygon', coordinates: 'nope' }, /array/],
      [{ type: 'Polygon', coordinates: [[['a', 'b'], [1, 2], [3, 4], ['a', 'b']]] }, /position/],
    ];
    for (const [geometry, why] of bad) {
      const e = expectEnvelope(await post('/v1/car/by-geometry', { geometry }), 422, 'geometry_invalid');
      expect(e.message, JSON.stringify(geometry).slice(0, 80)).toMatch(why);
    }
    expectEnvelope(await post('/v1/car/by-geometry', {}), 422, 'geometry_invalid');
    const g = SQUARE(-49.34, -16.59, -49.30, -16.55);
    expect(expectEnvelope(await post('/v1/car/by-geometry', { geometry: g, min_overlap: 1.5 }), 400, 'invalid_request').message).toMatch(/^min_overlap: /);
    expect(expectEnvelope(await post('/v1/car/by-geometry', { geometry: g, limit: 1001 }), 400, 'invalid_request').message).toMatch(/^limit: /);
    expect(expectEnvelope(await post('/v1/car/by-geometry', { geometry: g, limit: 'many' }), 400, 'invalid_request').message).toMatch(/^limit: /);
    // a typo is refused, not silently ignored
    expect(expectEnvelope(await post('/v1/car/by-geometry', { geometry: g, min_overlaps: 0.5 }), 400, 'invalid_request').message).toBe('min_overlaps: is not a known field');
  });
});

describe('POST /v1/enriquecimento/territorial', () => {
  test('area, municipalities with shares and every layer, against direct computations', async () => {
    // around MT1 and MT2: indigenous land 90101, Sorriso
    const [{ env }] = await q<{ env: string }>(`SELECT ST_AsGeoJSON(ST_Envelope(ST_Collect(geom)), 7) AS env FROM serving.car_imovel WHERE car IN ($1, 'MT-5107925-22640FF3A31899220A4C8B49F8FF1D6A')`, [MT1]);
    const g = JSON.parse(env);
    const r = await post('/v1/enriquecimento/territorial', { geometry: g });
    expect(r.status).toBe(200);
    const b = r.body;
    const [w] = await q<{ ha: number }>(`SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON($1), 4326), 10857)) / 10000 AS ha`, [env]);
    expect(b.area_ha).toBeCloseTo(w.ha, 3);
    expect(b.municipios.length).toBeGreaterThan(0);
    expect(b.municipios[0]).toMatchObject({ geocodigo: '5107925', nome: 'Sorriso', uf: 'MT' });
    expect(b.municipios.reduce((s: number, m: { percentual: number }) => s + m.percentual, 0)).toBeLessThanOrEqual(1.000001);
    const tis = await q<{ codigo: string; ha: number }>(
      `SELECT t.codigo, ST_Area(ST_Transform(ST_Intersection(t.geom, q.g), 10857)) / 10000 AS ha FROM serving.funai_tis t,
              (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS g) q WHERE ST_Intersects(t.geom, q.g) ORDER BY ha DESC`, [env]);
    expect(b.ti.map((t: { codigo: string }) => t.codigo)).toEqual(tis.filter((t) => t.ha >= 0.0001).map((t) => t.codigo));
    expect(b.ti[0].area_sobreposta_ha).toBeCloseTo(tis[0].ha, 3);
    expect(b.ti[0].percentual).toBeCloseTo(tis[0].ha / w.ha, 5);
    expect(b.ti[0]).toHaveProperty('etnias');
    expect(Array.isArray(b.uc)).toBe(true);
    expect(Array.isArray(b.quilombo)).toBe(true);
    const [road] = await q<{ km: number }>(`SELECT min(ST_Distance(r.geom::geography, ST_SetSRID(ST_GeomFromGeoJSON($1), 4326)::geography)) / 1000 AS km FROM serving.dnit_snv_principal r`, [env]);
    expect(b.rodovias.distancia_km).toBeCloseTo(road.km, 2);
    expect(b.rodovias.segmentos.every((s: { distancia_km: number }) => s.distancia_km <= 10)).toBe(true);
    expect(b.zarc.map((z: { geocodigo: string }) => z.geocodigo)).toEqual(b.municipios.map((m: { geocodigo: string }) => m.geocodigo));
    expect(b.fontes['funai-tis'].snapshot_id).toBeGreaterThan(0);
    expect(b.consultado_em).toMatch(TIMESTAMP);
    // layers narrows the answer
    const only = (await post('/v1/enriquecimento/territorial', { geometry: g, layers: ['uc'] })).body;
    expect(Object.keys(only).sort()).toEqual(['area_ha', 'consultado_em', 'fontes', 'municipios', 'uc']);
    expect(expectEnvelope(await post('/v1/enriquecimento/territorial', { geometry: g, layers: ['uc', 'florestas'] }), 400, 'invalid_request').message).toMatch(/^layers: /);
    expect(expectEnvelope(await post('/v1/enriquecimento/territorial', { geometry: g, layers: 'uc' }), 400, 'invalid_request').message).toMatch(/^layers: /);
    expectEnvelope(await post('/v1/enriquecimento/territorial', { geometry: SQUARE(-200, 0, -199, 1) }), 422, 'geometry_invalid');
  });

  test('a polygon inside a conservation unit: uc share 1 of the request', async () => {
    const [{ env }] = await q<{ env: string }>(`SELECT ST_AsGeoJSON(ST_Envelope(ST_Buffer(ST_PointOnSurface(geom), 0.001)), 7) AS env FROM serving.cnuc_ucs WHERE codigo = '0000.52.9002'`);
    const b = (await post('/v1/enriquecimento/territorial', { geometry: JSON.parse(env), layers: ['uc'] })).body;
    expect(b.uc.map((u: { cnuc: string }) => u.cnuc)).toContain('0000.52.9002');
    expect(b.uc.find((u: { cnuc: string }) => u.cnuc === '0000.52.9002').percentual).toBeCloseTo(1, 6);
  });
});

describe('HTTP-level errors are envelopes too', () => {
  test('unknown route, wrong content type, malformed JSON, body too large, query timeout', async () => {
    expectEnvelope(await get('/v1/nothing-here'), 404, 'not_found');
    expectEnvelope(await call(api.base, '/v2/car'), 404, 'not_found');
    expectEnvelope(await call(api.base, '/v1/car/by-geometry', { key, raw: 'geometry=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, 'unsupported_media_type');
    expectEnvelope(await call(api.base, '/v1/car/by-geometry', { key, raw: '{"geometry": ', headers: { 'content-type': 'application/json' } }), 400, 'invalid_request');
    expectEnvelope(await call(api.base, '/v1/car/by-geometry', { key, raw: 'x'.repeat(2 * 1024 * 1024), headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large');
  });

  test('a statement over the timeout → 503 upstream_unavailable with Retry-After', async () => {
    const slow = await startApi({ ...db.cfg, api: { ...db.cfg.api, statementTimeoutMs: 300 } }, db.url, db);
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE platform.api_keys IN ACCESS EXCLUSIVE MODE');
      const r = await call(slow.base, `/v1/car/${GO1}`, { key });
      expect(expectEnvelope(r, 503, 'upstream_unavailable').message).toMatch(/statement timeout/);
      expect(r.headers.get('retry-after')).toBe('5');
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
      await slow.close();
    }
  });

  test('database unreachable → 503 upstream_unavailable with Retry-After, on health and on data routes', async () => {
    const down = await startApi(db.cfg, 'postgres://agro@127.0.0.1:1/nowhere', db);
    try {
      const h = await call(down.base, '/v1/health');
      expectEnvelope(h, 503, 'upstream_unavailable');
      expect(h.headers.get('retry-after')).toBe('5');
      expectEnvelope(await call(down.base, `/v1/car/${GO1}`, { key }), 503, 'upstream_unavailable');
      // a malformed key is refused without the database
      expectEnvelope(await call(down.base, `/v1/car/${GO1}`, { key: 'ck_live_x' }), 401, 'unauthorized');
    } finally {
      await down.close();
    }
  });

  test('no published snapshot → 503 upstream_unavailable', async () => {
    const empty = await testDatabase();
    const e = await startApi(empty.cfg, empty.url, empty);
    try {
      const k = await newKey(empty);
      expectEnvelope(await call(e.base, `/v1/car/${GO1}`, { key: k }), 503, 'upstream_unavailable');
      expectEnvelope(await call(e.base, '/v1/car/by-document/52998224725', { key: k }), 503, 'upstream_unavailable');
      expectEnvelope(await call(e.base, '/v1/car/by-geometry', { key: k, body: { geometry: SQUARE(-49.34, -16.59, -49.30, -16.55) } }), 503, 'upstream_unavailable');
      expectEnvelope(await call(e.base, '/v1/enriquecimento/territorial', { key: k, body: { geometry: SQUARE(-49.34, -16.59, -49.30, -16.55) } }), 503, 'upstream_unavailable');
      expect((await call(e.base, '/v1/health')).body.datasets).toEqual([]);
    } finally {
      await e.close();
      await empty.drop();
    }
  });
});

/** A copy of the GO fixture without some theme zips: other bytes, same properties. */
function goSourceWithout(...themes: string[]): string {
  const dir = fs.mkdtempSync(path.join(work, 'GO-'));
  for (const f of fs.readdirSync(path.join(FIXTURES, 'sicar', 'GO'))) {
    if (!themes.some((t) => f === `GO_${t}.zip`)) fs.copyFileSync(path.join(FIXTURES, 'sicar', 'GO', f), path.join(dir, f));
  }
  return dir;
}

describe('snapshots: cursors across a publish, as_of', () => {
  test('pagination end to end, stable when a new snapshot is published between two pages; tampered cursor → 400', async () => {
    const p1 = (await get('/v1/car/by-document/52998224725?limit=1')).body;
    expect(p1.results.map((x: { car: string }) => x.car)).toEqual([GO1]);
    expect(p1.count).toBe(1);
    expect(typeof p1.next_cursor).toBe('string');
    const before = p1.results[0].snapshot_id;
    // tampering: one character of the payload, or of the signature
    const c = p1.next_cursor as string;
    const tampered = (c[3] === 'A' ? 'B' : 'A');
    expect(expectEnvelope(await get(`/v1/car/by-document/52998224725?limit=1&cursor=${c.slice(0, 3)}${tampered}${c.slice(4)}`), 400, 'invalid_request').message).toMatch(/^cursor: /);
    expect(expectEnvelope(await get(`/v1/car/by-document/52998224725?limit=1&cursor=${c.slice(0, -1)}${c.endsWith('A') ? 'B' : 'A'}`), 400, 'invalid_request').message).toMatch(/^cursor: /);
    // another query's cursor
    expect(expectEnvelope(await get(`/v1/car/by-document/52998224725?limit=1&situacao=ativo&cursor=${encodeURIComponent(c)}`), 400, 'invalid_request').message).toMatch(/^cursor: .*another query/);

    // a new GO snapshot (without the APP theme) is published between the two pages
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('sicar')!, { source: goSourceWithout('APPS'), uf: 'GO' });
    expect(o.status).toBe('published');
    expect(o.snapshot_id).not.toBe(before);

    const p2 = (await get(`/v1/car/by-document/52998224725?limit=1&cursor=${encodeURIComponent(c)}`)).body;
    expect(p2.results.map((x: { car: string }) => x.car)).toEqual([GO8]);
    expect(p2.results[0].snapshot_id).toBe(before); // the snapshot the first page read
    expect(p2.snapshots['sicar:GO']).toBe(before);
    expect(p2.next_cursor).toBeNull();
    // a fresh query reads the new snapshot
    const fresh = (await get('/v1/car/by-document/52998224725')).body;
    expect(fresh.results.map((x: { snapshot_id: number }) => x.snapshot_id)).toEqual([o.snapshot_id, o.snapshot_id]);
    expect((await get(`/v1/car/${GO1}`)).body).toMatchObject({ snapshot_id: o.snapshot_id, app_ha: null });
  });

  test('as_of answers from the snapshot current on that date; overlaps from computed pairs or a note; none → 404 with the dates', async () => {
    // a historical GO snapshot (without AREA_CONSOLIDADA), backfilled as of 2025-01-01
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('sicar')!, { source: goSourceWithout('AREA_CONSOLIDADA'), uf: 'GO', asOf: '2025-01-01', backfill: true });
    expect(o.snapshot_id).toBeGreaterThan(0);
    const [st] = await q<{ status: string }>('SELECT status FROM serving.snapshots WHERE snapshot_id = $1', [o.snapshot_id]);
    expect(['superseded', 'loaded']).toContain(st.status);

    const old = await get(`/v1/car/${GO1}?as_of=2025-06-30&include=ucs,tis,zarc`);
    expect(old.status).toBe(200);
    expect(old.body).toMatchObject({ car: GO1, snapshot_id: o.snapshot_id, as_of: '2025-01-01', fonte: 'SICAR/SFB GO 2025-01-01', area_consolidada_ha: null });
    expect(old.body.app_ha).toBeGreaterThan(0);
    // Layers as of mid-2025: only CNUC (2024-10-01) is that old, and the backfill's pair with it was
    // computed when it was loaded: its overlaps are shown; the younger layers are null with a note.
    const [pair] = await q('SELECT 1 FROM serving.overlap_pairs p JOIN serving.snapshots s ON s.snapshot_id = p.layer_snapshot_id WHERE p.car_snapshot_id = $1 AND s.dataset = $2', [o.snapshot_id, 'cnuc-ucs']);
    expect(pair).toBeDefined();
    expect(old.body.sobreposicao_ucs).toEqual((await get(`/v1/car/${GO1}`)).body.sobreposicao_ucs);
    expect(old.body.ucs).toEqual(old.body.sobreposicao_ucs);
    expect(old.body.embargo_ibama).toBeNull();
    expect(old.body.tis).toBeNull();
    expect(old.body.zarc).toBeNull();
    expect(old.body.avisos.join('\n')).toMatch(/ibama-embargos: no snapshot as of 2025-06-30 or earlier/);
    expect(old.body.avisos.join('\n')).toMatch(/funai-tis: no snapshot as of 2025-06-30 or earlier/);
    // a pair never computed is said so: forget the CNUC pair of the backfill
    await db.pool.query('DELETE FROM derived.overlap_pairs WHERE car_snapshot_id = $1', [o.snapshot_id]);
    const unpaired = (await get(`/v1/car/${GO1}?as_of=2025-06-30`)).body;
    expect(unpaired.sobreposicao_ucs).toBeNull();
    expect(unpaired.avisos.join('\n')).toMatch(/cnuc-ucs: overlaps of SICAR snapshot \d+ with cnuc-ucs snapshot \d+ .* were not computed/);

    // as of today (in Brazil, the day a run without a release date is as of): the current snapshot, every field as the current answer
    const today = brazilDay(new Date());
    const now = (await get(`/v1/car/${GO1}?include=ucs,embargos,tis,quilombos,zarc`)).body;
    const asOfNow = (await get(`/v1/car/${GO1}?as_of=${today}&include=ucs,embargos,tis,quilombos,zarc`)).body;
    expect({ ...asOfNow, consultado_em: null }).toEqual({ ...now, consultado_em: null });

    const none = expectEnvelope(await get(`/v1/car/${GO1}?as_of=2020-01-01`), 404, 'car_not_found');
    expect(none.message).toContain(`available as-of dates: 2025-01-01, ${today}`);
    expect(expectEnvelope(await get(`/v1/car/${GO1}?as_of=2025-13-45`), 400, 'invalid_request').message).toMatch(/^as_of: /);
    // by document, as of mid-2025
    const docReply = await get('/v1/car/by-document/52998224725?as_of=2025-06-30');
    expect(docReply.status, docReply.text).toBe(200);
    const doc = docReply.body;
    expect(doc.snapshots['sicar:GO']).toBe(o.snapshot_id);
    expect(doc.avisos.some((a: string) => /car-titulares/.test(a))).toBe(true); // the extract is newer than the date
    expect(doc.results.map((x: { car: string }) => x.car)).toEqual([]);
  });
});
