// receita-cnpj discovery and download against a real WebDAV server on 127.0.0.1
// (fixtures/receita-cnpj-server.ts: PROPFIND Depth 1 multistatus, GET with Range): the newest
// month is picked from the listing, a transfer cut mid-file resumes with Range, files already
// downloaded and validated are not fetched again, stalls step parallelism down, a month
// missing a zip or a wrong token is refused.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildReceitaMonth } from '../fixtures/receita-cnpj.ts';
import { startDavServer, type DavServer } from '../fixtures/receita-cnpj-server.ts';
import { newestMonth, SteppingLimiter } from '../pipelines/receita-cnpj/fetch.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import { MONTH_ZIPS } from '../pipelines/receita-cnpj/relations.ts';
import { isAgroError } from '../src/errors.ts';
import type { Logger } from '../src/log.ts';
import { runPipeline } from '../src/etl/run.ts';
import { parseMultistatus, propfind } from '../src/etl/webdav.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const TOKEN = 'ShareTok3n';
let db: TestDb;
let root: string;
let dav: DavServer;
const lines: string[] = [];
const log = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (lines.push(String(c)), cb()) })) as unknown as Logger;
const sha = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const run = (source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log }, receitaCnpj, { source });
const shareUrl = () => dav.url.replace('http://', `http://${TOKEN}@`);

