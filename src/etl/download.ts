// Fetches one source file into the raw store: local paths, file:// and http(s)://.
// Government hosts drop connections, stall, answer HTML error pages with 200 and
// need legacy TLS, so downloads resume with Range, retry with backoff, and every
// file is validated before it replaces the previous one.
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SecureVersion } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { AgroError, isAgroError } from '../errors.ts';
import { sourceSchemeProblem } from '../config.ts';
import { progress } from '../progress.ts';
import { checkZipDirectory, firstContentByte, readHead, type ZipLimits } from './archive.ts';
import { noAnswerCode, watchHost, type HostWatch } from './unreachable-hosts.ts';

export interface FetchedFile {
  path: string;
  name: string;
  sha256: string;
  size: number;
  sourceUri: string;
  etag?: string;
  lastModified?: string;
  contentType?: string;
  fromCache: boolean;
}

export interface FetchOptions {
  destDir: string;
  name?: string;
  userAgent: string;
  expect?: 'zip' | 'csv' | 'any';
  retries?: number;
  stallTimeoutMs?: number;
  backoffMs?: number;
  optional?: boolean;
  agentOptions?: { ciphers?: string; minVersion?: string };
  /** Bounds on what a zip may inflate to (config `zip`; archive.ts defaults otherwise). */
  zipLimits?: ZipLimits;
  log?: (msg: string, extra?: Record<string, unknown>) => void;
  /** Extra request headers (e.g. Basic auth of a public share). */
  headers?: Record<string, string>;
}

interface Validators {
  etag?: string;
  lastModified?: string;
  contentType?: string;
}

/** `<name>.meta.json`: describes the stored file, used for conditional requests. */
interface Meta extends Validators {
  sourceUri: string;
  sha256: string;
  size: number;
  fetchedAt: string;
}

/** `<name>.part.json`: what the .part belongs to, so a resume can send If-Range and check the 206. */
interface PartInfo extends Validators {
  sourceUri: string;
  /** The whole file's size the 200 declared (Content-Length): a 206 for another size is another file. */
  total?: number;
  /** The .part holds a compressed body (Content-Encoding): never resumed, Range counts encoded bytes. */
  encoded?: boolean;
}

interface Paths {
  final: string;
  part: string;
  partInfo: string;
  meta: string;
}

interface Job {
  uri: string;
  name: string;
  p: Paths;
  opts: FetchOptions;
}

const MAX_REDIRECTS = 5;
const MAX_BACKOFF_MS = 120_000;
const WRITE_BUFFER = 1 << 20;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/**
 * Fewer bytes than this in a whole stall window is a stall too (a server trickling a byte every
 * few seconds never goes idle), and an attempt that brought fewer is no progress: else a trickle
 * resets the retry budget at every resume and the run never ends. No real transfer is this slow.
 */
const MIN_BYTES = 4096;

/** A failure worth another attempt (network, stall, 5xx, short body). */
class Retryable extends Error {
  /** Set when the attempt never reached the server (unreachable-hosts.ts noAnswerCode). */
  constructor(message: string, readonly noAnswer?: string) {
    super(message);
  }
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  await hashInto(hash, file);
  return hash.digest('hex');
}

