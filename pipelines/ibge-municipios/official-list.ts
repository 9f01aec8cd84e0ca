// The official municipality list (SOURCES §9.7): the mesh carries features that are not
// municipalities and lags behind new ones (Boa Esperança do Norte, MT, was still absent in
// 2026), so the mesh is joined with IBGE's localidades API (`GET …/api/v1/localidades/municipios`,
// a JSON array of {id, nome, …}). A local mesh (file or folder) takes `municipios.json` from
// its folder when there is one (the API's answer, saved); a downloaded mesh takes the
// configured URL (sources['ibge-localidades'], AGRO_SOURCE_IBGE_LOCALIDADES; empty: none).
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError, isAgroError } from '../../src/errors.ts';
import { fetchSource, isHttp } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';

/** The saved answer of the localidades API beside a local mesh. */
export const LIST_FILE = 'municipios.json';

export interface OfficialList {
  /** Where it came from: the file name or the URL. */
  fonte: string;
  municipios: { geocodigo: string; nome: string }[];
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
export async function officialList(ctx: RunContext): Promise<OfficialList | { missing: string }> {
  const src = ctx.source;
  if (src && !isHttp(src)) {
    const dir = (await stat(src)).isDirectory() ? src : path.dirname(src);
    const file = path.join(dir, LIST_FILE);
    if (!existsSync(file)) return { missing: `no ${LIST_FILE} beside the mesh` };
    return { fonte: LIST_FILE, municipios: parseOfficialList(await readFile(file, 'utf8'), LIST_FILE) };
  }
  const url = ctx.cfg.sources['ibge-localidades'];
  if (!url || url === 'none') return { missing: 'no localidades URL configured (AGRO_SOURCE_IBGE_LOCALIDADES)' };
  let fetched;
  try {
    fetched = await fetchSource(url, { destDir: ctx.workDir, name: LIST_FILE, expect: 'any', userAgent: ctx.cfg.userAgent, log: (m: string) => ctx.log.info(m) });
  } catch (e) {
    if (isAgroError(e) && (e.code === 'download_failed' || e.code === 'source_not_found')) return { missing: `${url}: ${e.message}` };
    throw e;
  }
  return { fonte: url, municipios: parseOfficialList(await readFile(fetched!.path, 'utf8'), url) };
}
