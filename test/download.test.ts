import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile, mkdir } from 'node:fs/promises';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import zlib from 'node:zlib';
import yazl from 'yazl';
import { fetchSource, joinSource, sha256File, type FetchOptions } from '../src/etl/download.ts';

const UA = 'agro-data-test/1.0 (+tests)';

async function buildZip(files: Array<{ name: string; data: Buffer | string }>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  // Stored, so random data keeps the archive big enough to cut in half.
  for (const f of files) zip.addBuffer(Buffer.from(f.data), f.name, { compress: false });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

interface Hit {
  n: number;
  url: string;
  headers: IncomingHttpHeaders;
  status?: number;
  bytes: number;
}

interface Served {
  base: string;
  hits: Hit[];
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse, hit: Hit) => void;

const servers: Served[] = [];

async function serve(handler: Handler): Promise<Served> {
  const hits: Hit[] = [];
  const server = http.createServer((req, res) => {
    const hit: Hit = { n: hits.length, url: req.url ?? '', headers: req.headers, bytes: 0 };
    hits.push(hit);
    res.on('close', () => (hit.status = res.statusCode));
    handler(req, res, hit);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const served: Served = {
    base: `http://127.0.0.1:${port}`,
    hits,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  servers.push(served);
  return served;
}

interface SendOptions {
  type?: string;
  /** Send only this many body bytes, then drop the connection. */
  cutAfter?: number;
}

/** A static file with ETag, Range/If-Range and If-None-Match support. */
function sendFile(req: IncomingMessage, res: ServerResponse, hit: Hit, body: Buffer, etag: string, o: SendOptions = {}): void {
  const base = { etag, 'last-modified': 'Mon, 01 Jan 2024 00:00:00 GMT', 'content-type': o.type ?? 'application/zip' };
  if (req.headers['if-none-match'] === etag) {
    res.writeHead(304, base).end();
    return;
  }
  const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const ifRange = req.headers['if-range'];
  let slice = body;
  if (range && (ifRange === undefined || ifRange === etag)) {
    const start = Number(range[1]);
    slice = body.subarray(start);
    res.writeHead(206, { ...base, 'content-length': slice.length, 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
  } else {
    res.writeHead(200, { ...base, 'content-length': body.length });
  }
  if (o.cutAfter !== undefined && o.cutAfter < slice.length) {
    hit.bytes = o.cutAfter;
    res.write(slice.subarray(0, o.cutAfter), () => res.socket?.destroy());
    return;
  }
  hit.bytes = slice.length;
  res.end(slice);
}

/** Sends the headers of the whole file and `cut` bytes of it, then drops the connection. */
const sendCut = (req: IncomingMessage, res: ServerResponse, hit: Hit, body: Buffer, cut: number, etag: string): void =>
  sendFile(req, res, hit, body, etag, { cutAfter: cut });

let zip: Buffer;
let zip2: Buffer;
let tmp: string;
let dest: string;

beforeAll(async () => {
  zip = await buildZip([
    { name: 'base/dados.bin', data: randomBytes(256 * 1024) },
    { name: 'base/leia-me.txt', data: 'Base de teste\n' },
  ]);
  zip2 = await buildZip([{ name: 'base/dados.bin', data: randomBytes(200 * 1024) }]);
});

beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'agro-download-'));
  dest = path.join(tmp, 'raw', 'incra');
});

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  await rm(tmp, { recursive: true, force: true });
});

const opts = (extra: Partial<FetchOptions> = {}): FetchOptions => ({
  destDir: dest,
  userAgent: UA,
  expect: 'zip',
  backoffMs: 1,
  stallTimeoutMs: 5_000,
  ...extra,
});

const listDest = async (): Promise<string[]> => (await readdir(dest)).sort();