async function hashInto(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

/** An http(s) URL (anything else is a local path or a file:// URL). */
export const isHttp = (uri: string): boolean => /^https?:\/\//i.test(uri);

/** A source as given (contract §1: a path, a file:// or an http(s):// URL); another scheme is a usage error (sourceSchemeProblem). */
export function checkSourceScheme(uri: string, what: string): string {
  const problem = sourceSchemeProblem(uri);
  if (problem) throw new AgroError('usage', `${what} ${problem}`);
  return uri;
}

export function joinSource(base: string, name: string): string {
  if (isHttp(base) || base.startsWith('file:')) return `${base.replace(/\/+$/, '')}/${encodeURIComponent(name)}`;
  return path.join(base, name);
}

function defaultName(uri: string): string {
  if (!isHttp(uri)) return path.basename(localPath(uri));
  const last = new URL(uri).pathname.split('/').pop() ?? '';
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

function checkName(name: string): string {
  if (!name || name === '.' || name === '..' || /[\\/]/.test(name)) {
    throw new AgroError('invalid_request', `not a plain file name: ${JSON.stringify(name)}`);
  }
  return name;
}

/** The absolute local path of a path or file:// URL. */
export const localPath = (uri: string): string => (uri.startsWith('file:') ? fileURLToPath(uri) : path.resolve(uri));

function pathsFor(destDir: string, name: string): Paths {
  const final = path.join(destDir, name);
  return { final, part: `${final}.part`, partInfo: `${final}.part.json`, meta: `${final}.meta.json` };
}

export async function fetchSource(uri: string, opts: FetchOptions): Promise<FetchedFile | null> {
  const name = checkName(opts.name ?? defaultName(uri));
  await mkdir(opts.destDir, { recursive: true });
  const job: Job = { uri, name, p: pathsFor(opts.destDir, name), opts };
  return isHttp(uri) ? fetchHttp(job) : fetchLocal(job);
}

/**
 * The file already in the raw store under `name`, as its last validated download left it
 * (meta written only after validation), when it still has the recorded size; else null.
 */
export async function storedFile(destDir: string, name: string): Promise<FetchedFile | null> {
  const p = pathsFor(destDir, checkName(name));
  const meta = await readJson<Meta>(p.meta);
  if (!meta || (await sizeOf(p.final)) !== meta.size) return null;
  const { etag, lastModified, contentType, sha256, size, sourceUri } = meta;
  return { path: p.final, name, sha256, size, sourceUri, etag, lastModified, contentType, fromCache: true };
}

/** What a download in the middle leaves: `<name>.part`, `<name>.part.json` (and its `.tmp`). */
const PARTIAL = /\.part(\.json(\.tmp)?)?$/;

/**
 * Removes the partial downloads under `dir` and its folders (a month's, a WFS layer's); what it
 * removed, paths relative to `dir`. Only for a caller no download writes there any more: a
 * run, after its downloads, holding its scope's lock. Never throws: a file it cannot remove stays.
 */
export async function removePartials(dir: string): Promise<{ file: string; bytes: number }[]> {
  const removed: { file: string; bytes: number }[] = [];
  const walk = async (d: string): Promise<void> => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      const f = path.join(d, e.name);
      if (e.isDirectory()) await walk(f);
      else if (e.isFile() && PARTIAL.test(e.name)) {
        const bytes = await sizeOf(f).catch(() => 0);
        if (await rm(f).then(() => true, () => false)) removed.push({ file: path.relative(dir, f), bytes });
      }
    }
  };
  await walk(dir);
  return removed;
}

// ---------- small fs helpers ----------

async function sizeOf(file: string): Promise<number> {
  try {
    return (await stat(file)).size;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw e;
  }
}

async function readJson<T>(file: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return null; // missing or half-written: treated as unknown
  }
}

async function writeJsonAtomic(file: string, value: unknown): Promise<void> {
  await writeFile(`${file}.tmp`, JSON.stringify(value, null, 2));
  await rename(`${file}.tmp`, file);
}

async function discardPart(p: Paths): Promise<void> {
  await rm(p.part, { force: true });
  await rm(p.partInfo, { force: true });
}

// ---------- local sources ----------

async function fetchLocal(job: Job): Promise<FetchedFile | null> {
  const src = localPath(job.uri);
  const st = await stat(src).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return null;
    throw e;
  });
  if (!st?.isFile()) {
    if (job.opts.optional) return null;
    throw new AgroError('source_not_found', `${src}: no such file`);
  }
  // Validated where it lies: a file that fails never reaches the raw store.
  await validateFile(job, src, undefined);
  // A local copy is not resumed: a failed one (a full disk) leaves no partial file behind.
  await copyFile(src, job.p.part).catch(async (e) => {
    await rm(job.p.part, { force: true });
    throw e;
  });
  progress().bytes(job.p.part, st.size, st.size);
  return commit(job, await sha256File(job.p.part), st.size, {});
}

