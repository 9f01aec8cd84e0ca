// Hostile input to every route: NUL bytes, a 5,000-character path segment, a 2 MB body,
// non-JSON, wrong types, coordinates out of range, emoji and SQL-looking strings. Each
// answer must be a 4xx error envelope with its X-Request-Id, and the service must be intact.
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { beforeAll, describe, expect, test } from 'vitest';
import { HistoryWriter } from '../src/platform/history-writer.ts';
import { maskRequestUrl } from '../src/privacy.ts';
import { createKey } from '../src/platform/keys.ts';
import { call, expectEnvelope, fixtureApi, newKey, startApi, type Reply } from './helpers/api.ts';

const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const ROOT = path.resolve(__dirname, '..');
// One key's burst of geometries (the event-loop test) is not the per-key in-flight limit's (test/api-key-concurrency.test.ts).
const fx = fixtureApi({ AGRO_API_KEY_MAX_IN_FLIGHT: '1000' });
let key: string;

beforeAll(async () => {
  key = await newKey(fx.db);
});

function expect4xx(r: Reply, what: string) {
  if (r.status < 400 || r.status > 499) throw new Error(`${what}: expected a 4xx envelope, got ${r.status} ${r.text.slice(0, 200)}`);
  expectEnvelope(r, r.status, r.body?.error?.code);
}

const NASTY = [
  '\u0000', 'a\u0000b', '😀🔥', "'; DROP TABLE platform.api_keys; --", "' OR '1'='1", '1; SELECT pg_sleep(10)', '$1', '%s%n',
  '../../etc/passwd', '<script>alert(1)</script>', '\u202e\u200b', 'x'.repeat(5_000), '{"$where": 1}', '-1', '1e309', 'NaN',
];
const enc = encodeURIComponent;

/** A raw HTTP request (bytes fetch would refuse to send); returns status, headers and body. */
function raw(request: Buffer | string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(fx.api.base);
    const s = net.connect(Number(port), '127.0.0.1');
    const chunks: Buffer[] = [];
    s.on('data', (d) => chunks.push(d));
    s.on('error', reject);
    s.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const headers = new Headers();
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers.set(l.slice(0, i).trim(), l.slice(i + 1).trim());
      }
      const body = rest.join('\r\n\r\n');
      let parsed = null;
      try {
        parsed = JSON.parse(body);
      } catch {
        /* not JSON */
      }
      resolve({ status: Number(lines[0].split(' ')[1]), headers, body: parsed, text: body });
    });
    s.write(request);
    setTimeout(() => s.end(), 300);
  });
}

