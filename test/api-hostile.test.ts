// Hostile input to every route: NUL bytes, a 5,000-character path segment, a 2 MB body,
// non-JSON, wrong types, coordinates out of range, emoji and SQL-looking strings. Each
// answer must be a 4xx error envelope with its X-Request-Id, and the service must be intact.
import net from 'node:net';
import { beforeAll, describe, expect, test } from 'vitest';
import { call, expectEnvelope, fixtureApi, newKey, type Reply } from './helpers/api.ts';

const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const fx = fixtureApi();
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