// ---------- validation and commit ----------

/** HTML sniffing: zip and csv must not start with '<'; any kind must not be an HTML page. */
function looksLikeHtml(head: Buffer, expect: 'zip' | 'csv' | 'any'): boolean {
  if (head.subarray(0, 2).toString('latin1') === 'PK') return false;
  const text = head.toString('latin1').toLowerCase();
  if (text.includes('<html') || text.includes('<!doctype html')) return true;
  const first = firstContentByte(head);
  return expect !== 'any' && first >= 0 && head[first] === 0x3c;
}

/** What a message says the bytes came from: a server's answer or a local file. */
const origin = (job: Job): string => (isHttp(job.uri) ? `the server's answer for ${job.uri}` : `the local file ${localPath(job.uri)}`);

/** Checks `file` (the .part of a download, or a local source in place) against what the job expects. */
async function validateFile(job: Job, file: string, contentType: string | undefined): Promise<void> {
  const expect = job.opts.expect ?? 'any';
  if ((await sizeOf(file)) === 0) throw new AgroError('download_failed', `${origin(job)} is empty`);
  if (expect === 'zip' && isHtmlType(contentType)) {
    throw new AgroError('html_instead_of_archive', `${origin(job)} has content-type ${contentType}`);
  }
  if (looksLikeHtml(await readHead(file, 1024), expect)) {
    throw new AgroError('html_instead_of_archive', `${origin(job)} is an HTML page`);
  }
  // Not inflated here: the read step inflates each member once and checks its CRC then.
  if (expect === 'zip') await checkZipDirectory(file, job.opts.zipLimits);
}

/**
 * Called when the read step finds a stored file damaged (a member's CRC or size): its meta
 * goes, so the next fetch asks for the whole file again instead of answering from the store
 * (a 304 or an unchanged copy would bring the same damaged bytes back every night).
 */
export async function distrustStored(file: string): Promise<void> {
  await rm(pathsFor(path.dirname(file), path.basename(file)).meta, { force: true });
}

/** Runs a read of a stored zip; when the zip turns out damaged (a member's CRC or size), the store stops trusting it before the error goes on. */
export async function readingStored<T>(file: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (e) {
    await distrustIfDamaged(file, e);
    throw e;
  }
}

/** The store stops trusting `file` when `e` says the zip itself is damaged (a member's CRC or size). */
export async function distrustIfDamaged(file: string, e: unknown): Promise<void> {
  if (isAgroError(e) && (e.code === 'corrupt_archive' || e.code === 'archive_too_large')) await distrustStored(file);
}

const isHtmlType = (ct: string | undefined): boolean => /^\s*(text\/html|application\/xhtml)/i.test(ct ?? '');

/** Validates a downloaded .part (dropping it when it fails), then commits it. */
async function finish(job: Job, sha256: string, size: number, v: Validators): Promise<FetchedFile> {
  try {
    await validateFile(job, job.p.part, v.contentType);
  } catch (e) {
    await discardPart(job.p);
    throw e;
  }
  return commit(job, sha256, size, v);
}

/**
 * Swaps a validated .part in as the stored file. The old meta goes first so a crash never
 * pairs it with new bytes. Identical bytes to the previous file count as "from cache".
 */
async function commit(job: Job, sha256: string, size: number, v: Validators): Promise<FetchedFile> {
  const { p } = job;
  const unchanged = (await readJson<Meta>(p.meta))?.sha256 === sha256 && (await sizeOf(p.final)) === size;
  await rm(p.meta, { force: true });
  await rename(p.part, p.final);
  await rm(p.partInfo, { force: true });
  const meta: Meta = { sourceUri: job.uri, sha256, size, ...v, fetchedAt: new Date().toISOString() };
  await writeJsonAtomic(p.meta, meta);
  return { path: p.final, name: job.name, sha256, size, sourceUri: job.uri, ...v, fromCache: unchanged };
}

// ---------- http(s) ----------