describe('hostile input: a 4xx envelope every time', () => {
  test('path parameters: NUL, emoji, SQL, 5,000 characters', async () => {
    for (const v of NASTY) {
      expect4xx(await call(fx.api.base, `/v1/car/${enc(v)}`, { key }), `car ${JSON.stringify(v.slice(0, 20))}`);
      expect4xx(await call(fx.api.base, `/v1/car/by-document/${enc(v)}`, { key }), `by-document ${JSON.stringify(v.slice(0, 20))}`);
      expect4xx(await call(fx.api.base, `/v1/${enc(v)}`, { key }), `route ${JSON.stringify(v.slice(0, 20))}`);
      expect4xx(await call(fx.api.base, `/v1/socio/cnpj/${enc(v)}`, { key }), `socio/cnpj ${JSON.stringify(v.slice(0, 20))}`);
      expect4xx(await call(fx.api.base, `/v1/socio/cpf/${enc(v)}`, { key }), `socio/cpf ${JSON.stringify(v.slice(0, 20))}`);
      expect4xx(await call(fx.api.base, `/v1/socio/search?q=${enc(v)}&uf=${enc(v)}`, { key }), `socio/search ${JSON.stringify(v.slice(0, 20))}`);
    }
    // a well-formed number for a state with nothing loaded, written with SQL in lower case hex: still a 4xx
    expect4xx(await call(fx.api.base, `/v1/car/go-5208707-${'f'.repeat(32)}`, { key }), 'lower-case unknown');
  });

  test('query parameters: wrong types, NUL, emoji, SQL on every GET route', async () => {
    const car = `/v1/car/${GO1}`;
    const doc = '/v1/car/by-document/52998224725';
    const cnpj = '/v1/socio/cnpj/12ABC34501DE35';
    const cpf = '/v1/socio/cpf/52998224725';
    const search = '/v1/socio/search';
    const bad = [
      `${car}?geometry=maybe`, `${car}?as_of=yesterday`, `${car}?as_of=2025-02-30`, `${car}?include=1,2,3`, `${car}?include=${enc("ucs';--")}`,
      `${car}?as_of=${enc("2025-01-01' OR '1'='1")}`, `${car}?include=${enc('😀')}`, `${car}?include=${'ucs,'.repeat(2000)}`,
      `${doc}?limit=abc`, `${doc}?limit=-1`, `${doc}?limit=1e309`, `${doc}?uf=${enc("'; DROP")}`, `${doc}?uf=${enc('😀')}`,
      `${doc}?situacao=${enc("ativo' OR 1=1")}`, `${doc}?cursor=${enc("' OR 1=1 --")}`, `${doc}?cursor=${enc('\u0000')}`,
      `${doc}?cursor=${'A'.repeat(5000)}.${'B'.repeat(22)}`, `${doc}?geometry=${enc('\u0000')}`, `${doc}?as_of=${enc('😀')}`,
      `${cnpj}?as_of=yesterday`, `${cnpj}?as_of=${enc("2025-01-01' OR '1'='1")}`, `${cnpj}?as_of=${enc('\u0000')}`,
      `${cpf}?nome=`, `${cpf}?nome=${enc('...')}`, `${cpf}?nome=${'x'.repeat(5000)}`, `${cpf}?as_of=${enc('😀')}`,
      `${cpf}`.replace('52998224725', '52998224726'), `${search}`, `${search}?q=ab`, `${search}?q=${enc('\u0000\u0000')}`, `${search}?q=${enc('   ')}`, `${search}?q=${enc('ab\u0000cd')}`,
      `${search}?q=${'x'.repeat(5000)}`, `${search}?q=abc&limit=abc`, `${search}?q=abc&limit=1e309`, `${search}?q=abc&limit=-1`,
      `${search}?q=abc&uf=${enc("'; DROP")}`, `${search}?q=abc&uf=ZZ`, `${search}?q=abc&situacao=${enc("ativa' OR 1=1")}`,
      `${search}?q=abc&cnae=${enc("0115-6/00' --")}`, `${search}?q=abc&as_of=${enc('😀')}`,
    ];
    for (const p of bad) expect4xx(await call(fx.api.base, p, { key }), p.slice(0, 80));
    // SQL-looking and odd search terms are data, not code: an answer, never a 5xx
    for (const v of ["'; DROP TABLE snap.cnpj_empresas__template; --", "%' OR '1'='1", '😀😀😀', '\\\\%%__']) {
      expect((await call(fx.api.base, `${search}?q=${enc(v)}`, { key })).status).toBe(200);
    }
    // health and openapi take no parameters: junk is ignored, never a 5xx
    for (const p of [`/v1/health?x=${enc("'; DROP")}`, `/v1/openapi.json?${enc('😀')}=1`]) expect((await call(fx.api.base, p)).status).toBe(200);
  });

  test('headers: hostile Authorization and LGPD basis', async () => {
    for (const v of ["' OR 1=1 --", 'ck_live_' + 'a'.repeat(5000), 'ck_live_%00', 'x'.repeat(8000)]) {
      expect4xx(await call(fx.api.base, `/v1/car/${GO1}`, { headers: { authorization: `Bearer ${v}` } }), `auth ${v.slice(0, 20)}`);
    }
    expect4xx(await call(fx.api.base, '/v1/car/by-document/52998224725', { key, headers: { 'x-lgpd-base-legal': "consentimento'; --" } }), 'lgpd');
    // non-ASCII and NUL in a header: fetch refuses to send them, a raw client does
    const lgpd = await raw(Buffer.concat([Buffer.from(`GET /v1/car/by-document/52998224725 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nX-LGPD-Base-Legal: `), Buffer.from('😀', 'utf8'), Buffer.from('\r\nConnection: close\r\n\r\n')]));
    expect4xx(lgpd, 'emoji header');
    expect4xx(await raw(`GET /v1/car/${GO1} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\u0000\r\nConnection: close\r\n\r\n`), 'NUL header');
  });

  test('raw NUL bytes and a 5,000-character segment in the request line', async () => {
    expect4xx(await raw(`GET /v1/car/GO\u0000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 'NUL in the path');
    expect4xx(await raw(`GET /v1/car/${'9'.repeat(5000)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`), 'long segment');
    expect4xx(await raw(`GET /v1/${'z'.repeat(5000)}/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`), 'long unknown route');
    expect4xx(await raw('NONSENSE\r\n\r\n'), 'not HTTP');
  });

  test('bodies: 2 MB, non-JSON, wrong types, NUL, emoji, SQL, coordinates out of range on both POST routes', async () => {
    const square = { type: 'Polygon', coordinates: [[[-49.34, -16.59], [-49.3, -16.59], [-49.3, -16.55], [-49.34, -16.55], [-49.34, -16.59]]] };
    for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) {
      const json = (raw: string, type = 'application/json') => call(fx.api.base, route, { key, raw, headers: { 'content-type': type } });
      const body = (b: unknown) => call(fx.api.base, route, { key, body: b });
      expect4xx(await json(JSON.stringify({ geometry: square, pad: 'x'.repeat(2 * 1024 * 1024) })), `${route} 2 MB`);
      expect4xx(await json('not json at all'), `${route} non-JSON`);
      expect4xx(await json('{"geometry": {"type": "Polygon", "coordinates": [[[1,2],[3,4]'), `${route} truncated JSON`);
      expect4xx(await json('{"geometry": 1}', 'text/plain'), `${route} text/plain`);
      expect4xx(await json('<xml/>', 'application/xml'), `${route} xml`);
      expect4xx(await json(''), `${route} empty body`);
      expect4xx(await call(fx.api.base, route, { key, method: 'POST' }), `${route} no body`);
      expect4xx(await json('null'), `${route} null`);
      expect4xx(await json('[1,2,3]'), `${route} array`);
      expect4xx(await json('"😀"'), `${route} string`);
      expect4xx(await json('{"__proto__": {"polluted": true}, "geometry": 1}'), `${route} __proto__`);
      for (const geometry of [
        'POLYGON((0 0, 1 0, 1 1, 0 0))', 42, [], {}, { type: 'Polygon' }, { type: 'Polygon', coordinates: 'x' },
        { type: "Polygon'; DROP TABLE snap.car_imovel__template; --", coordinates: [] },
        { type: 'Polygon', coordinates: [[['\u0000', 0], [1, 0], [1, 1], ['\u0000', 0]]] },
        { type: 'Polygon', coordinates: [[[1e309, 0], [1, 0], [1, 1], [1e309, 0]]] },
        { type: 'Polygon', coordinates: [[[-181, 0], [1, 0], [1, 1], [-181, 0]]] },
        { type: 'Polygon', coordinates: [[[0, 91], [1, 0], [1, 1], [0, 91]]] },
        { type: 'Polygon', coordinates: [[[0, 0, 0, 0], [1, 0], [1, 1], [0, 0]]] },
        { type: 'Polygon', coordinates: [[[0, 0], [0, 0], [0, 0], [0, 0]]] },
        { type: 'GeometryCollection', geometries: [square] },
        { type: 'Feature', geometry: square },
        { type: '😀', coordinates: square.coordinates },
      ]) {
        expect4xx(await body({ geometry }), `${route} geometry ${JSON.stringify(geometry).slice(0, 60)}`);
      }
      expect4xx(await body({ geometry: square, min_overlap: 'abc', limit: 'x' }), `${route} wrong types`);
      expect4xx(await body({ geometry: square, layers: { ti: true } }), `${route} layers object`);
      expect4xx(await body({ geometry: square, layers: ["ti'; --"] }), `${route} layers SQL`);
      expect4xx(await body({ geometry: square, limit: -5 }), `${route} negative limit`);
      expect4xx(await body({ geometry: square, min_overlap: -0.1 }), `${route} negative min_overlap`);
    }
  });

  test('a body nested thousands of levels deep (in a field, a foreign member, a layer name, the geometry type): 400, never a stack overflow\'s 500', async () => {
    const deep = '['.repeat(5_000) + ']'.repeat(5_000);
    const square = '{"type":"Polygon","coordinates":[[[-49.34,-16.59],[-49.3,-16.59],[-49.3,-16.55],[-49.34,-16.59]]]';
    for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) {
      for (const [what, raw] of [
        ['geometry type', `{"geometry":{"type":${deep}}}`],
        ['foreign member', `{"geometry":${square},"x":${deep}}}`],
        ['layers', `{"layers":${deep},"geometry":${square}}}`],
        ['unknown field', `{"geometry":${square}},"pad":${deep}}`],
      ]) {
        for (const headers of [{ 'content-type': 'application/json' }, { 'content-type': 'application/json', 'idempotency-key': `deep-${what}` }] as Record<string, string>[]) {
          const r = await call(fx.api.base, route, { key, raw, headers });
          expect4xx(r, `${route} ${what}`);
        }
      }
    }
    // The panel's routes take JSON bodies too (their failures are pages, not the envelope).
    const panel = await call(fx.api.base, '/panel/login', { raw: `{"api_key":${deep}}`, headers: { 'content-type': 'application/json' } });
    expect([panel.status, panel.headers.get('content-type')]).toEqual([400, 'text/html; charset=utf-8']);
    const ok = await call(fx.api.base, `/v1/car/${GO1}`, { key });
    expect(ok.status).toBe(200);
  });

  test('other methods on the routes, and the service is intact afterwards', async () => {
    expect4xx(await call(fx.api.base, `/v1/car/${GO1}`, { key, method: 'DELETE' }), 'DELETE');
    expect4xx(await call(fx.api.base, '/v1/car/by-geometry', { key, method: 'GET' }), 'GET by-geometry');
    expect4xx(await call(fx.api.base, '/v1/health', { method: 'PUT', body: {} }), 'PUT health');
    const ok = await call(fx.api.base, `/v1/car/${GO1}`, { key });
    expect(ok.status).toBe(200);
    expect((await fx.db.pool.query('SELECT count(*)::int AS n FROM platform.api_keys')).rows[0].n).toBe(1);
    expect((await call(fx.api.base, '/v1/health')).status).toBe(200);
  });
});

// ---- found by the hostile-request sweep (each failed before its fix) ----------------------

const SQUARE = { type: 'Polygon', coordinates: [[[-49.34, -16.59], [-49.3, -16.59], [-49.3, -16.55], [-49.34, -16.55], [-49.34, -16.59]]] };

describe('the query history survives hostile paths', () => {
  test('a NUL byte in a path (%00) is stored escaped and does not stop the history of later requests', async () => {
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'enterprise', name: 'nul' });
    expect4xx(await call(fx.api.base, `/v1/car/${GO1}%00`, { key: k.key }), 'NUL');
    expect((await call(fx.api.base, `/v1/car/${GO1}`, { key: k.key })).status).toBe(200);
    await fx.api.app.flushHistory();
    const rows = (await fx.db.pool.query(`SELECT path, status FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id])).rows;
    expect(rows).toEqual([{ path: `/v1/car/${GO1}%00`, status: 400 }, { path: `/v1/car/${GO1}`, status: 200 }]);
    const h = await call(fx.api.base, '/v1/car/history', { key: k.key });
    expect(h.body.results.map((r: { status: number }) => r.status)).toEqual([200, 400]);
  });

  test('a row the database refuses is dropped alone: the rest of its batch is written, the refusal counted', async () => {
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'starter', name: 'writer' });
    const w = new HistoryWriter(fx.db.pool, fx.db.log);
    const row = (id: string, path: string) => ({ id, keyId: k.id, method: 'GET', path, status: 200, billable: false, lgpdBase: null, createdAt: new Date() });
    try {
      for (const [id, p] of [['req_a', '/a'], ['req_b', '/b\u0000'], ['req_c', '/c']]) w.push(row(id, p));
      await w.flush();
      expect((await fx.db.pool.query(`SELECT id, path FROM platform.requests WHERE key_id = $1 ORDER BY seq`, [k.id])).rows).toEqual([{ id: 'req_a', path: '/a' }, { id: 'req_c', path: '/c' }]);
      expect([w.buffered, w.refused, w.dropped]).toEqual([0, 1, 0]);
    } finally {
      await w.stop();
    }
  });
});

