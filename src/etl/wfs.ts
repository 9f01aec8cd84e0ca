// A WFS 2.0 layer downloaded page by page into the raw store (SOURCES.md §1.7, §2.1 route B).
// The paging machinery (page store, resume, retries, TLS and timeouts) is the one of every
// paged feature service: `downloadPaged` runs it for a `PagedProtocol` (the WFS one here,
// ArcGIS REST's in arcgis.ts), which says how to count, ask for and check a page.
//
// The expected size comes first (resultType=hits → numberMatched). Pages are GetFeature
// requests with count/startIndex under a fixed sortBy, so they do not shift between
// requests. Each page is streamed to `<page>.part`, parsed, then renamed, and only then
// listed in session.json (rewritten atomically): a page is complete exactly when it is
// listed. A later run with the same request and the same numberMatched, within the
// resume window, starts after the last listed page. The next startIndex is the previous
// one plus the features the page really held, so a server that caps its pages below
// `count` never makes us skip features.
import { createHash } from 'node:crypto';
import { constants as cryptoConstants } from 'node:crypto';
import { createWriteStream, readFileSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { SecureVersion } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WfsSettings } from '../config.ts';
import { AgroError } from '../errors.ts';
import type { FetchedFile } from './download.ts';
import { noAnswerCode, watchHost } from './unreachable-hosts.ts';

export const WFS_VERSION = '2.0.0';
export const WFS_OUTPUT_FORMAT = 'application/json';

/** What identifies a download: a stored page is reused only under the same request. */
export interface WfsRequest {
  endpoint: string;
  typeName: string;
  pageSize: number;
  sortBy: string;
  srsName: string;
  outputFormat: string;
  version: string;
}

export interface WfsPage {
  file: string;
  startIndex: number;
  features: number;
  bytes: number;
  sha256: string;
  /** The server said more features follow (ArcGIS exceededTransferLimit); WFS pages do not say. */
  more?: boolean;
}

/** session.json: the request, the expected count and the pages complete so far. */
export interface PagedSession<R> {
  request: R;
  numberMatched: number;
  startedAt: string;
  completedAt: string | null;
  pages: WfsPage[];
}

/** The manifest of a complete download: what the load reads and what the checksum covers. */
export interface PagedManifest<R, Route extends string = string> {
  route: Route;
  request: R;
  /** The expected count (WFS numberMatched, ArcGIS returnCountOnly) before the first page. */
  numberMatched: number;
  /** The count asked again after the last page; differs when the layer changed meanwhile. */
  numberMatchedAfter: number;
  /** Features in the pages (rows read). */
  features: number;
  pages: WfsPage[];
}

export type WfsManifest = PagedManifest<WfsRequest, 'wfs'>;

export interface PagedDownload<M> {
  manifest: M;
  manifestPath: string;
  /** Pages requested by this call (resumed ones are not). */
  requestedPages: number[];
  resumedPages: number;
}

export type WfsDownload = PagedDownload<WfsManifest>;

/**
 * A paged feature service as the download loop sees it. `request` identifies the download
 * (a stored page is reused only under the same one); the rest says how to ask and check.
 */
export interface PagedProtocol<R, Route extends string = string> {
  route: Route;
  request: R;
  /** Names the layer in messages and logs. */
  what: string;
  countUrl: string;
  /** What the count request is called in messages ('hits' for WFS resultType=hits). */
  countName: string;
  /** The expected count from the count answer; throws Retryable (try again) or AgroError (give up). */
  parseCount(text: string): number;
  pageUrl(offset: number): string;
  /** Features of a page and whether the server says more follow; throws Retryable for an error or a partial page. */
  parsePage(buf: Buffer): { features: number; more?: boolean };
  /** Whether another page is asked after `last` (null: none yet), `next` being the next offset. */
  continues(last: WfsPage | null, next: number, expected: number): boolean;
  /** The source URI the manifest file records. */
  sourceUri: string;
  contentType: string;
}