interface HttpJob extends Job {
  agents: { http: http.Agent; https: https.Agent };
  stallMs: number;
  /**
   * Largest .part size this fetch reached. A restart from zero is progress only beyond it: a
   * server that ignores Range and cuts every answer at the same byte must not retry forever.
   */
  best: number;
  /** The .part size a 206 of this attempt appended to (null: the attempt did not append). */
  appendedTo: number | null;
  /** The source's host: any answer from it (a redirect too) tells it is up. */
  host: HostWatch;
}

async function fetchHttp(job: Job): Promise<FetchedFile | null> {
  const { opts } = job;
  const agents = {
    http: new http.Agent({ keepAlive: false }),
    https: new https.Agent({
      keepAlive: false,
      ciphers: opts.agentOptions?.ciphers,
      minVersion: opts.agentOptions?.minVersion as SecureVersion | undefined,
    }),
  };
  const hj: HttpJob = { ...job, agents, stallMs: opts.stallTimeoutMs ?? 60_000, best: await sizeOf(job.p.part), appendedTo: null, host: watchHost(job.uri) };
  try {
    return await withRetries(hj);
  } finally {
    agents.http.destroy();
    agents.https.destroy();
  }
}

function backoff(base: number, failures: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, base * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

async function withRetries(hj: HttpJob): Promise<FetchedFile | null> {
  const retries = hj.opts.retries ?? 5;
  const { host } = hj;
  let failures = 0;
  for (;;) {
    hj.appendedTo = null;
    try {
      const got = await attempt(hj);
      host.answered();
      return got;
    } catch (e) {
      if (!(e instanceof Retryable)) {
        // a 404, a TLS refusal, a bad answer: the server was reached
        if (!noAnswerCode(e)) host.answered();
        throw e;
      }
      const size = await sizeOf(hj.p.part);
      // Progress: a resume that appended bytes, or a .part larger than ever before.
      if (size >= hj.best + MIN_BYTES || (hj.appendedTo !== null && size >= hj.appendedTo + MIN_BYTES)) failures = 0;
      else failures++;
      hj.best = Math.max(hj.best, size);
      const stop = host.failed(e.noAnswer);
      if (stop || failures >= retries) {
        throw new AgroError('download_failed', `${hj.uri}: ${e.message} (${failures} attempt${failures === 1 ? '' : 's'} without progress${host.gaveUp()})`);
      }
      const wait = backoff(hj.opts.backoffMs ?? 1000, failures);
      hj.opts.log?.('download retry', { uri: hj.uri, reason: e.message, bytes: size, failures, waitMs: wait });
      await sleep(wait);
    }
  }
}

/** Current .part size, dropping a .part that belongs to another URI. */
async function resumeState(hj: HttpJob): Promise<{ have: number; info: PartInfo | null }> {
  const have = await sizeOf(hj.p.part);
  if (have === 0) return { have: 0, info: null };
  const info = await readJson<PartInfo>(hj.p.partInfo);
  if (info && (info.sourceUri !== hj.uri || info.encoded)) {
    await discardPart(hj.p);
    return { have: 0, info: null };
  }
  return { have, info };
}

/** Meta usable for a conditional request: same URI, a validator, and the file still matches its size. */
async function cachedMeta(hj: HttpJob): Promise<Meta | null> {
  const meta = await readJson<Meta>(hj.p.meta);
  if (!meta || meta.sourceUri !== hj.uri || !(meta.etag || meta.lastModified)) return null;
  return (await sizeOf(hj.p.final)) === meta.size ? meta : null;
}

function requestHeaders(ua: string, have: number, info: PartInfo | null, cached: Meta | null): Record<string, string> {
  const h: Record<string, string> = { 'user-agent': ua, 'accept-encoding': 'identity' };
  if (have > 0) {
    h.range = `bytes=${have}-`;
    // If-Range needs a strong validator; a weak ETag would always yield 200.
    const v = info?.etag && !info.etag.startsWith('W/') ? info.etag : info?.lastModified;
    if (v) h['if-range'] = v;
  } else if (cached) {
    if (cached.etag) h['if-none-match'] = cached.etag;
    if (cached.lastModified) h['if-modified-since'] = cached.lastModified;
  }
  return h;
}

function requestOnce(hj: HttpJob, url: URL, headers: Record<string, string>): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:';
    const get = secure ? https.get : http.get;
    let response: http.IncomingMessage | undefined;
    const req = get(url, { headers, agent: secure ? hj.agents.https : hj.agents.http }, (res) => {
      // The first host answered, even if only with a redirect to one that does not.
      if (url.host === new URL(hj.uri).host) hj.host.answered();
      response = res;
      resolve(res);
    });
    // Socket idle timeout: covers both waiting for headers and a body that stops flowing.
    req.setTimeout(hj.stallMs, () => {
      // Still resolving or connecting: the server was never reached.
      const connecting = !response && (!req.socket || req.socket.connecting);
      const err = Object.assign(new Error(connecting ? `no connection after ${hj.stallMs} ms` : `stalled: no data for ${hj.stallMs} ms`), connecting ? { code: 'CONNECT_TIMEOUT' } : {});
      response?.destroy(err);
      req.destroy(err);
    });
    req.on('error', (e) => reject(new Retryable(e.message, noAnswerCode(e))));
  });
}

