// SICAR route B (SOURCES.md §2.1): AREA_IMOVEL from the GeoServer WFS layer
// sicar:sicar_imoveis_<uf>, no CAPTCHA and no person. It brings no theme layers, so a
// snapshot is either all zips (route A) or all WFS, never a mix (SOURCES.md §2.7), and
// records which in etl.snapshots.source.route.
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../../src/errors.ts';
import type { FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import type { QualityFacts } from '../../src/etl/quality.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
import { BRAZIL_BOUNDS, checkPagedCount, stageWfsPages, type WfsStageResult } from '../../src/etl/wfs-pages.ts';
import { WFS_OUTPUT_FORMAT, WFS_VERSION, downloadWfsLayer, isWfsEndpoint, manifestFile, readManifest, wfsProtocol, type WfsManifest, type WfsRequest } from '../../src/etl/wfs.ts';


const CAPTCHA_HOST = /consultapublica\.car\.gov\.br/;
const MANIFEST_SUFFIX = '.wfs.json';

export const sicarWfsLayer = (uf: string) => `sicar:sicar_imoveis_${uf.toLowerCase()}`;

/** The one source file of a WFS run is the download's manifest. */
export const isWfsManifest = (f: FetchedFile): boolean => f.name.endsWith(MANIFEST_SUFFIX);

export type SicarRoute = { kind: 'zip'; base: string } | { kind: 'wfs'; endpoint: string };

/**
 * --source decides (a WFS endpoint or a zip folder/prefix); without it a configured zip
 * mirror (AGRO_SOURCE_SICAR) wins, then the WFS (AGRO_SOURCE_SICAR_WFS, on by default;
 * `off` turns it off).
 */
export function sicarRoute(ctx: Pick<RunContext, 'options' | 'cfg' | 'scope'>): SicarRoute {
  const src = ctx.options.source;
  if (src) return isWfsEndpoint(src) ? { kind: 'wfs', endpoint: src } : { kind: 'zip', base: src };
  return defaultSicarRoute(ctx.cfg.sources, ctx.scope);
}

/** The route a run without --source takes (also what `nightly` plans with). */
export function defaultSicarRoute(sources: Readonly<Record<string, string>>, uf = '<UF>'): SicarRoute {
  const mirror = sources.sicar;
  if (mirror && !CAPTCHA_HOST.test(mirror)) return { kind: 'zip', base: mirror };
  const endpoint = sources['sicar-wfs'];
  if (endpoint && !/^(off|none)$/i.test(endpoint)) return { kind: 'wfs', endpoint };
  // Route A sits behind a text CAPTCHA; we do not solve CAPTCHAs.
  throw new AgroError('usage', `SICAR's official download needs a CAPTCHA: pass --source <folder or URL prefix> holding ${uf}_AREA_IMOVEL.zip, set AGRO_SOURCE_SICAR, or set AGRO_SOURCE_SICAR_WFS to the GeoServer WFS`);
}

export function wfsRequest(ctx: RunContext, endpoint: string): WfsRequest {
  const s = ctx.cfg.sicarWfs;
  return {
    endpoint, typeName: sicarWfsLayer(ctx.scope), pageSize: s.pageSize, sortBy: s.sortBy, srsName: s.srsName,
    outputFormat: WFS_OUTPUT_FORMAT, version: WFS_VERSION,
  };
}

/** Download stage of route B: every page into the raw store (resuming a stored download), the manifest as the source file. */
export async function fetchWfsState(ctx: RunContext, endpoint: string): Promise<FetchedFile[]> {
  const request = wfsRequest(ctx, endpoint);
  const dir = path.join(ctx.rawDir, 'wfs', request.typeName.replace(/[^A-Za-z0-9_.-]/g, '_'));
  const d = await downloadWfsLayer(request, {
    dir, userAgent: ctx.cfg.userAgent, settings: ctx.cfg.sicarWfs,
    log: (m, extra) => ctx.log.info(extra ?? {}, m),
  });
  ctx.log.info({ layer: request.typeName, numberMatched: d.manifest.numberMatched, pages: d.manifest.pages.length, resumed: d.resumedPages, requested: d.requestedPages.length }, 'wfs download complete');
  return [await manifestFile(d, `${ctx.scope}_AREA_IMOVEL${MANIFEST_SUFFIX}`, wfsProtocol(request))];
}

export interface WfsStaged extends WfsStageResult {
  manifest: WfsManifest;
}

/** Read stage of route B: the stored pages into the AREA_IMOVEL staging table. */
export async function stageWfsAreaImovel(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, stage: string, specs: FieldSpec[]): Promise<WfsStaged> {
  const manifest = await readManifest(file.path);
  const staged = await stageWfsPages(client, stage, manifest, specs, {
    dir: path.dirname(file.path), layerName: manifest.request.typeName, axisOrder: ctx.cfg.sicarWfs.axisOrder, bounds: BRAZIL_BOUNDS,
  });
  return { ...staged, manifest };
}

/**
 * The route's facts (facts.wfs) and its gate rule: fewer distinct features than the
 * server's numberMatched means the download lost some, and the snapshot must not publish.
 */
export async function addWfsFacts(client: pg.ClientBase, facts: QualityFacts, w: WfsStaged, stage: string, rowsLoaded: number): Promise<void> {
  const m = w.manifest;
  const distinct = await checkPagedCount(client, stage, m, facts, ['fid'], {
    rule: 'wfs_count',
    shortfall: (count, got) => `the WFS matched ${count} features (numberMatched) but the download brought ${got}`,
    pages: 'WFS',
    countChanged: 'numberMatched changed',
  });
  Object.assign(facts, {
    wfs: {
      endpoint: m.request.endpoint, layer: m.request.typeName, srs_name: m.request.srsName, srid: w.layer.srid,
      axis_order_pages: w.axis, axis_unplaceable: w.axisUnplaceable,
      page_size: m.request.pageSize, sort_by: m.request.sortBy, pages: m.pages.length,
      number_matched: m.numberMatched, number_matched_after: m.numberMatchedAfter,
      features_downloaded: m.features, distinct_features: distinct, rows_loaded: rowsLoaded,
    },
  });
  if (w.axis['lat-lon']) facts.notes.push(`${w.axis['lat-lon']} of ${m.pages.length} WFS pages came in lat/lon order (${m.request.srsName}); swapped to lon/lat`);
  facts.notes.push(`route B (WFS ${m.request.typeName}): ${rowsLoaded} rows loaded of ${m.numberMatched} features matched`);
}

/** What etl.snapshots.source records about the route beside the files. */
export async function sicarSourceInfo(files: FetchedFile[]): Promise<Record<string, unknown>> {
  const f = files.find(isWfsManifest);
  if (!f) return { route: 'zip' };
  const m = await readManifest(f.path);
  return {
    route: 'wfs', endpoint: m.request.endpoint, layer: m.request.typeName, srs_name: m.request.srsName,
    page_size: m.request.pageSize, sort_by: m.request.sortBy, pages: m.pages.length,
    number_matched: m.numberMatched, number_matched_after: m.numberMatchedAfter, features: m.features,
  };
}