describe('numbers that are not finite', () => {
  test('"Infinity", "-Infinity" and "1e309" where a number is expected, year 0000 where a date is: 400 naming the parameter, never a pass or a SQL error', async () => {
    for (const v of ['Infinity', '-Infinity', '1e309', '-1e309']) {
      for (const p of [`/v1/car/by-document/52998224725?limit=${v}`, `/v1/socio/search?q=agro&limit=${v}`, `/v1/car/history?limit=${v}`]) {
        expect(expectEnvelope(await call(fx.api.base, p, { key }), 400, 'invalid_request').message, p).toBe('limit: must be a finite number');
      }
      for (const [field, route] of [['min_overlap', '/v1/car/by-geometry'], ['limit', '/v1/car/by-geometry']] as const) {
        const r = await call(fx.api.base, route, { key, body: { geometry: SQUARE, [field]: v } });
        expect(expectEnvelope(r, 400, 'invalid_request').message, `${field} ${v}`).toBe(`${field}: must be a finite number`);
      }
    }
    // year 0000 is a date to JavaScript, not to PostgreSQL: refused before the query, naming the parameter
    for (const p of ['from', 'to']) {
      expect(expectEnvelope(await call(fx.api.base, `/v1/car/history?${p}=0000-01-01`, { key }), 400, 'invalid_request').message).toBe(`${p}: not a calendar date (YYYY-MM-DD)`);
    }
    // finite values written as strings are still read as numbers
    expect((await call(fx.api.base, '/v1/car/by-geometry', { key, body: { geometry: SQUARE, min_overlap: '0.5', limit: '10' } })).status).toBe(200);
  });
});