async function request(hj: HttpJob, headers: Record<string, string>): Promise<http.IncomingMessage> {
  let url = new URL(hj.uri);
  for (let hop = 0; ; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new AgroError('download_failed', `${hj.uri}: unsupported redirect to ${url.href}`);
    }
    const res = await requestOnce(hj, url, headers);
    const location = res.headers.location;
    if (!REDIRECTS.has(res.statusCode ?? 0) || !location) return res;
    res.resume();
    if (hop >= MAX_REDIRECTS) throw new AgroError('download_failed', `${hj.uri}: more than ${MAX_REDIRECTS} redirects`);
    const next = new URL(location, url);
    // Credentials are for the server they were given for (Receita's share token): a redirect
    // to another origin gets none, as browsers and curl do.
    if (next.origin !== url.origin) headers = withoutCredentials(headers);
    url = next;
  }
}

const CREDENTIALS = new Set(['authorization', 'proxy-authorization', 'cookie']);
const withoutCredentials = (h: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(h).filter(([k]) => !CREDENTIALS.has(k.toLowerCase())));

const header = (res: http.IncomingMessage, name: string): string | undefined => {
  const v = res.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

function validatorsOf(res: http.IncomingMessage, fallback: PartInfo | null): Validators {
  return {
    etag: header(res, 'etag') ?? fallback?.etag,
    lastModified: header(res, 'last-modified') ?? fallback?.lastModified,
    contentType: header(res, 'content-type') ?? fallback?.contentType,
  };
}

/** Content-Range "bytes start-end/total" → start and total (total NaN when '*'). */
function contentRange(res: http.IncomingMessage): { start: number; total: number } | null {
  const m = /^bytes\s+(\d+)-\d+\/(\d+|\*)$/i.exec(header(res, 'content-range') ?? '');
  return m ? { start: Number(m[1]), total: Number(m[2]) } : null;
}

/** Any status other than 200/206: a cached result, null (optional and missing) or an error. */
async function answerStatus(hj: HttpJob, res: http.IncomingMessage, have: number, info: PartInfo | null, cached: Meta | null, resumeHash: Hash): Promise<FetchedFile | null> {
  const status = res.statusCode ?? 0;
  if (status === 304 && cached) return fromCache(hj, cached);
  if (status === 404 || status === 410) {
    await discardPart(hj.p);
    if (hj.opts.optional) return null;
    throw new AgroError('source_not_found', `${hj.uri}: HTTP ${status}`);
  }
  if (status === 416 && have > 0) {
    // The .part is the whole file (a cut before the last chunk): the server says the file has
    // exactly its size, and the same version (its validators, or the size its 200 declared).
    const whole = /^bytes\s+\*\/(\d+)$/i.exec(header(res, 'content-range') ?? '');
    const same = info && (info.total === have || (info.total === undefined && (info.etag || info.lastModified) && !otherFile(res, info, null)));
    if (whole && Number(whole[1]) === have && same) {
      return finish(hj, resumeHash.digest('hex'), have, { etag: info.etag, lastModified: info.lastModified, contentType: info.contentType });
    }
    // The .part no longer fits the remote file: start from zero.
    await discardPart(hj.p);
    throw new Retryable('HTTP 416 for the resume range');
  }
  if (status >= 500 || status === 408 || status === 429) throw new Retryable(`HTTP ${status}`);
  throw new AgroError('download_failed', `${hj.uri}: HTTP ${status}`);
}

function fromCache(hj: HttpJob, meta: Meta): FetchedFile {
  const { etag, lastModified, contentType, sha256, size } = meta;
  return { path: hj.p.final, name: hj.name, sha256, size, sourceUri: hj.uri, etag, lastModified, contentType, fromCache: true };
}

async function attempt(hj: HttpJob): Promise<FetchedFile | null> {
  const { have, info } = await resumeState(hj);
  const cached = have === 0 ? await cachedMeta(hj) : null;
  // Hash the kept bytes before asking: once the response arrives its body must be
  // consumed at once, or a connection cut would discard what was already buffered.
  const resumeHash = createHash('sha256');
  if (have > 0) await hashInto(resumeHash, hj.p.part);
  const res = await request(hj, { ...hj.opts.headers, ...requestHeaders(hj.opts.userAgent, have, info, cached) });
  const status = res.statusCode ?? 0;
  if (status === 200 || status === 206) return receive(hj, res, have, info, resumeHash);
  res.resume();
  return answerStatus(hj, res, have, info, cached, resumeHash);
}

async function receive(hj: HttpJob, res: http.IncomingMessage, have: number, info: PartInfo | null, resumeHash: Hash): Promise<FetchedFile> {
  const append = res.statusCode === 206;
  const range = append ? contentRange(res) : null;
  const changed = append ? otherFile(res, info, range) : null;
  if (append && (range?.start !== have || changed)) {
    res.resume();
    await discardPart(hj.p);
    throw new Retryable(changed ?? `unexpected Content-Range ${header(res, 'content-range')}`);
  }
  const encoding = contentEncoding(res);
  if (encoding && !DECODERS[encoding]) {
    res.resume();
    throw new AgroError('download_failed', `${hj.uri}: the body came in Content-Encoding ${encoding}, which cannot be decoded (identity was asked for)`);
  }
  if (append) hj.appendedTo = have;
  const v = validatorsOf(res, append ? info : null);
  const hash = append ? resumeHash : createHash('sha256');
  const body = writeBody(res, hj.p.part, append, hash, hj.stallMs); // attaches its listeners synchronously
  const declared = Number(header(res, 'content-length') ?? NaN);
  const partInfo: PartInfo = { sourceUri: hj.uri, ...v, ...(encoding ? { encoded: true } : Number.isFinite(declared) ? { total: declared } : {}) };
  const described = append ? null : writeJsonAtomic(hj.p.partInfo, partInfo);
  let received: number;
  try {
    received = await body;
  } finally {
    await described; // the next attempt must find what the .part belongs to
  }
  const size = (append ? have : 0) + received;
  checkLength(res, received, size, range);
  if (encoding) {
    const decoded = await decodePart(hj, encoding);
    return finish(hj, decoded.sha256, decoded.size, v);
  }
  return finish(hj, hash.digest('hex'), size, v);
}

/**
 * Servers that compress on the fly although identity was asked for (node does not decode):
 * the raw store keeps the file itself, never its gzip.
 */
const DECODERS: Record<string, () => Transform> = {
  gzip: () => zlib.createUnzip(),
  'x-gzip': () => zlib.createUnzip(),
  deflate: () => zlib.createUnzip(),
  br: () => zlib.createBrotliDecompress(),
};

/** The response's Content-Encoding, lower-case; null for none or identity. */
function contentEncoding(res: http.IncomingMessage): string | null {
  const e = (header(res, 'content-encoding') ?? '').trim().toLowerCase();
  return e && e !== 'identity' ? e : null;
}

/** Replaces a complete compressed .part by its decoded bytes; their hash and size. */
async function decodePart(hj: HttpJob, encoding: string): Promise<{ sha256: string; size: number }> {
  const decoded = `${hj.p.part}.decoded`;
  const hash = createHash('sha256');
  let size = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    await pipeline(createReadStream(hj.p.part), DECODERS[encoding](), count, createWriteStream(decoded));
  } catch (e) {
    await rm(decoded, { force: true });
    await discardPart(hj.p);
    if ((e as NodeJS.ErrnoException).syscall) throw e; // the disk (a full one: disk_full), not the body
    throw new Retryable(`the ${encoding} body does not decode: ${(e as Error).message}`);
  }
  await rename(decoded, hj.p.part);
  return { sha256: hash.digest('hex'), size };
}

