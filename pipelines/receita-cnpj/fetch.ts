// Discovery and download of one Receita CNPJ month (SOURCES §10.1, §1.7).
//
// Source forms (--source, else config): a WebDAV folder URL of the Nextcloud share (the
// `YYYY-MM` folders are listed with PROPFIND Depth 1, the newest is taken, then its zips are
// listed the same way), a local folder of `YYYY-MM` folders (newest taken), or one month's
// folder. Every one of the 37 zips must be there: a month missing any is not loaded.
//
// Downloads go through the engine's downloader (src/etl/download.ts: `.part` + Range
// resume, retry budget that resets when bytes arrive, backoff, zip CRC validation before the
// rename) into <raw>/<YYYY-MM>/. A file already downloaded and validated whose size and ETag
// (or Last-Modified) match the listing is not fetched again. Receita publishes no checksums:
// size and SHA-256 of every file go into the snapshot's source (engine). Files download in
// parallel, 4 at a time; when transfers stall, parallelism steps down to 2, then 1, for the
// rest of the run.
import fs from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError } from '../../src/errors.ts';
import { distrustStored, fetchSource, isHttp, localPath, storedFile, type FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import { pickSourceFile, type SourceLayout } from '../../src/etl/source-files.ts';
import { propfind, redactUrl, type DavEntry } from '../../src/etl/webdav.ts';
import { MONTH_ZIPS } from './relations.ts';

const MONTH = /^\d{4}-(0[1-9]|1[0-2])$/;

/** A month among a folder's names (local or listed): the one picker, the newest `YYYY-MM` by name. */
const MONTH_FOLDER: SourceLayout = { pattern: MONTH, ext: MONTH, what: 'YYYY-MM month folder' };

/** The newest `YYYY-MM` name of a listing (folders only when the listing says which are folders), or null when it has none. */
export function newestMonth(entries: { name: string; collection?: boolean }[]): string | null {
  const names = entries.filter((e) => e.collection !== false).map((e) => e.name);
  return names.some((n) => MONTH.test(n)) ? pickSourceFile(names, MONTH_FOLDER, 'listing') : null;
}

/** The month's file for each expected zip (case-insensitive), or the list of missing ones. */
export function matchMonthZips<T extends { name: string }>(entries: T[]): { files: Map<string, T>; missing: string[] } {
  const byLower = new Map(entries.map((e) => [e.name.toLowerCase(), e]));
  const files = new Map<string, T>();
  const missing: string[] = [];
  for (const z of MONTH_ZIPS) {
    const e = byLower.get(`${z.toLowerCase()}.zip`);
    if (e) files.set(z, e);
    else missing.push(`${z}.zip`);
  }
  return { files, missing };
}

/** Parallelism that steps down 4 → 2 → 1 after repeated stalls, for the rest of the run. */
export class SteppingLimiter {
  private active = 0;
  private stalls = 0;
  private waiters: (() => void)[] = [];
  constructor(
    public limit: number,
    private readonly stallsPerStep: number,
    private readonly onStep: (limit: number) => void,
  ) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    while (this.active >= this.limit) await new Promise<void>((r) => this.waiters.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiters.shift()?.();
    }
  }
  stalled(): void {
    if (++this.stalls < this.stallsPerStep || this.limit <= 1) return;
    this.stalls = 0;
    this.limit = this.limit > 2 ? 2 : 1;
    this.onStep(this.limit);
  }
}

/** Retry reasons that mean the server stalled or cut the transfer (not an HTTP error answer). */
const STALL = /stalled|broken|short body|ECONNRESET|socket hang up|timeout/i;

interface Listed {
  name: string;
  uri: string;
  size: number | null;
  etag: string | null;
  lastModified: string | null;
}

async function listSource(ctx: RunContext, source: string): Promise<{ month: string; files: Listed[]; token?: string }> {
  const cfg = ctx.cfg.receitaCnpj;
  if (isHttp(source)) {
    const base = new URL(source);
    const token = base.username ? decodeURIComponent(base.username) : cfg.shareToken;
    base.username = '';
    base.password = '';
    // A silent share fails the listing within the family's own stall timeout, as its transfers do.
    const o = { userAgent: ctx.cfg.userAgent, token, timeoutMs: cfg.stallTimeoutMs };
    let folder = base.href.endsWith('/') ? base.href : `${base.href}/`;
    let month = folder.replace(/\/+$/, '').split('/').pop() ?? '';
    if (!MONTH.test(decodeURIComponent(month))) {
      const top = await propfind(folder, o);
      const newest = newestMonth(top);
      if (!newest) throw new AgroError('source_not_found', `${redactUrl(base)} lists no YYYY-MM folder`);
      month = newest;
      folder = `${folder}${encodeURIComponent(newest)}/`;
    } else month = decodeURIComponent(month);
    const entries = (await propfind(folder, o)).filter((e: DavEntry) => !e.collection);
    const { files, missing } = matchMonthZips(entries);
    if (missing.length) throw new AgroError('source_not_found', `${redactUrl(new URL(folder))}: month ${month} is incomplete, missing ${missing.join(', ')}`);
    return {
      month, token,
      files: [...files.values()].map((e) => ({ name: e.name, uri: new URL(e.href, folder).href, size: e.size, etag: e.etag, lastModified: e.lastModified })),
    };
  }
  let dir = localPath(source);
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new AgroError('source_not_found', `${dir}: not a folder of YYYY-MM months or of one month's zips`);
  let month = path.basename(dir);
  const entries = fs.readdirSync(dir, { withFileTypes: true });
  // A folder of months (no zips of its own): the newest month folder, through the one picker.
  if (!entries.some((e) => e.isFile() && /\.zip$/i.test(e.name))) {
    const months = entries.filter((e) => e.isDirectory()).map((e) => e.name);
    if (months.some((n) => MONTH.test(n))) {
      month = pickSourceFile(months, MONTH_FOLDER, dir);
      dir = path.join(dir, month);
    }
  }
  if (!MONTH.test(month)) throw new AgroError('source_not_found', `${dir}: the month's folder must be named YYYY-MM`);
  const { files, missing } = matchMonthZips(fs.readdirSync(dir).map((n) => ({ name: n })));
  if (missing.length) throw new AgroError('source_not_found', `${dir}: month ${month} is incomplete, missing ${missing.join(', ')}`);
  return { month, files: [...files.values()].map((e) => ({ name: e.name, uri: path.join(dir, e.name), size: null, etag: null, lastModified: null })) };
}