describe('requests the router or node refuse: the envelope too', () => {
  test('a malformed percent-escape in the path, an over-long path parameter', async () => {
    for (const p of ['/v1/car/%ZZ', '/v1/car/%E0%A4%A', '/v1/socio/cpf/%C0%AE%C0%AE%2F']) {
      expect(expectEnvelope(await call(fx.api.base, p, { key }), 400, 'invalid_request').message, p).toMatch(/^path: /);
    }
    const long = await call(fx.api.base, `/v1/socio/cpf/${'1'.repeat(9000)}`, { key });
    expect(expectEnvelope(long, 414, 'invalid_request').message).toBe('path: a path parameter is too long');
    expect(long.text).not.toContain('1'.repeat(100));
  });

  test('HTTP/1.1 without Host: 400 envelope; two Authorization headers: 401', async () => {
    const noHost = await raw(`GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n`);
    expect(expectEnvelope(noHost, 400, 'invalid_request').message).toMatch(/Host header/);
    expect((await raw(`GET /v1/health HTTP/1.0\r\n\r\n`)).status).toBe(200); // HTTP/1.0 has no Host requirement
    const other = await newKey(fx.db, 'live', 'starter');
    const two = await raw(`GET /v1/car/${GO1} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nAuthorization: Bearer ${other}\r\nConnection: close\r\n\r\n`);
    expect(expectEnvelope(two, 401, 'unauthorized').message).toMatch(/one Authorization header/);
  });

  test('CONNECT: a 405 envelope, not a dropped socket; Expect other than 100-continue: a 417 envelope; the docs answer with a query string too, without a key', async () => {
    expect(expectEnvelope(await raw(`CONNECT 127.0.0.1:5432 HTTP/1.1\r\nHost: x\r\n\r\n`), 405, 'method_not_allowed').message).toMatch(/CONNECT/);
    const expectation = await raw(`POST /v1/car/by-geometry HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 200-ok\r\n\r\n{}`);
    expect(expectEnvelope(expectation, 417, 'invalid_request').message).toMatch(/100-continue/);
    // clients that reset the connection right after CONNECT (or Expect) do not take the process down
    const { port } = new URL(fx.api.base);
    for (let i = 0; i < 20; i++) {
      const s = net.connect(Number(port), '127.0.0.1');
      s.on('error', () => {});
      s.write(`${i % 2 ? 'CONNECT 127.0.0.1:5432' : 'POST /v1/car/by-geometry'} HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 5\r\n\r\n${'x'.repeat(100_000)}`);
      s.resetAndDestroy();
    }
    await new Promise((r) => setTimeout(r, 500));
    expect((await call(fx.api.base, '/v1/docs/json?x=1')).status).toBe(200);
    expect((await call(fx.api.base, '/v1/health')).status).toBe(200);
  });

  test('another method on a path that exists: 405 method_not_allowed with Allow, without a key and unbilled; an unknown path stays 404', async () => {
    const post = await call(fx.api.base, `/v1/car/${GO1}`, { method: 'POST', body: {} });
    expect(expectEnvelope(post, 405, 'method_not_allowed').message).toBe(`method not allowed: POST /v1/car/${GO1} (allowed: GET, HEAD)`);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const del = await call(fx.api.base, '/v1/car/by-geometry', { method: 'DELETE', key });
    expectEnvelope(del, 405, 'method_not_allowed');
    // (GET answers there too: as /car/{numero}, the router's parameter route for GET)
    expect(del.headers.get('allow')).toBe('GET, HEAD, POST');
    expect(del.headers.get('x-quota-used')).toBeNull();
    // a static path beside a parameter one: both routes' methods
    expect((await call(fx.api.base, '/v1/car/history', { method: 'PUT', body: {} })).headers.get('allow')).toBe('GET, HEAD');
    expect((await call(fx.api.base, '/v1/enriquecimento/territorial', { method: 'GET' })).headers.get('allow')).toBe('POST');
    // the CPF in a path is masked in the message, as in a 404's
    const cpf = expectEnvelope(await call(fx.api.base, '/v1/car/by-document/52998224725', { method: 'DELETE' }), 405, 'method_not_allowed');
    expect(cpf.message).not.toContain('52998224725');
    expectEnvelope(await call(fx.api.base, '/v1/car', { method: 'POST', body: {} }), 404, 'not_found');
    expectEnvelope(await call(fx.api.base, '/v1/nada/aqui', { method: 'DELETE' }), 404, 'not_found');
    // A route that answers the method itself and finds nothing (the docs' static files, an
    // escaped '/' or '..' in the name): 404, not a 405 whose Allow names the method sent.
    for (const p of ['/v1/docs/static/..%2f..%2fpackage.json', '/v1/docs/static/nada.js']) {
      const r = await call(fx.api.base, p);
      expectEnvelope(r, 404, 'not_found');
      expect(r.text).not.toContain('"name": "agro');
    }
  });

  test('a body that trickles in is cut off with a 408 envelope at the request timeout, authenticated or not', async () => {
    const quick = await startApi({ ...fx.db.cfg, api: { ...fx.db.cfg.api, requestTimeoutMs: 1_000 } }, fx.db.url, fx.db);
    try {
      const { port } = new URL(quick.base);
      const trickle = (auth: string) =>
        new Promise<{ ms: number; text: string }>((resolve) => {
          const t0 = Date.now();
          const s = net.connect(Number(port), '127.0.0.1');
          let text = '';
          s.on('data', (d) => (text += d));
          s.on('error', () => {});
          const drip = setInterval(() => s.writable && s.write(' '), 200);
          const give = setTimeout(() => s.destroy(), 8_000);
          s.on('close', () => {
            clearInterval(drip);
            clearTimeout(give);
            resolve({ ms: Date.now() - t0, text });
          });
          s.write(`POST /v1/car/by-geometry HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"geometry":`);
        });
      const [authed, anonymous] = await Promise.all([trickle(`Authorization: Bearer ${key}\r\n`), trickle('')]);
      expect(authed.ms).toBeLessThan(5_000);
      expect(authed.text).toMatch(/^HTTP\/1\.1 408 /);
      expect(authed.text).toMatch(/"code":"request_timeout"/);
      expect(anonymous.ms).toBeLessThan(5_000); // answered 401 at once, then closed at the timeout
      expect(anonymous.text).toMatch(/^HTTP\/1\.1 401 /);
      expect((await call(quick.base, '/v1/health')).status).toBe(200);
    } finally {
      await quick.close();
    }
  }, 30_000);
});