export interface WfsDownloadOptions {
  /** Folder of this layer's pages in the raw store. */
  dir: string;
  userAgent: string;
  settings: WfsSettings;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  now?: () => Date;
}

/** A failure worth another attempt; `gotBytes` says whether the attempt received any body bytes. */
export class Retryable extends Error {
  /** noAnswer: set when the attempt never reached the server (unreachable-hosts.ts noAnswerCode). */
  constructor(message: string, readonly gotBytes = false, readonly noAnswer?: string) {
    super(message);
  }
}

/** The WFS endpoint of a --source: an http(s) URL whose path ends in /wfs or /ows. */
/** Whether `uri` is an http(s) URL whose path matches `pattern` (how a --source names a paged service). */
export function isHttpPath(uri: string, pattern: RegExp): boolean {
  if (!/^https?:\/\//i.test(uri)) return false;
  try {
    return pattern.test(new URL(uri).pathname);
  } catch {
    return false;
  }
}

export const isWfsEndpoint = (uri: string): boolean => isHttpPath(uri, /\/(wfs|ows)\/?$/i);

export function wfsUrl(r: WfsRequest, params: Record<string, string | number>): string {
  const u = new URL(r.endpoint);
  const base: Record<string, string | number> = { service: 'WFS', version: r.version, request: 'GetFeature', typeNames: r.typeName };
  for (const [k, v] of Object.entries({ ...base, ...params })) u.searchParams.set(k, String(v));
  return u.toString();
}

const hitsUrl = (r: WfsRequest) => wfsUrl(r, { resultType: 'hits' });
const pageUrl = (r: WfsRequest, startIndex: number) =>
  wfsUrl(r, { outputFormat: r.outputFormat, srsName: r.srsName, sortBy: r.sortBy, count: r.pageSize, startIndex });

// ---------- HTTP ----------

interface Http {
  agents: { http: http.Agent; https: https.Agent };
  s: WfsSettings;
  userAgent: string;
  log?: WfsDownloadOptions['log'];
  /** Names the route in log lines ('wfs retry', 'arcgis retry'). */
  route: string;
}

function agentsFor(s: WfsSettings) {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 1 }),
    https: new https.Agent({
      keepAlive: true,
      maxSockets: 1,
      minVersion: s.tls.minVersion as SecureVersion,
      ciphers: s.tls.ciphers || undefined,
      ca: s.tls.ca ? readFileSync(s.tls.ca) : undefined,
      // OpenSSL 3 refuses servers without RFC 5746 secure renegotiation; some gov.br hosts are such.
      secureOptions: s.tls.legacyRenegotiation ? cryptoConstants.SSL_OP_LEGACY_SERVER_CONNECT : undefined,
    }),
  };
}

/**
 * One GET whose body is streamed to `sink` (a file path) or collected (null). Timeouts:
 * connect, no byte for stallTimeoutMs, the whole body within pageTimeoutMs.
 */
