// Where a pipeline's source file comes from and what date it carries: a local file, a
// folder holding it (path or file:// URL), an http(s) URL of the file, of a service
// answering with it, or of a folder (joined to the official name, or listed), fetched into
// the raw store. One picker for every folder, local or listed.
import fs from 'node:fs';
import path from 'node:path';
import { brazilDay } from '../dates.ts';
import { AgroError } from '../errors.ts';
import { fetchSource, isHttp, joinSource, localPath, type FetchedFile } from './download.ts';
import type { RunContext } from './pipeline.ts';

/** How a source's file is recognised among the names in a folder. */
export interface SourceLayout {
  /** The official file name: looked for first (Unicode- and case-insensitive), joined to a URL prefix, used to store a service response. */
  fileName?: string;
  /** Other names the file is published under (e.g. /^shp_cnuc_\d{4}_\d{2}\.zip$/i). */
  pattern?: RegExp;
  /** Among several names matching `pattern`, the one to take (default: the last by name). */
  newest?: (names: string[]) => string;
  /** What the error says the folder lacks, e.g. 'BR_Municipios_<YYYY>.zip'. */
  what: string;
  /** What a file must end with to be considered at all. */
  ext: RegExp;
  /** Lists the names in a remote folder URL (e.g. WebDAV PROPFIND), which the picker then chooses from. */
  listRemote?: (folderUrl: string, ctx: RunContext) => Promise<string[]>;
}

const nfc = (s: string) => s.normalize('NFC');

/**
 * The file to take among a folder's names: the official name, then the newest `pattern`
 * match, then (when an official name is declared) the only file of its kind.
 */
export function pickSourceFile(names: string[], layout: SourceLayout, where: string): string {
  const files = names.filter((n) => layout.ext.test(n)).sort();
  if (layout.fileName) {
    const wanted = nfc(layout.fileName).toLowerCase();
    const exact = files.find((z) => nfc(z).toLowerCase() === wanted);
    if (exact) return exact;
  }
  const matching = layout.pattern ? files.filter((z) => layout.pattern!.test(nfc(z))) : [];
  if (matching.length) return layout.newest ? layout.newest(matching) : matching[matching.length - 1];
  if (layout.fileName && files.length === 1) return files[0];
  throw new AgroError('source_not_found', `${where} holds no ${layout.what}${files.length ? ` (there: ${files.join(', ')})` : ''}`);
}

function lastSegment(url: URL): string {
  const last = url.pathname.split('/').pop() ?? '';
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

const redact = (u: URL) => {
  const c = new URL(u.href);
  c.username = c.password = '';
  return c.href;
};

/** An http(s) URL that names a folder to list (the layout lists remote folders and the URL is not a file). */
export const isListedFolder = (src: string, layout: SourceLayout): boolean =>
  !!layout.listRemote && isHttp(src) && !layout.ext.test(lastSegment(new URL(src))) && !new URL(src).search;

/**
 * Where to download from and under which name to keep the file in the raw store. A remote
 * folder the layout lists (isListedFolder) is resolved by resolveListedSource instead.
 */
export function resolveSource(src: string, layout: SourceLayout): { uri: string; name: string } {
  if (isHttp(src)) {
    const url = new URL(src);
    const last = lastSegment(url);
    if (layout.ext.test(last)) return { uri: src, name: nfc(last) };
    // A service request (FUNAI's WFS GetFeature … outputFormat=SHAPE-ZIP) answers with the file itself.
    if (url.search && layout.fileName) return { uri: src, name: layout.fileName };
    if (layout.fileName) return { uri: joinSource(src, layout.fileName), name: layout.fileName };
    return { uri: src, name: nfc(last) };
  }
  const local = localPath(src);
  let st: fs.Stats;
  try {
    st = fs.statSync(local);
  } catch {
    throw new AgroError('source_not_found', `${local}: no such file or folder`);
  }
  if (st.isDirectory()) {
    const names = fs.readdirSync(local, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
    const name = pickSourceFile(names, layout, local);
    return { uri: path.join(local, name), name: nfc(name) };
  }
  return { uri: local, name: nfc(path.basename(local)) };
}

/** A remote folder listed by the layout (e.g. WebDAV), the file picked from its names as from a local folder. */
export async function resolveListedSource(src: string, layout: SourceLayout, ctx: RunContext): Promise<{ uri: string; name: string }> {
  const name = pickSourceFile(await layout.listRemote!(src, ctx), layout, redact(new URL(src)));
  return { uri: joinSource(src, name), name: nfc(name) };
}

/** Fetches the one source file of a run into its raw store; when there is nothing at `uri` the run fails (source_not_found). */
export async function fetchOneFile(ctx: RunContext, uri: string, o: { expect: 'zip' | 'csv'; name?: string }): Promise<FetchedFile[]> {
  const file = await fetchSource(uri, {
    destDir: ctx.rawDir,
    name: o.name,
    userAgent: ctx.cfg.userAgent,
    ...ctx.cfg.download,
    expect: o.expect,
    zipLimits: ctx.cfg.zip,
    log: (m, extra) => ctx.log.info(extra ?? {}, m),
  });
  if (!file) throw new AgroError('source_not_found', uri);
  return [file];
}

/** yyyy-mm-dd of a date in Brazil (its publisher's day, src/dates.ts); null for none or an invalid one. */
export const isoDay = (d: Date | null): string | null => (d && !Number.isNaN(d.getTime()) ? brazilDay(d) : null);

/** The day of a fetched file's Last-Modified, or null when it has none or it does not parse. */
export const lastModifiedDay = (file: FetchedFile | undefined): string | null => isoDay(file?.lastModified ? new Date(file.lastModified) : null);

/** Last-Modified, then the local file's modification time (a manual drop). */
export function fileDay(file: FetchedFile): string | null {
  const modified = lastModifiedDay(file);
  if (modified || isHttp(file.sourceUri)) return modified;
  try {
    return isoDay(fs.statSync(localPath(file.sourceUri)).mtime);
  } catch {
    return null;
  }
}

/** Every file of a local folder that the layout accepts (its `ext`, and its `pattern` when declared), by name: a source published as several files (ZARC's seasons). */
export function sourceFolderFiles(folder: string, layout: SourceLayout): string[] {
  const names = fs.readdirSync(folder, { withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
  const files = names.filter((n) => layout.ext.test(n) && (!layout.pattern || layout.pattern.test(nfc(n)))).sort();
  if (!files.length) throw new AgroError('source_not_found', `${folder} holds no ${layout.what}`);
  return files.map((n) => path.join(folder, n));
}