/** Reuses a validated download when the listing still describes the same bytes. */
async function reusable(destDir: string, f: Listed): Promise<FetchedFile | null> {
  if (f.size === null || (!f.etag && !f.lastModified)) return null;
  const s = await storedFile(destDir, f.name);
  if (!s || s.size !== f.size || s.sourceUri !== f.uri) return null;
  const same = f.etag ? s.etag === f.etag : s.lastModified === f.lastModified;
  return same ? s : null;
}

export async function fetchMonth(ctx: RunContext): Promise<FetchedFile[]> {
  const source = ctx.options.source ?? ctx.cfg.sources['receita-cnpj'];
  if (!source) throw new AgroError('usage', 'receita-cnpj needs --source <share WebDAV URL, a folder of YYYY-MM months, or one month folder>');
  const cfg = ctx.cfg.receitaCnpj;
  const { month, files, token } = await listSource(ctx, source);
  const destDir = path.join(ctx.rawDir, month);
  ctx.log.info({ month, files: files.length }, 'receita-cnpj: month found');
  const limiter = new SteppingLimiter(cfg.parallel, cfg.stallsPerStep, (limit) => ctx.log.warn({ parallel: limit }, 'receita-cnpj: transfers stall, fewer parallel downloads'));
  const headers = token ? { authorization: `Basic ${Buffer.from(`${token}:`).toString('base64')}` } : undefined;
  const total = files.reduce((a, f) => a + (f.size ?? 0), 0);
  const started = Date.now();
  const done = new Map<string, number>();
  const partOf = (f: Listed) => path.join(destDir, `${f.name}.part`);
  const ticker = setInterval(async () => {
    let bytes = [...done.values()].reduce((a, b) => a + b, 0);
    for (const f of files) if (!done.has(f.name)) bytes += (await stat(partOf(f)).catch(() => null))?.size ?? 0;
    const s = (Date.now() - started) / 1000;
    ctx.log.info({ month, bytes, total: total || undefined, files_done: done.size, files: files.length, mb_per_s: +(bytes / 2 ** 20 / Math.max(s, 0.001)).toFixed(2), parallel: limiter.limit }, 'receita-cnpj: downloading');
  }, cfg.progressMs);
  ticker.unref();
  // The first failure starts no further file, and the run waits for those under way: with
  // Promise.all the others went on downloading after the run had failed and let go of its
  // scope's lock, writing the store's .part files beside the next run.
  let failure: { error: unknown } | null = null;
  try {
    const settled = await Promise.allSettled(
      files.map((f) =>
        limiter.run(async () => {
          if (failure) return null;
          try {
            return await fetchOne(f);
          } catch (e) {
            failure ??= { error: e };
            throw e;
          }
        }),
      ),
    );
    if (failure) throw (failure as { error: unknown }).error;
    const fetched = settled.map((s) => (s as PromiseFulfilledResult<FetchedFile>).value);
    return fetched.sort((a, b) => a.name.localeCompare(b.name));
  } finally {
    clearInterval(ticker);
  }

  async function fetchOne(f: Listed): Promise<FetchedFile> {
    const again = await reusable(destDir, f);
    if (again) {
      done.set(f.name, again.size);
      return again;
    }
    const got = await fetchSource(f.uri, {
      destDir, name: f.name, userAgent: ctx.cfg.userAgent, expect: 'zip', zipLimits: ctx.cfg.zip, headers,
      retries: cfg.retries, stallTimeoutMs: cfg.stallTimeoutMs, backoffMs: cfg.backoffMs,
      log: (m, extra) => {
        ctx.log.info({ ...extra, uri: isHttp(f.uri) ? redactUrl(new URL(f.uri)) : f.uri }, m);
        if (m === 'download retry' && STALL.test(String(extra?.reason ?? ''))) limiter.stalled();
      },
    });
    if (!got) throw new AgroError('source_not_found', f.uri);
    if (f.size !== null && got.size !== f.size) {
      // Not trusted from the store either: else the next run's 304 brings the same bytes back.
      await distrustStored(got.path);
      throw new AgroError('download_failed', `${f.name}: ${got.size} bytes, the listing says ${f.size}`);
    }
    done.set(f.name, got.size);
    return got;
  }
}

/** The month of a fetched file (its raw-store folder), as the snapshot's release date yyyy-mm-01. */
export function monthOf(files: FetchedFile[]): string | null {
  const m = files.map((f) => path.basename(path.dirname(f.path))).find((x) => MONTH.test(x));
  return m ? `${m}-01` : null;
}