test('a ring with a position repeated right after itself is not self-intersecting (valid GeoJSON, valid to PostGIS)', async () => {
  const c = SQUARE.coordinates[0];
  const repeated = { type: 'Polygon', coordinates: [[c[0], c[0], c[1], c[2], c[2], c[3], c[4]]] };
  for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) {
    const r = await call(fx.api.base, route, { key, body: { geometry: repeated } });
    expect(r.status, `${route} ${r.text.slice(0, 200)}`).toBe(200);
    expect(r.body).toEqual({ ...(await call(fx.api.base, route, { key, body: { geometry: SQUARE } })).body, consultado_em: r.body.consultado_em });
  }
  // a real crossing is still refused
  const bowtie = { type: 'Polygon', coordinates: [[c[0], c[2], c[1], c[3], c[0]]] };
  expect(expectEnvelope(await call(fx.api.base, '/v1/car/by-geometry', { key, body: { geometry: bowtie } }), 422, 'geometry_invalid').message).toMatch(/self-intersecting/);
});

test('10,000-vertex geometries do not hold the event loop (validity is PostGIS\'s job); a crossing among them is still a 422', async () => {
  const ring = (n: number) => {
    const c = Array.from({ length: n }, (_, i) => [-49.32 + 0.01 * Math.cos((2 * Math.PI * i) / n), -16.57 + 0.01 * Math.sin((2 * Math.PI * i) / n)]);
    return [...c, c[0]];
  };
  const valid = { type: 'Polygon', coordinates: [ring(9_999)] };
  const crossed = ring(9_999);
  [crossed[5000], crossed[5001]] = [crossed[5001], crossed[5000]];
  // Event-loop time of this process (server and client): turf's kinks took 310 ms per such
  // geometry on the event loop, 1.9 s for these six; the linear checks take a few ms each.
  for (const route of ['/v1/car/by-geometry', '/v1/enriquecimento/territorial']) await call(fx.api.base, route, { key, body: { geometry: SQUARE } }); // warm
  const before = performance.eventLoopUtilization();
  const answers = await Promise.all([
    ...[0, 1, 2, 3].map(() => call(fx.api.base, '/v1/car/by-geometry', { key, body: { geometry: valid } })),
    call(fx.api.base, '/v1/enriquecimento/territorial', { key, body: { geometry: valid, layers: ['ti'] } }),
    call(fx.api.base, '/v1/car/by-geometry', { key, body: { geometry: { type: 'Polygon', coordinates: [crossed] } } }),
  ]);
  const busyMs = performance.eventLoopUtilization(before).active;
  for (const r of answers.slice(0, 5)) expect(r.status, r.text.slice(0, 200)).toBe(200);
  expect(expectEnvelope(answers[5], 422, 'geometry_invalid').message).toMatch(/self-intersecting \(at \[-49\.3/);
  expect(busyMs).toBeLessThan(900);
}, 60_000);

test('panel forms: a CSRF token in other characters, fields of other JSON types → 4xx, never a 500', async () => {
  const k = await newKey(fx.db, 'live', 'growth');
  const login = await fetch(`${fx.api.base}/panel/login`, { method: 'POST', body: new URLSearchParams({ api_key: k }), redirect: 'manual' });
  expect(login.status).toBe(303);
  const cookie = login.headers.get('set-cookie')!.split(';')[0];
  const csrf = /name="csrf" value="([^"]+)"/.exec(await (await fetch(`${fx.api.base}/panel`, { headers: { cookie } })).text())![1];
  const post = async (path: string, body: string, type = 'application/json') =>
    (await fetch(`${fx.api.base}${path}`, { method: 'POST', headers: { cookie, 'content-type': type }, body, redirect: 'manual' })).status;
  // same number of characters, more bytes
  expect(await post('/panel/keys', new URLSearchParams({ csrf: 'é'.repeat(csrf.length), name: 'x' }).toString(), 'application/x-www-form-urlencoded')).toBe(403);
  expect(await post('/panel/keys', JSON.stringify({ csrf: [csrf] }))).toBe(403);
  expect(await post('/panel/keys', JSON.stringify({ csrf, name: 5, env: { live: 1 } }))).toBe(201);
  expect(await post('/panel/monitors', JSON.stringify({ csrf, kind: 'car', record: { toString: 1 } }))).toBe(422);
  expect(await post('/panel/webhooks', JSON.stringify({ csrf, url: { toString: 1 }, events: [1, {}] }))).toBe(422);
  expect(await post('/panel/login', JSON.stringify({ api_key: { toString: 1 } }))).toBe(401);
  // date filters that are not calendar dates are ignored, not sent to the query
  for (const q of ['from=0000-01-01', 'to=2026-02-30', 'from=2026-13-01&to=0000-00-00', 'from=a&from=b']) {
    const r = await fetch(`${fx.api.base}/panel?${q}`, { headers: { cookie } });
    expect(r.status, q).toBe(200);
    expect(await r.text(), q).toContain('id="history"');
  }
});

