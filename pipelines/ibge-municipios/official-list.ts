// The official municipality list (SOURCES §9.7): the mesh carries features that are not
// municipalities and lags behind new ones (Boa Esperança do Norte, MT, was still absent in
// 2026), so the mesh is joined with IBGE's localidades API (`GET …/api/v1/localidades/municipios`,
// a JSON array of {id, nome, …}). A local mesh (file or folder) takes `municipios.json` from
// its folder when there is one (the API's answer, saved); a downloaded mesh takes the
// configured URL (sources['ibge-localidades'], AGRO_SOURCE_IBGE_LOCALIDADES; empty: none).
// The list is part of the source (Pipeline.sourceParts): read once in the download stage, its
// SHA-256 taken over a canonical form (listPart), so that a list-only change loads a new
// snapshot and the same list, however written, leaves the run unchanged.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError, isAgroError } from '../../src/errors.ts';
import { fetchSource, isHttp } from '../../src/etl/download.ts';
import type { RunContext, SourcePart } from '../../src/etl/pipeline.ts';

/** The saved answer of the localidades API beside a local mesh. */
export const LIST_FILE = 'municipios.json';

export interface OfficialList {
  /** Where it came from: the file name or the URL. */
  fonte: string;
  /** The file's path or the URL. */
  uri: string;
  municipios: { geocodigo: string; nome: string }[];
}

/** No list this run, and why; `unreachable`: the URL a list was expected from but could not be fetched. */
export interface NoList {
  missing: string;
  unreachable?: string;
}

/**
 * The list as a part of the source: its SHA-256 over what the load uses (each code and name,
 * by code), so that key order, spacing, item order and fields the load does not read change
 * nothing; an unreachable list is a part not read (the engine then compares the mesh alone).
 */
export function listPart(list: OfficialList | NoList): SourcePart[] {
  if (!('municipios' in list)) return list.unreachable ? [{ name: LIST_FILE, uri: list.unreachable, sha256: null, size: 0 }] : [];
  const canonical = JSON.stringify([...list.municipios].sort((a, b) => (a.geocodigo < b.geocodigo ? -1 : 1)).map((m) => [m.geocodigo, m.nome]));
  return [{ name: LIST_FILE, uri: list.uri, sha256: createHash('sha256').update(canonical).digest('hex'), size: Buffer.byteLength(canonical) }];
}

/** The list in the localidades API's shape; a list of another shape is a malformed source (never half-used). */
export function parseOfficialList(text: string, fonte: string): OfficialList['municipios'] {
  let data: unknown;
  try {
    data = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (e) {
    throw new AgroError('malformed_source', `${fonte}: not JSON (${(e as Error).message})`);
  }
  if (!Array.isArray(data) || data.length === 0) throw new AgroError('malformed_source', `${fonte}: not a list of municipalities (IBGE localidades API: [{"id": 1100015, "nome": …}, …])`);
  const seen = new Map<string, string>();
  data.forEach((m: unknown, i) => {
    const item = (m ?? {}) as { id?: unknown; nome?: unknown };
    const id = typeof item.id === 'number' || typeof item.id === 'string' ? String(item.id).trim() : '';
    const nome = typeof item.nome === 'string' ? item.nome.trim() : '';
    if (!/^\d{7}$/.test(id) || !nome) throw new AgroError('malformed_source', `${fonte}: item ${i + 1} is not a municipality (id of 7 digits and a nome): ${JSON.stringify(m).slice(0, 120)}`);
    if (!seen.has(id)) seen.set(id, nome);
  });
  return [...seen].map(([geocodigo, nome]) => ({ geocodigo, nome }));
}

/**
 * The official list of this run, or why there is none (a note): no municipios.json beside a
 * local mesh, no URL configured, or the API unreachable (the mesh still loads, told apart by
 * code shape as before). A list that arrives malformed fails the run.
 */
export async function officialList(ctx: RunContext): Promise<OfficialList | NoList> {
  const src = ctx.source;
  if (src && !isHttp(src)) {
    const dir = (await stat(src)).isDirectory() ? src : path.dirname(src);
    const file = path.join(dir, LIST_FILE);
    if (!existsSync(file)) return { missing: `no ${LIST_FILE} beside the mesh` };
    return { fonte: LIST_FILE, uri: file, municipios: parseOfficialList(await readFile(file, 'utf8'), LIST_FILE) };
  }
  const url = ctx.cfg.sources['ibge-localidades'];
  if (!url || url === 'none') return { missing: 'no localidades URL configured (AGRO_SOURCE_IBGE_LOCALIDADES)' };
  let fetched;
  try {
    fetched = await fetchSource(url, { destDir: ctx.workDir, name: LIST_FILE, expect: 'any', userAgent: ctx.cfg.userAgent, ...ctx.cfg.download, log: (m: string) => ctx.log.info(m) });
  } catch (e) {
    if (isAgroError(e) && (e.code === 'download_failed' || e.code === 'source_not_found')) return { missing: `${url}: ${e.message}`, unreachable: url };
    throw e;
  }
  return { fonte: url, uri: url, municipios: parseOfficialList(await readFile(fetched!.path, 'utf8'), url) };
}