/**
 * Why a 206 is the rest of another version than the .part holds (a server that ignores
 * If-Range, or one without validators whose file changed size), else null: appending it
 * would stitch two versions into one file that no check downstream can tell from the real one.
 */
function otherFile(res: http.IncomingMessage, info: PartInfo | null, range: { total: number } | null): string | null {
  if (contentEncoding(res)) return `the 206 is compressed (Content-Encoding ${contentEncoding(res)})`;
  const etag = header(res, 'etag');
  if (etag && info?.etag && etag !== info.etag) return `the 206 is of ETag ${etag}, the .part of ${info.etag}`;
  const modified = header(res, 'last-modified');
  if (modified && info?.lastModified && modified !== info.lastModified) return `the 206 is of Last-Modified ${modified}, the .part of ${info.lastModified}`;
  if (range && Number.isFinite(range.total) && info?.total !== undefined && range.total !== info.total) return `the 206 is of a ${range.total}-byte file, the .part of a ${info.total}-byte one`;
  return null;
}

/**
 * Streams the body to the .part; on a broken connection keeps the bytes received.
 * A destroyed response drops whatever it still buffers, so the body flows through
 * 'data' events (not an async iterator) and the file stream gets a roomy buffer,
 * which makes pausing the response (and losing its buffer on a cut) rare.
 */