describe('the request log and the query history', () => {
  test('no CPF in clear however it is written, no API key sent in the query string (a real `agro serve`)', async () => {
    const k = await createKey(fx.db.pool, { env: 'live', plan: 'enterprise', name: 'log' });
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'agro.mjs'), 'serve', '--port', '0', '--json'], {
      cwd: ROOT, env: { ...process.env, DATABASE_URL: fx.db.url, AGRO_DATA_DIR: fx.db.dataDir, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stderr!.on('data', (d) => (log += d));
    const base = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d) => {
        out += d;
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(out);
        if (m) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`agro serve exited ${code}: ${log.slice(-2000)}`)));
    });
    const written = ['529.982.247.25', '529 982 247 25', ' 52998224725', '5299.8224-725', '052998224725', '52998224725'];
    try {
      for (const w of written) {
        for (const p of [`/v1/car/by-document/${encodeURIComponent(w)}`, `/v1/socio/cpf/${encodeURIComponent(w)}`, `/v1/socio/search?q=${encodeURIComponent(`agro ${w}`)}`]) {
          const r = await call(base, p, { key: k.key });
          expect(r.status, p).toBeLessThan(500);
          expect(r.text, p).not.toMatch(/52998224725|529\D?982\D?247\D?25/);
        }
      }
      expect((await call(base, '/v1/car/by-document/529.982.247.25', { key: k.key })).body.count).toBeGreaterThan(0); // read as the CPF it is
      expectEnvelope(await call(base, `/v1/car/${GO1}?api_key=${k.key}`), 401, 'unauthorized');
    } finally {
      await new Promise((resolve) => {
        child.removeAllListeners('exit');
        child.on('exit', resolve);
        child.kill('SIGTERM');
      });
    }
    expect(log).toMatch(/"msg":"request"/);
    expect(log).toContain('***.982.247-**');
    const stored = (await fx.db.pool.query(`SELECT path FROM platform.requests WHERE key_id = $1`, [k.id])).rows.map((r) => r.path as string);
    expect(stored.length).toBeGreaterThanOrEqual(written.length * 3);
    for (const text of [log, stored.join('\n')]) {
      expect(text).not.toMatch(/52998224725|529\D{0,3}982\D{0,3}247\D{0,3}25|5299\.8224-725/);
      expect(text).not.toContain(k.key.slice(8));
    }
  }, 60_000);
});