function getOnce(h: Http, url: string, sink: string | null): Promise<{ status: number; type: string; body: Buffer | null; bytes: number }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const secure = u.protocol === 'https:';
    let bytes = 0;
    let settled = false;
    let out: ReturnType<typeof createWriteStream> | null = null;
    const fail = (e: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      out?.destroy();
      req.destroy();
      reject(e instanceof AgroError || e instanceof Retryable ? e : new Retryable(e.message, bytes > 0, noAnswerCode(e)));
    };
    const deadline = setTimeout(() => fail(new Retryable(`page not complete after ${h.s.pageTimeoutMs} ms`, bytes > 0)), h.s.pageTimeoutMs);
    const req = (secure ? https : http).get(u, { agent: secure ? h.agents.https : h.agents.http, headers: { 'user-agent': h.userAgent, accept: '*/*', 'accept-encoding': 'identity' } });
    req.on('socket', (sock) => {
      if (sock.connecting) {
        const t = setTimeout(() => fail(new Retryable(`connect timeout after ${h.s.connectTimeoutMs} ms`, false, 'CONNECT_TIMEOUT')), h.s.connectTimeoutMs);
        sock.once('connect', () => clearTimeout(t));
        sock.once('close', () => clearTimeout(t));
      }
    });
    req.setTimeout(h.s.stallTimeoutMs, () => fail(new Retryable(`stalled: no data for ${h.s.stallTimeoutMs} ms`, bytes > 0)));
    req.on('error', (e) => fail(tlsFailure(url, e, h.s.envPrefix) ?? e));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const type = String(res.headers['content-type'] ?? '');
      if (status !== 200) {
        res.resume();
        res.on('close', () => {
          if (settled) return;
          settled = true;
          clearTimeout(deadline);
          resolve({ status, type, body: null, bytes: 0 });
        });
        return;
      }
      const chunks: Buffer[] = [];
      const file = sink ? createWriteStream(sink) : null;
      out = file;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (!file) chunks.push(c);
        else if (!file.write(c)) {
          res.pause();
          file.once('drain', () => res.resume());
        }
      });
      res.on('error', (e) => fail(e));
      res.on('close', () => {
        if (!res.complete) return fail(new Retryable(`connection closed after ${bytes} bytes`, bytes > 0));
        const declared = res.headers['content-length'];
        if (declared !== undefined && Number(declared) !== bytes) return fail(new Retryable(`short body: ${bytes} of ${declared} bytes`, bytes > 0));
        const done = () => {
          if (settled) return;
          settled = true;
          clearTimeout(deadline);
          resolve({ status, type, body: out ? null : Buffer.concat(chunks), bytes });
        };
        if (file) file.end(done);
        else done();
      });
      file?.on('error', (e) => fail(new AgroError('download_failed', `writing ${sink}: ${e.message}`)));
    });
  });
}

const CERT_ERRORS = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|HOSTNAME|ALTNAME/;

/** A certificate or handshake failure: no retry will fix it, the settings might. */
function tlsFailure(url: string, e: NodeJS.ErrnoException, env: string): AgroError | null {
  const code = e.code ?? '';
  if (!CERT_ERRORS.test(code) && code !== 'EPROTO' && !code.startsWith('ERR_SSL_') && !code.startsWith('ERR_TLS_')) return null;
  return new AgroError('download_failed', `${new URL(url).host}: TLS ${code}: ${e.message.replace(/\s+/g, ' ').trim()} (certificates are always verified: pin the chain with ${env}_TLS_CA, or adjust ${env}_TLS_MIN_VERSION / ${env}_TLS_CIPHERS)`);
}