beforeAll(async () => {
  db = await testDatabase({ AGRO_CNPJ_BACKOFF_MS: '20', AGRO_CNPJ_STALL_TIMEOUT_MS: '400', AGRO_CNPJ_PROGRESS_MS: '100' });
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'cnpj-dav-'));
  await buildReceitaMonth(root, '2026-09', 'base');
  await buildReceitaMonth(root, '2026-10', 'base');
  fs.mkdirSync(path.join(root, 'regime_tributario')); // another folder of the share, not a month
  fs.writeFileSync(path.join(root, 'LEIAME.txt'), 'não é um mês');
  fs.mkdirSync(path.join(root, '2027-13')); // not a month either
  dav = await startDavServer({ root, token: TOKEN });
}, 120_000);
afterAll(async () => {
  await dav?.close();
  await db?.drop();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('WebDAV listing', () => {
  it("a share that never answers its PROPFIND fails the run within Receita's stall timeout (AGRO_CNPJ_STALL_TIMEOUT_MS), not a fixed minute", async () => {
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => void sockets.add(s)); // accepts, reads, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const t0 = Date.now();
      const out = await run(`http://${TOKEN}@127.0.0.1:${(silent.address() as net.AddressInfo).port}/`);
      expect([out.status, out.error?.code]).toEqual(['failed', 'download_failed']);
      expect(out.error?.message).toMatch(/PROPFIND stalled for 400 ms/);
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  }, 30_000);

  it('parses a Nextcloud multistatus (namespaces, collections, sizes, ETags) with an XML parser', () => {
    const xml = `<?xml version="1.0"?>
<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:response><d:href>/public.php/webdav/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>
<d:response><d:href>/public.php/webdav/2026-10/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype><d:getlastmodified>Sun, 11 Oct 2026 03:00:00 GMT</d:getlastmodified></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat><d:propstat><d:prop><d:getcontentlength/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
<d:response><d:href>/public.php/webdav/2026-10/Empresas0.zip</d:href><d:propstat><d:prop><d:resourcetype/><d:getcontentlength>341000000</d:getcontentlength><d:getetag>&quot;abc&quot;</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>
<d:response><d:href>/public.php/webdav/Dados%20Abertos/</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>`;
    const e = parseMultistatus(xml);
    expect(e.map((x) => [x.name, x.collection, x.size, x.etag])).toEqual([
      ['webdav', true, null, null], ['2026-10', true, null, null], ['Empresas0.zip', false, 341000000, '"abc"'], ['Dados Abertos', true, null, null],
    ]);
    expect(e[1].lastModified).toBe('Sun, 11 Oct 2026 03:00:00 GMT');
    expect(() => parseMultistatus('<html><body>erro</body></html>')).toThrow(/multistatus/);
  });

  it('PROPFIND Depth 1 on the share lists the months; the newest YYYY-MM folder is picked', async () => {
    const entries = await propfind(dav.url, { userAgent: 'test', token: TOKEN });
    expect(entries.map((e) => e.name).sort()).toEqual(['2026-09', '2026-10', '2027-13', 'LEIAME.txt', 'regime_tributario']);
    expect(newestMonth(entries)).toBe('2026-10');
    const month = await propfind(`${dav.url}2026-10/`, { userAgent: 'test', token: TOKEN });
    expect(month.filter((e) => !e.collection)).toHaveLength(37);
    expect(month.every((e) => e.size! > 0 && e.etag)).toBe(true);
    expect(dav.requests.filter((r) => r.method === 'PROPFIND').every((r) => r.path === '' || r.path === '2026-10/')).toBe(true);
  });

  it('a wrong share token is refused as a moved share', async () => {
    const err = await propfind(dav.url, { userAgent: 'test', token: 'wrong' }).catch((e) => e);
    expect(isAgroError(err, 'source_not_found')).toBe(true);
    expect(String(err.message)).toMatch(/HTTP 401/);
  });
});

describe('download', () => {
  it('resumes a transfer cut mid-file with Range and loads the month', async () => {
    const big = path.join(root, '2026-10', 'Estabelecimentos3.zip');
    const size = fs.statSync(big).size;
    const cut = Math.floor(size / 2);
    dav.faults.push({ name: 'Estabelecimentos3.zip', cutAfter: cut, times: 1 });
    dav.requests.length = 0;
    const out = await run(shareUrl());
    expect(out.status, out.message).toBe('published');
    expect(out.as_of).toBe('2026-10-01');
    const gets = dav.requests.filter((r) => r.method === 'GET' && r.path === '2026-10/Estabelecimentos3.zip');
    expect(gets).toHaveLength(2);
    expect(gets[0].range).toBeUndefined();
    expect(gets[1].range).toBe(`bytes=${cut}-`);
    // Only the newest month is downloaded, every one of its 37 zips, once (plus the resume).
    const got = dav.requests.filter((r) => r.method === 'GET');
    expect(got.every((r) => r.path.startsWith('2026-10/'))).toBe(true);
    expect(got).toHaveLength(38);
    const snap = (await db.pool.query('SELECT source FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].source;
    const rec = snap.files.find((f: { name: string }) => f.name === 'Estabelecimentos3.zip');
    expect(rec).toMatchObject({ size, sha256: sha(big) });
    expect(fs.existsSync(path.join(db.dataDir, 'raw', 'receita-cnpj', '2026-10', 'Estabelecimentos3.zip.part'))).toBe(false);
    expect(lines.some((l) => l.includes('receita-cnpj: loading'))).toBe(true);
  }, 120_000);

  it('does not fetch again what was downloaded and validated; the month is unchanged', async () => {
    dav.requests.length = 0;
    const again = await run(shareUrl());
    expect(again.status).toBe('unchanged');
    expect(dav.requests.filter((r) => r.method === 'GET')).toHaveLength(0);
  }, 60_000);

  it('steps parallel downloads down when transfers stall, and still completes', async () => {
    // A new month whose two files hang mid-transfer once each.
    await buildReceitaMonth(root, '2026-11', 'next');
    dav.faults.push({ name: 'Socios1.zip', stallAfter: 1000, times: 1 }, { name: 'Socios2.zip', stallAfter: 1000, times: 1 });
    lines.length = 0;
    const out = await run(shareUrl());
    expect(out.status, out.message).toBe('published');
    const steps = lines.filter((l) => l.includes('fewer parallel downloads')).map((l) => JSON.parse(l).parallel);
    expect(steps).toEqual([2]);
  }, 120_000);

  it('refuses a month missing one of its 37 zips, naming it', async () => {
    const dir = path.join(root, '2026-12');
    await buildReceitaMonth(root, '2026-12', 'base');
    fs.rmSync(path.join(dir, 'Socios7.zip'));
    const out = await run(shareUrl());
    expect(out.status).toBe('failed');
    expect(out.error?.code).toBe('source_not_found');
    expect(out.error?.message).toMatch(/2026-12 is incomplete, missing Socios7\.zip/);
    expect(MONTH_ZIPS).toHaveLength(37);
  }, 60_000);

  it('a file that disagrees with the listing fails the run and is not trusted from the store the next night', async () => {
    const dir = path.join(root, '2027-01');
    await buildReceitaMonth(root, '2027-01', 'next');
    const real = fs.statSync(path.join(dir, 'Socios3.zip')).size;
    dav.listedSize.set('Socios3.zip', real + 7);
    try {
      const first = await run(shareUrl());
      expect(first.status).toBe('failed');
      expect(first.error?.message).toMatch(/Socios3\.zip: \d+ bytes, the listing says \d+/);
      // Nothing goes on downloading once the run has failed (Socios4…9 came after it, beside the next run).
      const asked = dav.requests.length;
      await new Promise((r) => setTimeout(r, 600));
      expect(dav.requests.slice(asked).map((r) => r.path)).toEqual([]);
      dav.requests.length = 0;
      await run(shareUrl());
      // Asked again in full, not answered from the store by a 304 (the same wrong bytes every night).
      const gets = dav.requests.filter((r) => r.method === 'GET' && r.path === '2027-01/Socios3.zip');
      expect(gets).toHaveLength(1);
      expect(gets[0].ifNoneMatch).toBeUndefined();
    } finally {
      dav.listedSize.clear();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('SteppingLimiter', () => {
  it('runs at most `limit` jobs at once and steps 4 → 2 → 1', async () => {
    const steps: number[] = [];
    const l = new SteppingLimiter(4, 2, (n) => steps.push(n));
    let active = 0;
    let peak = 0;
    const job = () => l.run(async () => {
      peak = Math.max(peak, ++active);
      await new Promise((r) => setTimeout(r, 5));
      active--;
    });
    await Promise.all(Array.from({ length: 12 }, job));
    expect(peak).toBe(4);
    l.stalled();
    l.stalled();
    peak = 0;
    await Promise.all(Array.from({ length: 8 }, job));
    expect(peak).toBe(2);
    l.stalled();
    l.stalled();
    l.stalled();
    l.stalled();
    expect(steps).toEqual([2, 1]);
    peak = 0;
    await Promise.all(Array.from({ length: 4 }, job));
    expect(peak).toBe(1);
  });
});