test('the URL kept in the log and the history masks every CPF form, and leaves decimal numbers (coordinates) as they are', () => {
  const kept = (u: string) => maskRequestUrl(u, 2048);
  expect(kept('/v1/x?lat=-15.793889012&lon=-47.882778123')).toBe('/v1/x?lat=-15.793889012&lon=-47.882778123');
  expect(kept('/v1/x?bbox=-47.123456789,-15.123456789')).toBe('/v1/x?bbox=-47.123456789,-15.123456789');
  // (the last: no-break spaces between the groups, as a copy from a PDF or a web page has them)
  for (const q of ['agro 5299.8224-725', 'agro 52998224725', 'agro%2052998224725', '529982247.25', 'fulano-52998224725', 'agro 529 982 247 25', 'agro%C2%A0529%C2%A0982%C2%A0247%C2%A025']) {
    expect(kept(`/v1/socio/search?q=${q}`), q).toMatch(/\*\*\*\.982\.247-\*\*/);
    expect(kept(`/v1/socio/search?q=${q}`), q).not.toMatch(/529\D{0,3}982\D{0,3}247\D{0,3}25/);
  }
  // A path segment is masked when the document routes would read it as a CPF, however grouped.
  expect(kept('/v1/car/by-document/529.982.247.25')).toBe('/v1/car/by-document/***.982.247-**');
  expect(kept('/v1/car/by-document/-15.793889012')).toBe('/v1/car/by-document/***.938.890-**');
});