function backoff(s: WfsSettings, failures: number): number {
  const ceiling = Math.min(s.maxBackoffMs, s.backoffMs * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

/** An OGC ExceptionReport (GeoServer answers errors with it, sometimes with status 200). */
function exceptionText(head: string): string | null {
  if (!/ExceptionReport|ServiceException/i.test(head)) return null;
  const m = /<(?:ows:)?ExceptionText>([\s\S]*?)<\/(?:ows:)?ExceptionText>/i.exec(head) ?? /<ServiceException[^>]*>([\s\S]*?)<\/ServiceException>/i.exec(head);
  return (m?.[1] ?? head).replace(/\s+/g, ' ').trim().slice(0, 500);
}

/**
 * Runs `attempt` until it succeeds. The budget counts consecutive attempts that brought
 * no bytes and resets whenever bytes arrive; a hard cap of 3× the budget stops a server
 * that always cuts mid-body.
 */
async function withRetries<T>(h: Http, url: string, what: string, attempt: () => Promise<T>): Promise<T> {
  const host = watchHost(url);
  let failures = 0;
  for (let n = 1; ; n++) {
    try {
      const got = await attempt();
      host.answered();
      return got;
    } catch (e) {
      if (!(e instanceof Retryable)) {
        // an exception report, a TLS refusal, a 404: the server was reached
        host.answered();
        throw e;
      }
      failures = e.gotBytes ? 0 : failures + 1;
      const stop = host.failed(e.noAnswer);
      if (stop || failures >= h.s.retries || n >= h.s.retries * 3) {
        throw new AgroError('download_failed', `${what}: ${e.message} (${n} attempt${n === 1 ? '' : 's'}${host.gaveUp()})`);
      }
      const wait = backoff(h.s, Math.max(1, failures));
      h.log?.(`${h.route} retry`, { what, reason: e.message, attempt: n, waitMs: wait });
      await sleep(wait);
    }
  }
}

function httpStatusError(url: string, status: number): Error {
  if (status >= 500 || status === 408 || status === 429) return new Retryable(`HTTP ${status}`);
  if (status === 404) return new AgroError('source_not_found', `${url}: HTTP 404`);
  return new AgroError('download_failed', `${url}: HTTP ${status}`);
}

/** The expected count of the layer (WFS resultType=hits, ArcGIS returnCountOnly). */
async function countOf<R>(h: Http, p: PagedProtocol<R>): Promise<number> {
  const url = p.countUrl;
  return withRetries(h, url, `${p.countName} of ${p.what}`, async () => {
    const res = await getOnce(h, url, null);
    if (res.status !== 200) throw httpStatusError(url, res.status);
    return p.parseCount(res.body!.toString('utf8'));
  });
}

/** One GET without retries: the body on a 200, else null (optional metadata, e.g. ArcGIS maxRecordCount). */
async function peek(h: Http, url: string): Promise<string | null> {
  try {
    const res = await getOnce(h, url, null);
    return res.status === 200 ? res.body!.toString('utf8') : null;
  } catch {
    return null;
  }
}

/** numberMatched of a WFS hits answer. */
function parseHits(r: WfsRequest, text: string): number {
  const ex = exceptionText(text.slice(0, 4096));
  if (ex) {
    if (/unknown|not find|does not exist|no such/i.test(ex)) throw new AgroError('source_not_found', `${r.typeName}: ${ex}`);
    throw new Retryable(`server exception: ${ex}`, false);
  }
  // WFS 2.0 numberMatched; WFS 1.1 numberOfFeatures; a JSON hits answer as a last resort.
  const m = /numberMatched"?\s*[=:]\s*"?(\d+)/.exec(text) ?? /numberOfFeatures\s*=\s*"(\d+)"/.exec(text) ?? /"totalFeatures"\s*:\s*(\d+)/.exec(text);
  // An HTML page from a proxy, or numberMatched="unknown": worth another try, then a clear failure.
  if (!m) throw new Retryable(`the hits answer carries no numberMatched: ${text.slice(0, 200).replace(/\s+/g, ' ')}`, false);
  return Number(m[1]);
}

// ---------- pages ----------

/** Features in a WFS page; throws Retryable when it is not a complete FeatureCollection. */
function parseWfsPage(buf: Buffer): { features: number } {
  const head = buf.subarray(0, 4096).toString('utf8').trimStart();
  if (head.startsWith('<')) {
    const ex = exceptionText(head);
    throw new Retryable(ex ? `server exception: ${ex}` : 'the page is XML/HTML, not GeoJSON', false);
  }
  let doc: { type?: string; features?: unknown[] };
  try {
    doc = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    throw new Retryable(`the page is not complete JSON: ${(e as Error).message}`, true);
  }
  if (doc?.type !== 'FeatureCollection' || !Array.isArray(doc.features)) throw new Retryable('the page is not a GeoJSON FeatureCollection', true);
  return { features: doc.features.length };
}

/** The WFS 2.0 protocol: hits, then count/startIndex pages under sortBy until numberMatched (or an empty page). */
export function wfsProtocol(r: WfsRequest): PagedProtocol<WfsRequest, 'wfs'> {
  return {
    route: 'wfs', request: r, what: r.typeName, countUrl: hitsUrl(r), countName: 'hits',
    parseCount: (text) => parseHits(r, text),
    pageUrl: (offset) => pageUrl(r, offset),
    parsePage: parseWfsPage,
    // An empty page: the layer shrank, the quality gate sees the shortfall.
    continues: (last, next, expected) => (last === null || last.features > 0) && next < expected,
    sourceUri: wfsUrl(r, { outputFormat: r.outputFormat, srsName: r.srsName, sortBy: r.sortBy }),
    contentType: r.outputFormat,
  };
}

const pageName = (startIndex: number) => `p${String(startIndex).padStart(10, '0')}.json`;

async function fetchPage<R>(h: Http, p: PagedProtocol<R>, dir: string, startIndex: number): Promise<WfsPage> {
  const file = path.join(dir, pageName(startIndex));
  const part = `${file}.part`;
  const url = p.pageUrl(startIndex);
  return withRetries(h, url, `page at ${startIndex} of ${p.what}`, async () => {
    try {
      const res = await getOnce(h, url, part);
      if (res.status !== 200) throw httpStatusError(url, res.status);
      const buf = await readFile(part);
      const c = p.parsePage(buf);
      await rename(part, file);
      return {
        file: path.basename(file), startIndex, features: c.features, bytes: buf.length, sha256: createHash('sha256').update(buf).digest('hex'),
        ...(c.more !== undefined && { more: c.more }),
      };
    } finally {
      await rm(part, { force: true });
    }
  });
}

async function readSession<R>(file: string): Promise<PagedSession<R> | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as PagedSession<R>;
  } catch {
    return null;
  }
}