describe('fetchSource over http', () => {
  it('downloads, hashes, stores meta and sends the User-Agent', async () => {
    const s = await serve((req, res, hit) => sendFile(req, res, hit, zip, '"v1"'));
    const got = await fetchSource(`${s.base}/files/base.zip`, opts());

    expect(got).toEqual({
      path: path.join(dest, 'base.zip'),
      name: 'base.zip',
      sha256: sha(zip),
      size: zip.length,
      sourceUri: `${s.base}/files/base.zip`,
      etag: '"v1"',
      lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT',
      contentType: 'application/zip',
      fromCache: false,
    });
    expect(sha(await readFile(got!.path))).toBe(sha(zip));
    expect(await sha256File(got!.path)).toBe(sha(zip));
    expect(s.hits.map((h) => [h.url, h.headers['user-agent'], h.headers.range])).toEqual([['/files/base.zip', UA, undefined]]);
    const meta = JSON.parse(await readFile(path.join(dest, 'base.zip.meta.json'), 'utf8'));
    expect(meta).toMatchObject({ sourceUri: `${s.base}/files/base.zip`, sha256: sha(zip), size: zip.length, etag: '"v1"' });
    expect(Number.isNaN(Date.parse(meta.fetchedAt))).toBe(false);
    expect(await listDest()).toEqual(['base.zip', 'base.zip.meta.json']);
  });

  it('resumes with Range after the server cuts the connection mid-body', async () => {
    const half = Math.floor(zip.length / 2);
    const s = await serve((req, res, hit) => (hit.n === 0 ? sendCut(req, res, hit, zip, half, '"v1"') : sendFile(req, res, hit, zip, '"v1"')));
    const got = await fetchSource(`${s.base}/base.zip`, opts());

    expect(s.hits.map((h) => h.status)).toEqual([200, 206]);
    expect(s.hits[1].headers.range).toBe(`bytes=${half}-`);
    expect(s.hits[1].headers['if-range']).toBe('"v1"');
    expect(s.hits[1].bytes).toBe(zip.length - half);
    expect(got!.sha256).toBe(sha(zip));
    expect(sha(await readFile(got!.path))).toBe(sha(zip));
    expect(await listDest()).toEqual(['base.zip', 'base.zip.meta.json']);
  });

  it('resets the retry budget whenever an attempt brings new bytes', async () => {
    // Four cuts in a row, each after 30 000 new bytes: more failures than retries: 2, but all with progress.
    const s = await serve((req, res, hit) => sendFile(req, res, hit, zip, '"v1"', { cutAfter: hit.n < 4 ? 30_000 : undefined }));
    const got = await fetchSource(`${s.base}/base.zip`, opts({ retries: 2 }));
    expect(s.hits.map((h) => h.headers.range)).toEqual([undefined, 'bytes=30000-', 'bytes=60000-', 'bytes=90000-', 'bytes=120000-']);
    expect(s.hits.map((h) => h.status)).toEqual([200, 206, 206, 206, 206]);
    expect(got!.sha256).toBe(sha(zip));
  });

  it('resumes after a stall (no bytes for stallTimeoutMs)', async () => {
    const half = Math.floor(zip.length / 2);
    const s = await serve((req, res, hit) => {
      if (hit.n > 0) return sendFile(req, res, hit, zip, '"v1"');
      res.writeHead(200, { etag: '"v1"', 'content-length': zip.length });
      res.write(zip.subarray(0, half)); // and then nothing
    });
    const got = await fetchSource(`${s.base}/base.zip`, opts({ stallTimeoutMs: 300 }));
    expect(s.hits).toHaveLength(2);
    expect(s.hits[1].headers.range).toMatch(/^bytes=\d+-$/);
    expect(s.hits[1].status).toBe(206);
    expect(got!.sha256).toBe(sha(zip));
  });

  it('resumes a .part left by a killed run', async () => {
    await mkdir(dest, { recursive: true });
    await writeFile(path.join(dest, 'base.zip.part'), zip.subarray(0, 1000));
    const s = await serve((req, res, hit) => sendFile(req, res, hit, zip, '"v1"'));
    const got = await fetchSource(`${s.base}/base.zip`, opts());

    expect(s.hits.map((h) => [h.headers.range, h.status, h.bytes])).toEqual([['bytes=1000-', 206, zip.length - 1000]]);
    expect(got!.sha256).toBe(sha(zip));
    expect(sha(await readFile(got!.path))).toBe(sha(zip));
  });

  it('starts over when the remote file changed since the .part was written (If-Range → 200)', async () => {
    let body = zip;
    let etag = '"v1"';
    const s = await serve((req, res, hit) => {
      if (hit.n === 0) return sendCut(req, res, hit, body, 5000, etag);
      if (hit.n === 1) return void res.writeHead(500).end();
      sendFile(req, res, hit, body, etag);
    });
    // Cut (progress), then a 500 with no progress exhausts retries: 1; the .part stays.
    await expect(fetchSource(`${s.base}/base.zip`, opts({ retries: 1 }))).rejects.toMatchObject({ code: 'download_failed' });
    expect(await listDest()).toEqual(['base.zip.part', 'base.zip.part.json']);

    body = zip2;
    etag = '"v2"';
    const got = await fetchSource(`${s.base}/base.zip`, opts());
    expect(s.hits[2].headers.range).toBe('bytes=5000-');
    expect(s.hits[2].headers['if-range']).toBe('"v1"');
    expect(s.hits[2].status).toBe(200);
    expect(got!.sha256).toBe(sha(zip2));
    expect(got!.etag).toBe('"v2"');
    expect(sha(await readFile(got!.path))).toBe(sha(zip2));
  });

  it('answers from the stored file on 304', async () => {
    const s = await serve((req, res, hit) => sendFile(req, res, hit, zip, '"v1"'));
    const first = await fetchSource(`${s.base}/base.zip`, opts());
    const second = await fetchSource(`${s.base}/base.zip`, opts());

    expect(s.hits[1].headers['if-none-match']).toBe('"v1"');
    expect(s.hits[1].headers['if-modified-since']).toBe('Mon, 01 Jan 2024 00:00:00 GMT');
    expect(s.hits.map((h) => [h.status, h.bytes])).toEqual([
      [200, zip.length],
      [304, 0],
    ]);
    expect(second).toEqual({ ...first, fromCache: true });
    expect(sha(await readFile(second!.path))).toBe(sha(zip));
  });

  it('refuses HTML pages served with 200 and stores nothing', async () => {
    const page = '\n<!DOCTYPE html><html><body>Serviço indisponível</body></html>';
    const cases: Array<[string, FetchOptions['expect']]> = [
      ['text/html; charset=utf-8', 'zip'],
      ['application/zip', 'zip'],
      ['text/csv', 'csv'],
    ];
    for (const [type, expected] of cases) {
      const s = await serve((req, res, hit) => sendFile(req, res, hit, Buffer.from(page), '"h"', { type }));
      await expect(fetchSource(`${s.base}/base.zip`, opts({ expect: expected }))).rejects.toMatchObject({ code: 'html_instead_of_archive' });
      expect(s.hits).toHaveLength(1);
      expect(await listDest()).toEqual([]);
    }
  });

  it('rejects a truncated zip with a consistent Content-Length as corrupt_archive', async () => {
    const cut = zip.subarray(0, Math.floor(zip.length * 0.7));
    const s = await serve((req, res, hit) => sendFile(req, res, hit, cut, '"c"'));
    await expect(fetchSource(`${s.base}/base.zip`, opts())).rejects.toMatchObject({ code: 'corrupt_archive' });
    expect(s.hits).toHaveLength(1);
    expect(await listDest()).toEqual([]);
  });

  it('maps 404 to source_not_found, or null when optional', async () => {
    const s = await serve((_req, res) => res.writeHead(404).end('not here'));
    await expect(fetchSource(`${s.base}/base.zip`, opts())).rejects.toMatchObject({ code: 'source_not_found' });
    expect(await fetchSource(`${s.base}/base.zip`, opts({ optional: true }))).toBeNull();
    expect(s.hits).toHaveLength(2);
    expect(await listDest()).toEqual([]);
  });

  it('fails at once on other 4xx', async () => {
    const s = await serve((_req, res) => res.writeHead(403).end('forbidden'));
    await expect(fetchSource(`${s.base}/base.zip`, opts())).rejects.toMatchObject({ code: 'download_failed', message: expect.stringContaining('HTTP 403') });
    expect(s.hits).toHaveLength(1);
  });

  it('retries 500 and succeeds', async () => {
    const s = await serve((req, res, hit) => (hit.n < 2 ? res.writeHead(500).end() : sendFile(req, res, hit, zip, '"v1"')));
    const got = await fetchSource(`${s.base}/base.zip`, opts());
    expect(s.hits.map((h) => h.status)).toEqual([500, 500, 200]);
    expect(got!.sha256).toBe(sha(zip));
  });

  it('retries 408 and 429 (a server that is busy or asks to slow down) as it does 5xx', async () => {
    const s = await serve((req, res, hit) => (hit.n === 0 ? res.writeHead(429, { 'retry-after': '0' }).end() : hit.n === 1 ? res.writeHead(408).end() : sendFile(req, res, hit, zip, '"v1"')));
    const got = await fetchSource(`${s.base}/base.zip`, opts());
    expect(s.hits.map((h) => h.status)).toEqual([429, 408, 200]);
    expect(got!.sha256).toBe(sha(zip));
  });

  it('gives up with download_failed after the retry budget', async () => {
    const s = await serve((_req, res) => res.writeHead(503).end());
    const logged: string[] = [];
    const fail = fetchSource(`${s.base}/base.zip`, opts({ retries: 3, log: (msg) => logged.push(msg) }));
    await expect(fail).rejects.toMatchObject({ code: 'download_failed', message: expect.stringContaining('HTTP 503') });
    expect(s.hits).toHaveLength(3);
    expect(logged).toEqual(['download retry', 'download retry']);
  });

  it('follows redirects', async () => {
    const s = await serve((req, res, hit) => {
      if (req.url === '/old') return void res.writeHead(302, { location: '/new/base.zip' }).end();
      sendFile(req, res, hit, zip, '"v1"');
    });
    const got = await fetchSource(`${s.base}/old`, opts({ name: 'base.zip' }));
    expect(s.hits.map((h) => [h.url, h.status])).toEqual([
      ['/old', 302],
      ['/new/base.zip', 200],
    ]);
    expect(got!.path).toBe(path.join(dest, 'base.zip'));
    expect(got!.sha256).toBe(sha(zip));
  });

  it('a redirect loop gives up after 5 redirects with download_failed, leaving nothing', async () => {
    const s = await serve((req, res) => void res.writeHead(302, { location: req.url === '/a' ? '/b' : '/a' }).end());
    await expect(fetchSource(`${s.base}/a`, opts({ name: 'base.zip' }))).rejects.toMatchObject({ code: 'download_failed', message: expect.stringContaining('/a: more than 5 redirects') });
    expect(s.hits.map((h) => h.url)).toEqual(['/a', '/b', '/a', '/b', '/a', '/b']);
    expect(await listDest()).toEqual([]);
  }, 10_000);

  it('sends credentials to the server they were given for, never to another origin a redirect names', async () => {
    const other = await serve((req, res, hit) => sendFile(req, res, hit, zip, '"v1"'));
    const s = await serve((req, res, hit) => {
      if (req.url === '/same') return void res.writeHead(302, { location: '/here/base.zip' }).end();
      if (req.url === '/away') return void res.writeHead(302, { location: `${other.base}/there/base.zip` }).end();
      sendFile(req, res, hit, zip, '"v1"');
    });
    const auth = { Authorization: 'Basic c2VjcmV0OnRva2Vu', Cookie: 'session=1' };
    await fetchSource(`${s.base}/same`, opts({ name: 'base.zip', headers: auth }));
    expect(s.hits.map((h) => h.headers.authorization)).toEqual([auth.Authorization, auth.Authorization]);
    await fetchSource(`${s.base}/away`, opts({ name: 'other.zip', headers: auth }));
    expect(s.hits.at(-1)!.headers.authorization).toBe(auth.Authorization);
    expect(other.hits).toHaveLength(1);
    expect(other.hits[0].headers.authorization).toBeUndefined();
    expect(other.hits[0].headers.cookie).toBeUndefined();
  });
});

