// Where a pipeline's source file comes from and what date it carries: a local file, a
// folder holding it (path or file:// URL) or an http(s) URL, fetched into the raw store.
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError } from '../errors.ts';
import { fetchSource, isHttp, localPath, type FetchedFile } from './download.ts';
import type { RunContext } from './pipeline.ts';

/**
 * A local folder (path or file:// URL) → the file in it that `pick` chooses among the
 * names matching `pattern`; anything else (a file, an http(s) URL) is returned as is.
 */
export async function pickFromLocalFolder(source: string, pattern: RegExp, pick: (names: string[]) => string, what: string): Promise<string> {
  if (isHttp(source)) return source;
  const local = localPath(source);
  const st = await stat(local).catch(() => null);
  if (!st?.isDirectory()) return source;
  const names = (await readdir(local)).filter((n) => pattern.test(n));
  if (names.length === 0) throw new AgroError('source_not_found', `${local} holds no ${what}`);
  return path.join(local, pick(names));
}

/** Fetches the one source file of a run into its raw store; when there is nothing at `uri` the run fails (source_not_found). */
export async function fetchOneFile(ctx: RunContext, uri: string, o: { expect: 'zip' | 'csv'; name?: string }): Promise<FetchedFile[]> {
  const file = await fetchSource(uri, {
    destDir: ctx.rawDir,
    name: o.name,
    userAgent: ctx.cfg.userAgent,
    expect: o.expect,
    zipLimits: ctx.cfg.zip,
    log: (m, extra) => ctx.log.info(extra ?? {}, m),
  });
  if (!file) throw new AgroError('source_not_found', uri);
  return [file];
}

/** yyyy-mm-dd (UTC) of a date; null for none or an invalid one. */
export const isoDay = (d: Date | null): string | null => (d && !Number.isNaN(d.getTime()) ? d.toISOString().slice(0, 10) : null);

/** The day of a fetched file's Last-Modified, or null when it has none or it does not parse. */
export const lastModifiedDay = (file: FetchedFile | undefined): string | null => isoDay(file?.lastModified ? new Date(file.lastModified) : null);