export async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  await writeFile(`${file}.tmp`, JSON.stringify(value, null, 1));
  await rename(`${file}.tmp`, file);
}

const sameRequest = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Pages of a stored session that can be reused: listed, present with their size, in an unbroken chain from 0. */
async function reusablePages(dir: string, session: PagedSession<unknown>): Promise<WfsPage[]> {
  const kept: WfsPage[] = [];
  let next = 0;
  for (const p of session.pages) {
    if (p.startIndex !== next) break;
    const st = await stat(path.join(dir, p.file)).catch(() => null);
    if (st?.size !== p.bytes) break;
    kept.push(p);
    next += p.features;
  }
  return kept;
}

/** Removes files of the folder that no kept page lists (a half-written page, an older session). */
async function pruneFolder(dir: string, keep: WfsPage[]): Promise<void> {
  const wanted = new Set(['session.json', ...keep.map((p) => p.file)]);
  for (const f of await readdir(dir)) if (!wanted.has(f)) await rm(path.join(dir, f), { force: true, recursive: true });
}

export function manifestChecksum(m: PagedManifest<unknown>): string {
  // Only what the data depends on: a re-download of identical pages gives the same sum.
  const lines = [JSON.stringify(m.request), String(m.numberMatched), ...m.pages.map((p) => `${p.startIndex}:${p.features}:${p.sha256}`)];
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

/**
 * Downloads every page of `request.typeName` into `o.dir`, resuming a stored session
 * when it is for the same request and the same numberMatched and younger than
 * settings.resumeMaxAgeMs.
 */
export async function downloadWfsLayer(request: WfsRequest, o: WfsDownloadOptions): Promise<WfsDownload> {
  return downloadPaged(async () => wfsProtocol(request), o);
}

/**
 * Downloads every page of a paged layer into `o.dir` (see the top of this file). `make`
 * builds the protocol, and may first read optional metadata with `peek` (one attempt).
 */
export async function downloadPaged<R, Route extends string>(
  make: (peek: (url: string) => Promise<string | null>) => Promise<PagedProtocol<R, Route>>, o: WfsDownloadOptions,
): Promise<PagedDownload<PagedManifest<R, Route>>> {
  const now = o.now ?? (() => new Date());
  const h: Http = { agents: agentsFor(o.settings), s: o.settings, userAgent: o.userAgent, log: o.log, route: 'paged' };
  await mkdir(o.dir, { recursive: true });
  const sessionFile = path.join(o.dir, 'session.json');
  try {
    const p = await make((url) => peek(h, url));
    h.route = p.route;
    const request = p.request;
    const numberMatched = await countOf(h, p);
    const stored = await readSession<R>(sessionFile);
    const fresh = stored && now().getTime() - Date.parse(stored.startedAt) <= o.settings.resumeMaxAgeMs;
    const resumable = stored && fresh && sameRequest(stored.request, request) && stored.numberMatched === numberMatched;
    const pages = resumable ? await reusablePages(o.dir, stored) : [];
    const session: PagedSession<R> = resumable
      ? { ...stored, pages: [...pages], completedAt: stored.completedAt && pages.length === stored.pages.length ? stored.completedAt : null }
      : { request, numberMatched, startedAt: now().toISOString(), completedAt: null, pages: [] };
    await pruneFolder(o.dir, pages);
    await writeJsonAtomic(sessionFile, session);
    if (pages.length) o.log?.(`${p.route} resume`, { layer: p.what, pages: pages.length, features: pages.reduce((a, x) => a + x.features, 0) });

    const requestedPages: number[] = [];
    let next = pages.reduce((a, x) => a + x.features, 0);
    if (!session.completedAt) {
      let last = pages.at(-1) ?? null;
      while (p.continues(last, next, numberMatched)) {
        requestedPages.push(next);
        const page = await fetchPage(h, p, o.dir, next);
        session.pages.push(page);
        await writeJsonAtomic(sessionFile, session);
        o.log?.(`${p.route} page`, { layer: p.what, startIndex: next, features: page.features, of: numberMatched });
        next += page.features;
        last = page;
      }
      session.completedAt = now().toISOString();
      await writeJsonAtomic(sessionFile, session);
    }
    const numberMatchedAfter = requestedPages.length ? await countOf(h, p) : numberMatched;
    const manifest: PagedManifest<R, Route> = {
      route: p.route, request, numberMatched, numberMatchedAfter,
      features: session.pages.reduce((a, x) => a + x.features, 0),
      pages: session.pages,
    };
    const manifestPath = path.join(o.dir, 'manifest.json');
    await writeJsonAtomic(manifestPath, manifest);
    return { manifest, manifestPath, requestedPages, resumedPages: pages.length };
  } finally {
    h.agents.http.destroy();
    h.agents.https.destroy();
  }
}

/** The download as the engine's one source file: the manifest, whose checksum covers every page. */
export async function manifestFile(d: PagedDownload<PagedManifest<unknown>>, name: string, p: Pick<PagedProtocol<unknown>, 'sourceUri' | 'contentType'>): Promise<FetchedFile> {
  const st = await stat(d.manifestPath);
  return {
    path: d.manifestPath, name, sha256: manifestChecksum(d.manifest), size: st.size,
    sourceUri: p.sourceUri, contentType: p.contentType, fromCache: d.requestedPages.length === 0,
  };
}

/** A stored paged download's manifest of the given route ('wfs', 'arcgis'); what names it in the error otherwise. */
export async function readPagedManifest<M extends PagedManifest<unknown>>(file: string, route: M['route'], what: string): Promise<M> {
  const m = JSON.parse(await readFile(file, 'utf8')) as M;
  if (m.route !== route || !Array.isArray(m.pages)) throw new AgroError('malformed_source', `${file} is not ${what} download manifest`);
  return m;
}

export const readManifest = (file: string): Promise<WfsManifest> => readPagedManifest<WfsManifest>(file, 'wfs', 'a WFS');