describe('fetchSource on local files', () => {
  it('copies a local path and a file:// URL', async () => {
    const src = path.join(tmp, 'src', 'base.zip');
    await mkdir(path.dirname(src), { recursive: true });
    await writeFile(src, zip);

    const a = await fetchSource(src, opts());
    expect(a).toMatchObject({ path: path.join(dest, 'base.zip'), name: 'base.zip', sha256: sha(zip), size: zip.length, sourceUri: src, fromCache: false });
    expect(sha(await readFile(a!.path))).toBe(sha(zip));

    const url = pathToFileURL(src).href;
    const b = await fetchSource(url, opts({ name: 'copy.zip' }));
    expect(b).toMatchObject({ path: path.join(dest, 'copy.zip'), sha256: sha(zip), sourceUri: url });
    expect(await listDest()).toEqual(['base.zip', 'base.zip.meta.json', 'copy.zip', 'copy.zip.meta.json']);

    // Same bytes again: nothing changed. New bytes: a fresh file.
    expect(await fetchSource(src, opts())).toMatchObject({ sha256: sha(zip), fromCache: true });
    await writeFile(src, zip2);
    expect(await fetchSource(src, opts())).toMatchObject({ sha256: sha(zip2), size: zip2.length, fromCache: false });
    expect(sha(await readFile(path.join(dest, 'base.zip')))).toBe(sha(zip2));
  });

  it('maps a missing local file to source_not_found, or null when optional', async () => {
    const missing = path.join(tmp, 'nope.zip');
    await expect(fetchSource(missing, opts())).rejects.toMatchObject({ code: 'source_not_found' });
    expect(await fetchSource(pathToFileURL(missing).href, opts({ optional: true }))).toBeNull();
  });

  it('validates local files too', async () => {
    const src = path.join(tmp, 'page.zip');
    await writeFile(src, '<html>erro</html>');
    await expect(fetchSource(src, opts())).rejects.toMatchObject({ code: 'html_instead_of_archive' });
    expect(await listDest()).toEqual([]);
  });

  it('validates a local file where it lies: a bad one never reaches the raw store, and messages name a local file', async () => {
    const src = path.join(tmp, 'src', 'base.zip');
    await mkdir(path.dirname(src), { recursive: true });
    await writeFile(src, zip);
    await fetchSource(src, opts());
    const stored = await readFile(path.join(dest, 'base.zip'));
    const meta = await readFile(path.join(dest, 'base.zip.meta.json'), 'utf8');

    await writeFile(src, '<!DOCTYPE html><html>erro</html>');
    const html = (await fetchSource(src, opts()).then(() => new Error('no error'), (e: Error) => e));
    expect(html).toMatchObject({ code: 'html_instead_of_archive', message: `an HTML page came instead of the expected file: the local file ${src} is an HTML page` });
    expect(html.message).not.toMatch(/server/);
    await writeFile(src, zip.subarray(0, 40));
    await expect(fetchSource(src, opts())).rejects.toMatchObject({ code: 'corrupt_archive' });
    // The stored file and its meta are the good ones; no .part was ever written.
    expect(await listDest()).toEqual(['base.zip', 'base.zip.meta.json']);
    expect((await readFile(path.join(dest, 'base.zip'))).equals(stored)).toBe(true);
    expect(await readFile(path.join(dest, 'base.zip.meta.json'), 'utf8')).toBe(meta);
  });

  it("says the server's answer when an HTTP download is an HTML page", async () => {
    const s = await serve((req, res, hit) => sendFile(req, res, hit, Buffer.from('<html>erro</html>'), '"p"', { type: 'text/html' }));
    await expect(fetchSource(`${s.base}/base.zip`, opts())).rejects.toMatchObject({
      code: 'html_instead_of_archive', message: expect.stringContaining(`the server's answer for ${s.base}/base.zip has content-type text/html`),
    });
  });
});

