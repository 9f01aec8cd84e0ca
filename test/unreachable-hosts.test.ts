// A host that never answers costs one download its whole retry budget, not every download of
// the night: the next one from it gets a single attempt while it stays silent, an answer gives
// the budget back (src/etl/unreachable-hosts.ts). Real refusals: a loopback port nobody listens
// on, then a real HTTP server on it.
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import yazl from 'yazl';
import { loadConfig } from '../src/config.ts';
import { fetchSource, type FetchOptions } from '../src/etl/download.ts';
import { forgetUnreachableHosts, noAnswerCode, UNREACHABLE_MEMORY_MS, watchHost } from '../src/etl/unreachable-hosts.ts';
import { downloadWfsLayer, type WfsRequest } from '../src/etl/wfs.ts';

let tmp: string;
const servers: http.Server[] = [];

beforeEach(async () => {
  forgetUnreachableHosts();
  tmp = await mkdtemp(path.join(os.tmpdir(), 'agro-unreachable-'));
});
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
  await rm(tmp, { recursive: true, force: true });
});

/** A loopback port nothing listens on (taken from the kernel, then let go). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

async function listen(port: number, handler: http.RequestListener): Promise<void> {
  const s = http.createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(port, '127.0.0.1', r));
}

async function zipBytes(): Promise<Buffer> {
  const z = new yazl.ZipFile();
  z.addBuffer(Buffer.from('dados\n'), 'leia-me.txt');
  z.end();
  const chunks: Buffer[] = [];
  for await (const c of z.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('zips and files (fetchSource)', () => {
  test('the whole budget once, then one attempt a download while the host is silent; an answer gives the budget back', async () => {
    const port = await closedPort();
    const base = `http://127.0.0.1:${port}`;
    const retries: string[] = [];
    const opts = (name: string): FetchOptions => ({
      destDir: path.join(tmp, name), userAgent: 'agro-test', expect: 'zip', retries: 3, backoffMs: 1, stallTimeoutMs: 5_000,
      log: (msg, extra) => void (msg === 'download retry' && retries.push(String(extra?.uri))),
    });

    await expect(fetchSource(`${base}/MT_AREA_IMOVEL.zip`, opts('mt'))).rejects.toThrow(/ECONNREFUSED.*\(3 attempts without progress\)$/);
    expect(retries).toHaveLength(2);

    retries.length = 0;
    const second = fetchSource(`${base}/GO_AREA_IMOVEL.zip`, opts('go'));
    await expect(second).rejects.toMatchObject({ code: 'download_failed' });
    await expect(second).rejects.toThrow(new RegExp(`\\(1 attempt without progress; 127\\.0\\.0\\.1:${port} did not answer the download before either \\(ECONNREFUSED, 0 min ago\\), so it got one attempt\\)$`));
    expect(retries).toEqual([]);

    // Back, but its first answer is a 503: an answer, so the download keeps its budget and gets the file.
    const zip = await zipBytes();
    let hits = 0;
    await listen(port, (_req, res) => {
      if (hits++ === 0) res.writeHead(503).end();
      else res.writeHead(200, { 'content-type': 'application/zip', 'content-length': zip.length }).end(zip);
    });
    const got = await fetchSource(`${base}/GO_AREA_IMOVEL.zip`, opts('go'));
    expect(got?.size).toBe(zip.length);
    expect(hits).toBe(2);

    // Gone again: the host was forgotten when it answered, so the whole budget.
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    retries.length = 0;
    await expect(fetchSource(`${base}/MT_AREA_IMOVEL.zip`, opts('mt'))).rejects.toThrow(/ECONNREFUSED.*\(3 attempts without progress\)$/);
    expect(retries).toHaveLength(2);
  });

  test('a host that answers with a redirect to a dead one is not marked: every download keeps its budget', async () => {
    const dead = await closedPort();
    const port = await closedPort();
    let hits = 0;
    await listen(port, (_req, res) => {
      hits++;
      res.writeHead(302, { location: `http://127.0.0.1:${dead}/moved.zip` }).end();
    });
    const retries: string[] = [];
    const opts: FetchOptions = { destDir: tmp, userAgent: 'agro-test', expect: 'zip', retries: 3, backoffMs: 1, log: (msg) => void (msg === 'download retry' && retries.push(msg)) };
    for (const name of ['a.zip', 'b.zip']) await expect(fetchSource(`http://127.0.0.1:${port}/${name}`, opts)).rejects.toThrow(/ECONNREFUSED.*\(3 attempts without progress\)$/);
    expect([hits, retries.length]).toEqual([6, 4]);
  });

  test('a host that answers with errors is not marked: every download keeps its budget', async () => {
    const port = await closedPort();
    let hits = 0;
    await listen(port, (_req, res) => {
      hits++;
      res.writeHead(502).end();
    });
    const opts: FetchOptions = { destDir: tmp, userAgent: 'agro-test', expect: 'zip', retries: 2, backoffMs: 1 };
    await expect(fetchSource(`http://127.0.0.1:${port}/a.zip`, opts)).rejects.toThrow(/HTTP 502 \(2 attempts without progress\)$/);
    await expect(fetchSource(`http://127.0.0.1:${port}/b.zip`, opts)).rejects.toThrow(/HTTP 502 \(2 attempts without progress\)$/);
    expect(hits).toBe(4);
  });
});

test('the WFS: a state after one whose host did not answer gets one attempt, and says why', async () => {
  const port = await closedPort();
  const settings = { ...loadConfig({}).sicarWfs, retries: 3, backoffMs: 1, maxBackoffMs: 2, connectTimeoutMs: 2_000 };
  const request = (uf: string): WfsRequest => ({
    endpoint: `http://127.0.0.1:${port}/geoserver/sicar/wfs`, typeName: `sicar:sicar_imoveis_${uf}`, pageSize: 1000,
    sortBy: 'gid', srsName: 'EPSG:4674', outputFormat: 'application/json', version: '2.0.0',
  });
  const retries: unknown[] = [];
  const o = (uf: string) => ({ dir: path.join(tmp, uf), userAgent: 'agro-test', settings, log: (msg: string, extra?: unknown) => void (msg === 'wfs retry' && retries.push(extra)) });
  await expect(downloadWfsLayer(request('mt'), o('mt'))).rejects.toThrow(/hits of sicar:sicar_imoveis_mt: .*ECONNREFUSED.* \(3 attempts\)$/);
  expect(retries).toHaveLength(2);
  retries.length = 0;
  await expect(downloadWfsLayer(request('go'), o('go'))).rejects.toThrow(new RegExp(`hits of sicar:sicar_imoveis_go: .*\\(1 attempt; 127\\.0\\.0\\.1:${port} did not answer the download before either \\(ECONNREFUSED, 0 min ago\\), so it got one attempt\\)$`));
  expect(retries).toEqual([]);
});

test('a host is remembered for 30 minutes after the last download gave up on it', () => {
  let now = 1_000_000;
  const clock = () => now;
  const url = 'https://geoserver.example.invalid/geoserver/sicar/wfs';
  const first = watchHost(url, clock);
  expect(first.failed('ENOTFOUND')).toBe(false);
  expect(first.gaveUp()).toBe('');

  now += UNREACHABLE_MEMORY_MS - 60_000;
  const second = watchHost(url, clock);
  expect(second.failed('EAI_AGAIN')).toBe(true);
  expect(second.gaveUp()).toBe('; geoserver.example.invalid did not answer the download before either (ENOTFOUND, 29 min ago), so it got one attempt');

  // The memory runs from that last give-up: 29 minutes later the host is still marked; 31 minutes later it is not.
  now += UNREACHABLE_MEMORY_MS - 60_000;
  expect(watchHost(url, clock).failed('ENOTFOUND')).toBe(true);
  now += 2 * 60_000;
  expect(watchHost(url, clock).failed('ENOTFOUND')).toBe(false);
  // Another port is another host.
  expect(watchHost('https://geoserver.example.invalid:8443/wfs', clock).failed('ENOTFOUND')).toBe(false);
});

test('which errors mean the server was never reached', () => {
  const err = (code: string, syscall?: string) => Object.assign(new Error(`${syscall ?? ''} ${code}`), { code, syscall });
  expect(noAnswerCode(err('ECONNREFUSED', 'connect'))).toBe('ECONNREFUSED');
  expect(noAnswerCode(err('ENOTFOUND', 'getaddrinfo'))).toBe('ENOTFOUND');
  // A connection that timed out being made, not one that timed out later.
  expect(noAnswerCode(err('ETIMEDOUT', 'connect'))).toBe('ETIMEDOUT');
  expect(noAnswerCode(err('ETIMEDOUT', 'read'))).toBeUndefined();
  // Every address of a dual-stack host tried (Node's AggregateError carries the first error's code).
  const all = Object.assign(new AggregateError([err('ETIMEDOUT', 'connect'), err('ENETUNREACH', 'connect')], 'all addresses failed'), { code: 'ETIMEDOUT' });
  expect(noAnswerCode(all)).toBe('ETIMEDOUT');
  expect(noAnswerCode(err('ECONNRESET', 'read'))).toBeUndefined();
  expect(noAnswerCode(new Error('no code'))).toBeUndefined();
});
