// CONTRACT.md §1, §2b, §4 and §5, item by item, where no other test held the code to the written
// names and numbers: the serving views' columns and geometry types, the plan table of rate
// limit and quota, the legal-basis header on every authenticated route, idempotency scopes,
// public routes never billed. A real PostGIS loaded with every fixture, the API on loopback.
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { fixtureRuns } from '../src/cli/main.ts';
import { DELIVERY_TIMEOUT_MS, postWebhook } from '../src/events/post.ts';
import { createKey, PLANS, type Plan } from '../src/platform/keys.ts';
import { call, expectEnvelope, fixtureApi } from './helpers/api.ts';
import { serveProcess } from './helpers/serve.ts';

const fx = fixtureApi();
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const JOSE_CPF = '52998224725'; // declared owner of GO1
const SQUARE = { type: 'Polygon', coordinates: [[[-49.34, -16.59], [-49.3, -16.59], [-49.3, -16.55], [-49.34, -16.55], [-49.34, -16.59]]] };

async function q<T = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<T[]> {
  return (await fx.db.pool.query(sql, params)).rows as T[];
}
const liveKey = (plan: Plan = 'enterprise') => createKey(fx.db.pool, { env: 'live', plan, name: 'contract' });

describe('§2b the SQL read interface (schema serving)', () => {
  // The table of §2b, as written ("key columns (at least)").
  const RELATIONS: Record<string, string[]> = {
    car_imovel: ['car', 'uf', 'cod_municipio_ibge', 'municipio', 'situacao', 'tipo', 'area_total_ha', 'area_calculada_ha', 'app_ha', 'reserva_legal_ha', 'area_consolidada_ha', 'data_inscricao', 'embargo_ibama', 'centroid', 'geom'],
    car_sobreposicoes: ['car', 'camada', 'feicao_id', 'area_sobreposta_ha', 'percentual'],
    car_titulares: ['car', 'documento', 'tipo_documento', 'nome', 'vinculo', 'origem'],
    ibama_embargos: ['numero_tad', 'data_embargo', 'situacao', 'documento', 'area_embargada_ha', 'geom'],
    funai_tis: ['codigo', 'nome', 'geom'],
    cnuc_ucs: ['codigo', 'nome', 'geom'],
    incra_quilombos: ['codigo', 'nome', 'geom'],
    dnit_snv: ['codigo', 'br', 'uf', 'superficie', 'geom'],
    ibge_municipios: ['geocodigo', 'nome', 'uf', 'geom'],
    zarc_risco: ['geocodigo', 'safra', 'cultura', 'ciclo', 'solo', 'manejo', 'portaria', ...Array.from({ length: 36 }, (_, i) => `dec${i + 1}`)],
    cnpj_empresas: [],
    cnpj_estabelecimentos: ['cnpj'],
    cnpj_socios: [],
    snapshots: ['snapshot_id', 'dataset', 'uf', 'as_of', 'status', 'rows', 'source_sha256', 'published_at'],
  };

  test('every relation of the table, with its key columns and snapshot_id', async () => {
    const cols = await q<{ rel: string; cols: string[] }>(
      `SELECT table_name AS rel, array_agg(column_name::text ORDER BY ordinal_position) AS cols FROM information_schema.columns WHERE table_schema = 'serving' GROUP BY table_name`);
    const of = new Map(cols.map((c) => [c.rel, c.cols]));
    for (const [rel, want] of Object.entries(RELATIONS)) {
      expect(of.has(rel), `serving.${rel}`).toBe(true);
      for (const c of [...want, 'snapshot_id']) expect(of.get(rel), `serving.${rel}.${c}`).toContain(c);
    }
  });

  test('cnpj on establishments is 14 characters; car_titulares.documento is the bare document (digits, or the alphanumeric CNPJ)', async () => {
    const [c] = await q<{ n: number; bad: number }>(`SELECT count(*)::int AS n, count(*) FILTER (WHERE cnpj !~ '^[0-9A-Z]{12}[0-9]{2}$')::int AS bad FROM serving.cnpj_estabelecimentos`);
    expect(c.n).toBeGreaterThan(0);
    expect(c.bad).toBe(0);
    const [t] = await q<{ n: number; bad: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE NOT ((tipo_documento = 'cpf' AND documento ~ '^[0-9]{11}$') OR (tipo_documento = 'cnpj' AND documento ~ '^[0-9A-Z]{12}[0-9]{2}$')))::int AS bad
         FROM serving.car_titulares`);
    expect(t.n).toBeGreaterThan(0);
    expect(t.bad).toBe(0);
  });

  test('"Every view has a snapshot_id column": every relation of schema serving', async () => {
    const without = await q<{ rel: string }>(
      `SELECT c.relname AS rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'serving' AND c.relkind IN ('v', 'r', 'm', 'p')
          AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'snapshot_id' AND NOT a.attisdropped)
        ORDER BY 1`);
    expect(without.map((r) => r.rel)).toEqual([]);
    // what the two operational views give as snapshot_id: the current snapshot of the dataset (and state), the CAR snapshot of the pair
    const runs = await q(`SELECT r.dataset, r.uf, r.snapshot_id, s.snapshot_id AS current FROM serving.source_runs r
                            LEFT JOIN serving.snapshots s ON s.dataset = r.dataset AND s.uf IS NOT DISTINCT FROM r.uf AND s.status = 'current'`);
    expect(runs.length).toBeGreaterThanOrEqual(10);
    for (const r of runs) expect(r.snapshot_id, `${r.dataset} ${r.uf ?? ''}`).toBe(r.current);
    const pairs = await q(`SELECT snapshot_id, car_snapshot_id FROM serving.overlap_pairs`);
    expect(pairs.length).toBeGreaterThan(0);
    for (const p of pairs) expect(p.snapshot_id).toBe(p.car_snapshot_id);
  });

  test('geometry columns are geom, SRID 4326, polygonal layers MultiPolygon, roads MultiLineString, embargoes polygon or point', async () => {
    const g = await q<{ rel: string; col: string; srid: number; type: string }>(
      `SELECT f_table_name AS rel, f_geometry_column AS col, srid, type FROM geometry_columns WHERE f_table_schema = 'serving'`);
    const of = (rel: string, col = 'geom') => g.find((x) => x.rel === rel && x.col === col);
    for (const rel of ['car_imovel', 'funai_tis', 'cnuc_ucs', 'incra_quilombos', 'ibge_municipios']) expect(of(rel), rel).toMatchObject({ srid: 4326, type: 'MULTIPOLYGON' });
    expect(of('dnit_snv')).toMatchObject({ srid: 4326, type: 'MULTILINESTRING' });
    expect(of('car_imovel', 'centroid')).toMatchObject({ srid: 4326, type: 'POINT' });
    expect(of('ibama_embargos')).toMatchObject({ srid: 4326 });
    const kinds = await q<{ t: string }>(`SELECT DISTINCT GeometryType(geom) AS t FROM serving.ibama_embargos WHERE geom IS NOT NULL ORDER BY 1`);
    expect(kinds.map((k) => k.t)).toEqual(['MULTIPOLYGON', 'POINT']);
    for (const x of g) expect(x.srid, `${x.rel}.${x.col}`).toBe(4326);
  });

  test('car_sobreposicoes.camada takes the four written values and ICMBio\'s embargo_icmbio; feicao_id is the layer\'s codigo (numero_tad for embargoes, id_embargo for ICMBio\'s)', async () => {
    const rows = await q<{ camada: string; feicao_id: string; known: boolean }>(
      `SELECT o.camada, o.feicao_id,
              CASE o.camada WHEN 'embargo' THEN EXISTS (SELECT 1 FROM serving.ibama_embargos e WHERE e.numero_tad = o.feicao_id)
                            WHEN 'embargo_icmbio' THEN EXISTS (SELECT 1 FROM serving.icmbio_embargos e WHERE e.id_embargo = o.feicao_id)
                            WHEN 'uc' THEN EXISTS (SELECT 1 FROM serving.cnuc_ucs u WHERE u.codigo = o.feicao_id)
                            WHEN 'ti' THEN EXISTS (SELECT 1 FROM serving.funai_tis t WHERE t.codigo = o.feicao_id)
                            WHEN 'quilombo' THEN EXISTS (SELECT 1 FROM serving.incra_quilombos k WHERE k.codigo = o.feicao_id) END AS known
         FROM serving.car_sobreposicoes o`);
    expect([...new Set(rows.map((r) => r.camada))].sort()).toEqual(['embargo', 'embargo_icmbio', 'quilombo', 'ti', 'uc']);
    for (const r of rows) expect(r.known, `${r.camada} ${r.feicao_id}`).toBe(true);
  });
});

describe('§4 rate limit and quota: the plan table', () => {
  // Starter 30/50, Growth 60/100, Professional 120/200, Scale 300/500, Enterprise 600/700.
  const TABLE: Record<Plan, [number, number]> = { starter: [30, 50], growth: [60, 100], professional: [120, 200], scale: [300, 500], enterprise: [600, 700] };

  test('X-RateLimit-Limit and X-Quota-Limit of each plan', async () => {
    expect([...PLANS].sort()).toEqual(Object.keys(TABLE).sort());
    for (const plan of PLANS) {
      const k = await liveKey(plan);
      const r = await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key });
      expect(r.status).toBe(200);
      expect([r.headers.get('x-ratelimit-limit'), r.headers.get('x-quota-limit')], plan).toEqual(TABLE[plan].map(String));
      expect(r.headers.get('x-quota-used'), plan).toBe('1');
    }
  });

  test('openapi.json and health need no key and are never billed, even when a live key is sent', async () => {
    const k = await liveKey('starter');
    for (const p of ['/v1/openapi.json', '/v1/health']) {
      for (const key of [undefined, k.key]) {
        const r = await call(fx.api.base, p, { key });
        expect(r.status, p).toBe(200);
        expect(r.headers.get('x-request-id'), p).toMatch(/^req_/);
      }
    }
    const used = await q(`SELECT coalesce(sum(used), 0)::int AS n FROM platform.usage_months WHERE key_id = $1`, [k.id]);
    expect(used[0].n).toBe(0);
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('1');
  });
});

describe('§4 parameter bounds and defaults, as the route schemas (and so the OpenAPI document) declare them', () => {
  test('by-geometry min_overlap 0..1 default 0, limit default 100 max 1000; page sizes of the reference', async () => {
    const doc = (await call(fx.api.base, '/v1/openapi.json')).body;
    const body = doc.paths['/v1/car/by-geometry'].post.requestBody.content['application/json'].schema.properties;
    expect(body.min_overlap).toMatchObject({ minimum: 0, maximum: 1, default: 0 });
    expect(body.limit).toMatchObject({ minimum: 1, maximum: 1000, default: 100 });
    const query = (p: string, name: string) => doc.paths[p].get.parameters.find((x: { in: string; name: string }) => x.in === 'query' && x.name === name).schema;
    expect(query('/v1/car/by-document/{documento}', 'limit')).toMatchObject({ minimum: 1, maximum: 100, default: 25 });
    expect(query('/v1/car/history', 'limit')).toMatchObject({ minimum: 1, maximum: 100, default: 25 });
    expect(query('/v1/socio/search', 'limit')).toMatchObject({ minimum: 1, maximum: 50, default: 20 });
    expect(query('/v1/socio/search', 'q')).toMatchObject({ minLength: 3 });
    const layers = doc.paths['/v1/enriquecimento/territorial'].post.requestBody.content['application/json'].schema;
    expect(layers.required ?? []).not.toContain('layers');
    expect(layers.properties.layers.items.enum).toEqual(['ti', 'uc', 'quilombo', 'zarc', 'rodovias']);
  });
});

describe('§4 X-LGPD-Base-Legal', () => {
  const BASES = ['consentimento', 'obrigacao_legal', 'politicas_publicas', 'estudos_pesquisa', 'execucao_contrato',
    'exercicio_direitos', 'protecao_vida', 'tutela_saude', 'legitimo_interesse', 'protecao_credito'];

  test('the ten legal bases are accepted and recorded with the history entry', async () => {
    const k = await liveKey();
    for (const b of BASES) expect((await call(fx.api.base, `/v1/car/by-document/${JOSE_CPF}`, { key: k.key, headers: { 'x-lgpd-base-legal': b } })).status, b).toBe(200);
    const h = await call(fx.api.base, `/v1/car/history?limit=${BASES.length}`, { key: k.key });
    expect(h.body.results.map((x: { base_legal?: string }) => x.base_legal)).toEqual([...BASES].reverse());
  });

  test('another value → 400 invalid_request naming the header, on every authenticated route', async () => {
    const k = await liveKey();
    const bad = { 'x-lgpd-base-legal': 'curiosidade' };
    const requests: [string, { body?: unknown }][] = [
      [`/v1/car/by-document/${JOSE_CPF}`, {}],
      [`/v1/car/${GO1}`, {}],
      ['/v1/car/history', {}],
      ['/v1/socio/search?q=agropecuaria', {}],
      ['/v1/socio/cpf/52998224725', {}],
      ['/v1/car/by-geometry', { body: { geometry: SQUARE } }],
      ['/v1/enriquecimento/territorial', { body: { geometry: SQUARE, layers: ['uc'] } }],
    ];
    for (const [p, o] of requests) {
      const e = expectEnvelope(await call(fx.api.base, p, { key: k.key, headers: bad, ...o }), 400, 'invalid_request');
      expect(e.message, p).toMatch(/^x-lgpd-base-legal: /);
    }
    // none of them was billed
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).headers.get('x-quota-used')).toBe('1');
  });
});

describe('§4 GET /car/history: newest first', () => {
  test('with two `agro serve` processes sharing the database: by the time of the request, on every page', async () => {
    const [a, b] = await Promise.all([serveProcess(fx.db.url, fx.db.dataDir), serveProcess(fx.db.url, fx.db.dataDir)]);
    try {
      for (let i = 0; i < 3; i++) {
        const k = await liveKey();
        // older through a (its row waits in a's buffer up to 200 ms), newer through b, whose
        // history read writes b's buffer at once
        const older = await call(a.base, `/v1/car/${GO1}`, { key: k.key });
        const newer = await call(b.base, `/v1/car/${GO1}?geometry=true`, { key: k.key });
        const first = await call(b.base, '/v1/car/history', { key: k.key });
        expect(first.status).toBe(200);
        await new Promise((r) => setTimeout(r, 1_000)); // a's buffer is written by now
        const ids = [first, newer, older].map((r) => r.headers.get('x-request-id'));
        const h = await call(b.base, '/v1/car/history', { key: k.key });
        expect(h.body.results.map((x: { id: string }) => x.id), `round ${i}`).toEqual(ids);
        const times = h.body.results.map((x: { created_at: string }) => x.created_at);
        expect([...times].sort().reverse()).toEqual(times);
        // page by page, the same order
        const paged: string[] = [];
        for (let cursor: string | null = null, n = 0; n < 5; n++) {
          const p: Awaited<ReturnType<typeof call>> = await call(a.base, `/v1/car/history?limit=1${cursor ? `&cursor=${cursor}` : ''}`, { key: k.key });
          paged.push(...p.body.results.map((x: { id: string }) => x.id));
          cursor = p.body.next_cursor;
          if (!cursor) break;
        }
        expect(paged.slice(-3)).toEqual(ids);
      }
    } finally {
      expect(await a.stop()).toBe(0);
      expect(await b.stop()).toBe(0);
    }
  }, 120_000);
});

describe('§4 Idempotency-Key: scoped to (key, method, path)', () => {
  test('the same Idempotency-Key on the other POST route, or from another API key, is a request of its own', async () => {
    const [a, b, c] = [await liveKey(), await liveKey(), await liveKey()];
    const idem = { 'idempotency-key': 'contract-scope-1' };
    const first = await call(fx.api.base, '/v1/car/by-geometry', { key: a.key, headers: idem, body: { geometry: SQUARE } });
    expect(first.status).toBe(200);
    const again = await call(fx.api.base, '/v1/car/by-geometry', { key: a.key, headers: idem, body: { geometry: SQUARE } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    // another path, another body: not a reuse (422), its own answer
    const other = await call(fx.api.base, '/v1/enriquecimento/territorial', { key: a.key, headers: idem, body: { geometry: SQUARE, layers: ['uc'] } });
    expect(other.status).toBe(200);
    expect(other.headers.get('idempotent-replayed')).toBeNull();
    // another API key, same path and body: its own answer, billed to it
    const b1 = await call(fx.api.base, '/v1/car/by-geometry', { key: b.key, headers: idem, body: { geometry: SQUARE } });
    expect(b1.status).toBe(200);
    expect(b1.headers.get('idempotent-replayed')).toBeNull();
    expect(b1.headers.get('x-quota-used')).toBe('1');
    // another API key, other body: not 422 idempotency_key_reused (the first key's entry is not its)
    const c1 = await call(fx.api.base, '/v1/car/by-geometry', { key: c.key, headers: idem, body: { geometry: SQUARE, min_overlap: 0.5 } });
    expect(c1.status).toBe(200);
    expect(c1.headers.get('idempotent-replayed')).toBeNull();
  });
});

const AGRO = path.resolve(__dirname, '../bin/agro.mjs');
const agro = (...args: string[]) => {
  const r = spawnSync(process.execPath, [AGRO, ...args], {
    env: { ...process.env, DATABASE_URL: fx.db.url, AGRO_DATA_DIR: fx.db.dataDir, LOG_LEVEL: 'warn', AGRO_WEBHOOKS_ALLOW_PRIVATE: '1' }, encoding: 'utf8', timeout: 300_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

describe('§1 command line', () => {
  test('--help names every command and option of the §1 table as written', () => {
    const r = agro('--help');
    expect(r.code).toBe(0);
    const forms = [
      'db start|stop|status|url', 'migrate', 'run <pipeline> [--source S] [--uf UF] [--as-of DATE] [--force]', 'nightly [--sources official|fixtures]',
      'backfill <pipeline> --as-of DATE --source S', 'snapshots [dataset] [--uf UF]', 'rollback <dataset> [--uf UF]', 'publish <snapshot_id>',
      'report <run_id|snapshot_id> [--format json|html] [--out FILE]', 'serve [--port 8080] [--host 127.0.0.1]', 'schedule',
      'keys create --env test|live --plan PLAN [--name N]', 'keys list', 'keys revoke <id>', 'webhooks add --key <key_id> --url URL --events a,b [--secret',
      'monitors add --key <key_id> (car <numero> | cnpj <cnpj>)', 'webhooks deliver [--once]', 'webhooks replay <event_id>', 'runs [pipeline] [--limit N]',
      'keys rotate <id>', 'sandbox load', 'monitors list', 'monitors remove <id>', 'webhooks list', 'webhooks remove <id>', 'keep <snapshot_id>', 'doctor',
    ];
    for (const f of forms) expect(r.stdout, f).toContain(f);
    // "one binary, agro (run as npx agro … from the checkout)"
    const npx = spawnSync('npx', ['--no-install', 'agro', '--help'], { cwd: path.resolve(__dirname, '..'), encoding: 'utf8', timeout: 60_000 });
    expect(npx.status, npx.stderr).toBe(0);
    expect(npx.stdout).toBe(r.stdout);
    expect(r.stdout).toContain('pipelines: ' + ['ibge-municipios', 'dnit-snv', 'funai-tis', 'cnuc-ucs', 'incra-quilombos', 'ibama-embargos', 'icmbio-embargos', 'zarc', 'sicar', 'car-titulares', 'receita-cnpj'].join(', '));
  });

  test('every command that prints a result, with --json: exactly one JSON object on stdout, exit 0', async () => {
    const one = (...args: string[]) => {
      const r = agro(...args, '--json');
      const lines = r.stdout.split('\n').filter(Boolean);
      expect(lines, `${args.join(' ')}: ${r.stdout.slice(0, 300)} ${r.stderr.slice(-500)}`).toHaveLength(1);
      const o = JSON.parse(lines[0]);
      expect(typeof o === 'object' && o !== null && !Array.isArray(o), args.join(' ')).toBe(true);
      expect(o.error, `${args.join(' ')}: ${lines[0].slice(0, 300)}`).toBeUndefined();
      expect(r.code, args.join(' ')).toBe(0);
      return o;
    };
    const [go] = await q<{ snapshot_id: string; run_id: string }>(`SELECT snapshot_id, run_id FROM serving.snapshots WHERE dataset = 'sicar' AND uf = 'GO' AND status = 'current'`);
    one('db', 'url');
    one('db', 'status');
    one('migrate');
    expect(one('snapshots').snapshots.length).toBeGreaterThanOrEqual(fixtureRuns().length);
    one('snapshots', 'sicar', '--uf', 'GO');
    one('runs');
    one('runs', 'sicar', '--limit', '1');
    one('report', String(go.snapshot_id));
    one('report', `r${go.run_id}`, '--format', 'html');
    one('keep', String(go.snapshot_id));
    one('schedule', '--check');
    one('doctor');
    const k = one('keys', 'create', '--env', 'live', '--plan', 'starter', '--name', 'cli');
    expect(k).toMatchObject({ id: expect.any(String), key: expect.stringMatching(/^ck_live_/) });
    expect(one('keys', 'create', '--env', 'test', '--plan', 'growth').key).toMatch(/^ck_test_/);
    one('keys', 'list');
    const m = one('monitors', 'add', '--key', k.id, 'car', GO1);
    one('monitors', 'add', '--key', k.id, 'cnpj', '45.723.174/0001-10');
    one('monitors', 'list');
    one('monitors', 'remove', m.id);
    const hook = one('webhooks', 'add', '--key', k.id, '--url', 'http://127.0.0.1:9/hook', '--events', 'quota.threshold,car.situacao.alterada');
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/);
    one('webhooks', 'list');
    const test = one('webhooks', 'test', hook.id);
    one('webhooks', 'deliver', '--once');
    one('webhooks', 'replay', test.event_id);
    one('webhooks', 'log', hook.id);
    one('webhooks', 'remove', hook.id);
    const rotated = one('keys', 'rotate', k.id);
    expect(rotated.key).toMatch(/^ck_live_/);
    one('keys', 'revoke', rotated.id);
    // rollback and publish of another snapshot: test/cli.test.ts (one snapshot per dataset here)
    one('publish', String(go.snapshot_id));
  });

  test('agro sandbox load --json: one object, exit 0, every fixture published; ck_test_ keys then read it, never billed', async () => {
    const r = agro('sandbox', 'load', '--json');
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const lines = r.stdout.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toEqual({ database: expect.stringMatching(/_sandbox$/), published: fixtureRuns().length });
    const t = await createKey(fx.db.pool, { env: 'test', plan: 'starter', name: 'sandbox' });
    const got = await call(fx.api.base, `/v1/car/${GO1}`, { key: t.key });
    expect(got.status).toBe(200);
    expect(got.headers.get('x-quota-used')).toBe('0');
  });
});

describe('§5 delivery: POST, 10 s timeout, only 2xx is success', () => {
  test('the default timeout is 10 s: an answer after 8 s is delivered, a receiver that never answers fails at 10 s', async () => {
    expect(DELIVERY_TIMEOUT_MS).toBe(10_000);
    const methods: string[] = [];
    const server = http.createServer((req, res) => {
      methods.push(req.method!);
      req.resume();
      if (req.url === '/slow') setTimeout(() => res.writeHead(204).end(), 8_000);
      // '/never': no answer
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const [slow, never] = await Promise.all([
        postWebhook(`${base}/slow`, '{}', {}, { allowPrivate: true }),
        postWebhook(`${base}/never`, '{}', {}, { allowPrivate: true }),
      ]);
      expect(slow).toMatchObject({ ok: true, status: 204 });
      expect(never).toMatchObject({ ok: false, status: null });
      expect(never.error).toMatch(/within 10000 ms/);
      expect(never.durationMs).toBeGreaterThanOrEqual(9_900);
      expect(never.durationMs).toBeLessThan(12_000);
      expect(methods).toEqual(['POST', 'POST']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 30_000);
});