describe('joinSource', () => {
  const NAME = 'Áreas de Quilombolas.zip';

  it('URL-encodes names for URLs and keeps them for folders', () => {
    const want = 'https://certificacao.incra.gov.br/csv_shp/zip/%C3%81reas%20de%20Quilombolas.zip';
    expect(joinSource('https://certificacao.incra.gov.br/csv_shp/zip', NAME)).toBe(want);
    expect(joinSource('https://certificacao.incra.gov.br/csv_shp/zip/', NAME)).toBe(want);
    expect(joinSource('/data/incra', NAME)).toBe('/data/incra/Áreas de Quilombolas.zip');
    expect(joinSource('file:///data/incra/', NAME)).toBe('file:///data/incra/%C3%81reas%20de%20Quilombolas.zip');
  });

  it('fetches an accented name over http and from a folder', async () => {
    const s = await serve((req, res, hit) =>
      req.url === '/zip/%C3%81reas%20de%20Quilombolas.zip' ? sendFile(req, res, hit, zip, '"q"') : res.writeHead(404).end(),
    );
    const viaHttp = await fetchSource(joinSource(`${s.base}/zip`, NAME), opts());
    expect(viaHttp).toMatchObject({ name: NAME, path: path.join(dest, NAME), sha256: sha(zip) });

    const folder = path.join(tmp, 'espelho');
    await mkdir(folder);
    await writeFile(path.join(folder, NAME), zip2);
    const viaFolder = await fetchSource(joinSource(folder, NAME), opts({ destDir: path.join(tmp, 'a') }));
    expect(viaFolder).toMatchObject({ name: NAME, sha256: sha(zip2) });
    const viaUrl = await fetchSource(joinSource(pathToFileURL(folder).href, NAME), opts({ destDir: path.join(tmp, 'b') }));
    expect(viaUrl).toMatchObject({ name: NAME, path: path.join(tmp, 'b', NAME), sha256: sha(zip2) });
  });
});