function writeBody(res: http.IncomingMessage, file: string, append: boolean, hash: Hash, stallMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(file, { flags: append ? 'a' : 'w', highWaterMark: WRITE_BUFFER });
    const p = progress();
    const declared = Number(header(res, 'content-length'));
    let received = 0;
    let broken: Error | undefined;
    let ended = false;
    let windowStart = 0;
    const slow = setInterval(() => {
      if (!res.complete && received - windowStart < MIN_BYTES) res.destroy(new Error(`too slow: ${received - windowStart} bytes in ${stallMs} ms`));
      windowStart = received;
    }, stallMs);
    const stop = (): void => {
      clearInterval(slow);
      if (!res.complete) broken ??= new Error('connection closed');
      if (!ended) out.end();
      ended = true;
    };
    res.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      received += chunk.length;
      p.bytes(file, received, Number.isFinite(declared) ? declared : null);
      if (!out.write(chunk)) {
        res.pause();
        out.once('drain', () => res.resume());
      }
    });
    res.on('error', (e) => (broken ??= e));
    res.on('close', stop);
    if (res.destroyed) stop();
    out.on('error', (e) => {
      res.destroy();
      reject(e);
    });
    out.on('finish', () => {
      if (broken) reject(new Retryable(`connection broken after ${received} bytes: ${broken.message}`));
      else resolve(received);
    });
  });
}

function checkLength(res: http.IncomingMessage, received: number, size: number, range: { total: number } | null): void {
  const declared = header(res, 'content-length');
  if (declared !== undefined && Number(declared) !== received) {
    throw new Retryable(`short body: ${received} of ${declared} bytes`);
  }
  if (range && Number.isFinite(range.total) && range.total !== size) {
    throw new Retryable(`short body: ${size} of ${range.total} bytes`);
  }
}