describe('fetchSource against misbehaving servers', () => {
  const csv = (rows: number, tag: string): Buffer =>
    Buffer.from(`id;nome\n${Array.from({ length: rows }, (_, i) => `${i};${tag} linha ${i}`).join('\n')}\n`);

  it('gives up on a server that ignores Range and cuts every answer at the same byte', async () => {
    // Each attempt is a 200 from zero that stops at 30 000 bytes: no attempt gets further than
    // the one before, so none is progress. (After 20 hits the server says 404 to end the loop.)
    const s = await serve((_req, res, hit) => {
      if (hit.n >= 20) return void res.writeHead(404).end();
      res.writeHead(200, { etag: '"v1"', 'content-length': zip.length });
      res.write(zip.subarray(0, 30_000), () => res.socket?.destroy());
    });
    await expect(fetchSource(`${s.base}/base.zip`, opts({ retries: 3 }))).rejects.toMatchObject({ code: 'download_failed' });
    expect(s.hits.length).toBeLessThanOrEqual(4);
    expect(s.hits.slice(1).every((h) => h.headers.range === 'bytes=30000-')).toBe(true);
  });

  it('still counts a restart from zero that gets further than before as progress', async () => {
    // No Range support, but every cut comes later: 20k, 40k, … then the whole file.
    const s = await serve((_req, res, hit) => {
      res.writeHead(200, { etag: '"v1"', 'content-length': zip.length });
      const cut = (hit.n + 1) * 20_000;
      if (cut >= zip.length) return void res.end(zip);
      res.write(zip.subarray(0, cut), () => res.socket?.destroy());
    });
    const got = await fetchSource(`${s.base}/base.zip`, opts({ retries: 2 }));
    expect(got!.sha256).toBe(sha(zip));
  });

  it('does not stitch two versions when the server ignores If-Range and sends a 206 of a new ETag', async () => {
    const v1 = csv(5000, 'v1');
    const v2 = csv(6000, 'v2');
    let body = v1;
    let etag = '"v1"';
    const s = await serve((req, res, hit) => {
      if (hit.n === 0) return sendFile(req, res, hit, body, etag, { cutAfter: 5000, type: 'text/csv' });
      if (hit.n === 1) return void res.writeHead(500).end(); // the run fails, its .part stays
      const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      if (!range) return sendFile(req, res, hit, body, etag, { type: 'text/csv' });
      // If-Range ignored: the rest of whatever the file is now.
      const start = Number(range[1]);
      res.writeHead(206, { etag, 'content-type': 'text/csv', 'content-length': body.length - start, 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` });
      res.end(body.subarray(start));
    });
    await expect(fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv', retries: 1 }))).rejects.toMatchObject({ code: 'download_failed' });
    body = v2;
    etag = '"v2"';
    const got = await fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv' }));
    expect(sha(await readFile(got!.path))).toBe(sha(v2));
    expect(got).toMatchObject({ sha256: sha(v2), size: v2.length, etag: '"v2"' });
  });

  it('does not stitch two versions of a file served without ETag or Last-Modified when its size changed', async () => {
    const v1 = csv(5000, 'v1');
    const v2 = csv(6000, 'v2');
    let body = v1;
    const s = await serve((req, res, hit) => {
      const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      const start = range ? Number(range[1]) : 0;
      if (hit.n === 1) return void res.writeHead(500).end(); // the run fails, its .part stays
      const slice = body.subarray(start);
      const head = { 'content-type': 'text/csv', 'content-length': slice.length };
      res.writeHead(range ? 206 : 200, range ? { ...head, 'content-range': `bytes ${start}-${body.length - 1}/${body.length}` } : head);
      if (hit.n === 0) return void res.write(slice.subarray(0, 5000), () => res.socket?.destroy());
      res.end(slice);
    });
    await expect(fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv', retries: 1 }))).rejects.toMatchObject({ code: 'download_failed' });
    body = v2;
    const got = await fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv' }));
    expect(sha(await readFile(got!.path))).toBe(sha(v2));
  });
  it('stores the decoded bytes when a server compresses despite Accept-Encoding: identity', async () => {
    const body = csv(3000, 'v1');
    const cases: Array<[string, (b: Buffer) => Buffer, Buffer, FetchOptions['expect']]> = [
      ['gzip', zlib.gzipSync, body, 'csv'],
      ['deflate', zlib.deflateSync, body, 'csv'],
      ['br', zlib.brotliCompressSync, zip, 'zip'],
    ];
    for (const [encoding, encode, plain, expected] of cases) {
      const packed = encode(plain);
      const s = await serve((_req, res) => res.writeHead(200, { 'content-type': 'text/csv', 'content-encoding': encoding, 'content-length': packed.length, etag: '"g"' }).end(packed));
      const got = await fetchSource(`${s.base}/${encoding}.csv`, opts({ expect: expected }));
      expect(s.hits[0].headers['accept-encoding']).toBe('identity');
      expect(got).toMatchObject({ sha256: sha(plain), size: plain.length });
      expect(sha(await readFile(got!.path))).toBe(sha(plain));
    }
  });

  it('starts a compressed download over after a cut (its bytes cannot be resumed with Range)', async () => {
    const body = csv(20_000, 'v1');
    const packed = zlib.gzipSync(body);
    const s = await serve((_req, res, hit) => {
      res.writeHead(200, { 'content-type': 'text/csv', 'content-encoding': 'gzip', 'content-length': packed.length, etag: '"g"' });
      if (hit.n === 0) return void res.write(packed.subarray(0, 5000), () => res.socket?.destroy());
      res.end(packed);
    });
    const got = await fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv' }));
    expect(s.hits.map((h) => h.headers.range)).toEqual([undefined, undefined]);
    expect(sha(await readFile(got!.path))).toBe(sha(body));
  });

  it('refuses a body in an encoding it cannot decode, and an empty body, storing nothing', async () => {
    const s = await serve((req, res) => {
      if (req.url === '/zstd.csv') return void res.writeHead(200, { 'content-type': 'text/csv', 'content-encoding': 'zstd' }).end('xxxx');
      res.writeHead(200, { 'content-type': 'text/csv', 'content-length': 0 }).end();
    });
    await expect(fetchSource(`${s.base}/zstd.csv`, opts({ expect: 'csv' }))).rejects.toMatchObject({ code: 'download_failed', message: expect.stringContaining('zstd') });
    await expect(fetchSource(`${s.base}/empty.csv`, opts({ expect: 'csv', retries: 1 }))).rejects.toMatchObject({ code: 'download_failed', message: expect.stringContaining('empty') });
    expect(await listDest()).toEqual([]);
  });
  it('gives up on a server that trickles a few bytes at a time forever, resumed or not', async () => {
    // A byte every 20 ms never trips the idle timeout (300 ms) and every resume brings new bytes.
    const huge = 50_000_000;
    const s = await serve((req, res, hit) => {
      if (hit.n >= 20) return void res.writeHead(404).end();
      const start = Number(/^bytes=(\d+)-$/.exec(req.headers.range ?? '')?.[1] ?? 0);
      const head = { etag: '"t"', 'content-type': 'text/csv', 'content-length': huge - start };
      res.writeHead(start ? 206 : 200, start ? { ...head, 'content-range': `bytes ${start}-${huge - 1}/${huge}` } : head);
      res.write('id;nome\n');
      const t = setInterval(() => res.write('x'), 20);
      res.on('close', () => clearInterval(t));
    });
    const started = Date.now();
    await expect(fetchSource(`${s.base}/base.csv`, opts({ expect: 'csv', stallTimeoutMs: 300, retries: 2 }))).rejects.toMatchObject({
      code: 'download_failed', message: expect.stringContaining('too slow'),
    });
    expect(s.hits.length).toBeLessThanOrEqual(3);
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 15_000);
  it('keeps a .part that already holds the whole file when the resume answers 416 for its size', async () => {
    // Chunked, every byte sent but the connection cut before the last chunk: the .part is whole.
    const s = await serve((req, res, hit) => {
      if (req.headers.range) return void res.writeHead(416, { etag: '"v1"', 'content-range': `bytes */${zip.length}`, 'content-type': 'text/html' }).end();
      if (hit.n > 0) return sendFile(req, res, hit, zip, '"v1"');
      res.writeHead(200, { etag: '"v1"', 'content-type': 'application/zip' });
      res.write(zip, () => res.socket?.destroy());
    });
    const got = await fetchSource(`${s.base}/base.zip`, opts());
    expect(s.hits.map((h) => [h.headers.range, h.status])).toEqual([[undefined, 200], [`bytes=${zip.length}-`, 416]]);
    expect(got).toMatchObject({ sha256: sha(zip), size: zip.length, etag: '"v1"', contentType: 'application/zip' });
    expect(sha(await readFile(got!.path))).toBe(sha(zip));

    // The same size but another ETag: another version, downloaded again.
    await rm(dest, { recursive: true });
    const v2 = await serve((req, res, hit) => {
      if (req.headers.range) return void res.writeHead(416, { etag: '"v2"', 'content-range': `bytes */${zip.length}` }).end();
      if (hit.n > 0) return sendFile(req, res, hit, zip2, '"v2"');
      res.writeHead(200, { etag: '"v1"', 'content-type': 'application/zip' });
      res.write(zip, () => res.socket?.destroy());
    });
    const again = await fetchSource(`${v2.base}/base.zip`, opts());
    expect(v2.hits.map((h) => h.status)).toEqual([200, 416, 200]);
    expect(again).toMatchObject({ sha256: sha(zip2), etag: '"v2"' });
  });
});
