// IBAMA's second automated route (SOURCES.md §3.1, §3.7: CSV first, ArcGIS REST second, manual
// drop third): the PAMGIA layer adm_embargos_ibama_a through ArcGIS REST, paged into the raw
// store by the machinery SICAR's WFS route uses (src/etl/wfs.ts, src/etl/arcgis.ts), staged by
// header into the same columns as the CSV and the shapefile (src/etl/wfs-pages.ts), so the one
// classify serves all three. Dates arrive as epoch milliseconds and are staged as ISO text; the
// geometry comes in the outSR asked (EPSG:4674) and goes through the shapefile route's SQL.
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import type pg from 'pg';
import { brazilDateTime } from '../../src/dates.ts';
import type { FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import type { QualityFacts } from '../../src/etl/quality.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
import { arcgisMetadataUrl, arcgisProtocol, arcgisRequest, maxRecordCount, type ArcgisRequest } from '../../src/etl/arcgis.ts';
import { BRAZIL_BOUNDS, checkPagedCount, stageWfsPages, type WfsStageResult } from '../../src/etl/wfs-pages.ts';
import { downloadPaged, manifestFile, readPagedManifest, writeJsonAtomic, type PagedManifest } from '../../src/etl/wfs.ts';

const MANIFEST_SUFFIX = '.rest.json';
/** The CRS asked of the server (outSR) and recorded: the layer's own, SIRGAS 2000. */
export const REST_OUT_SR = 4674;

/** Why the CSV was not used, when the REST route is a fallback. */
export interface CsvFailure {
  uri: string;
  code: string;
  reason: string;
}

export type RestManifest = PagedManifest<ArcgisRequest, 'arcgis'> & { csvFailed?: CsvFailure | null };

/** The one source file of a REST run is the download's manifest. */
export const isRestManifest = (f: FetchedFile | undefined): boolean => !!f && f.name.endsWith(MANIFEST_SUFFIX);

/** The configured REST layer (AGRO_SOURCE_IBAMA_EMBARGOS_REST); null when turned off. */
export function restEndpoint(sources: Readonly<Record<string, string>>): string | null {
  const e = sources['ibama-embargos-rest'];
  return e && !/^(off|none)$/i.test(e) ? e : null;
}

/** The layer's name in reports: the service folder before FeatureServer/MapServer (adm_embargos_ibama_a). */
const layerName = (endpoint: string): string => /\/([^/]+)\/(?:FeatureServer|MapServer)\/\d+\/?$/i.exec(new URL(endpoint).pathname)?.[1] ?? 'arcgis_layer';

/** Download stage of the REST route: every page into the raw store (resuming a stored download), the manifest as the source file. */
export async function fetchRest(ctx: RunContext, endpoint: string, csvFailed: CsvFailure | null): Promise<FetchedFile[]> {
  const s = ctx.cfg.ibamaRest;
  const name = layerName(endpoint);
  const dir = path.join(ctx.rawDir, 'rest', name.replace(/[^A-Za-z0-9_.-]/g, '_'));
  const d = await downloadPaged(async (peek) => {
    // The layer's maxRecordCount caps a page; without metadata, the configured size.
    const max = maxRecordCount(await peek(arcgisMetadataUrl(endpoint)));
    return arcgisProtocol(arcgisRequest(endpoint, { pageSize: s.pageSize, orderBy: s.sortBy, outSR: REST_OUT_SR, maxRecordCount: max }));
  }, { dir, userAgent: ctx.cfg.userAgent, settings: s, log: (m, extra) => ctx.log.info(extra ?? {}, m) });
  // Why this route was taken travels with the manifest (the checksum covers the pages only).
  const manifest: RestManifest = { ...d.manifest, csvFailed };
  await writeJsonAtomic(d.manifestPath, manifest);
  ctx.log.info({ layer: endpoint, count: d.manifest.numberMatched, pages: d.manifest.pages.length, resumed: d.resumedPages, requested: d.requestedPages.length }, 'arcgis download complete');
  return [await manifestFile(d, `${name}${MANIFEST_SUFFIX}`, arcgisProtocol(d.manifest.request))];
}

export const readRestManifest = (file: string): Promise<RestManifest> => readPagedManifest<RestManifest>(file, 'arcgis', 'an ArcGIS');

/** Staging columns holding dates (epoch ms in REST pages), and the one holding a date and time. */
const DATE_COLUMNS = new Set(['data_embargo', 'data_desembargo', 'ultima_atualizacao', 'x_dat_impressao', 'x_dat_ult_alter_geom']);
const TIMESTAMP_COLUMNS = new Set(['data_alteracao']);

/**
 * An epoch-ms value (a number, or digits): its instant; anything else: null. Only instants from
 * 1973-03-03 (1e11 ms) to 5138 are taken: a date written as digits (20190821, a yyyymmdd
 * integer field) read as milliseconds would be a morning in January 1970, silently; it stays
 * as served instead, for the typed pass to read or count.
 */
function epochMs(v: unknown): Date | null {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d{12,14}\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isFinite(n) || n < 1e11 || n >= 1e14) return null;
  const d = new Date(n);
  return Number.isNaN(d.getTime()) ? null : d;
}

/**
 * A REST property as staged: epoch-ms dates as their day in Brazil, DAT_ULT_ALTERACAO as
 * Brasília's date and time (it decides between versions of a term), as the CSV writes them: an
 * evening in Brazil is already tomorrow in UTC (the report generated at 22:30 on the 20th is of
 * the 20th). An instant at exactly UTC midnight is a date typed without a time, as some layers
 * store one: that day. A value that is not a number stays as served and is counted with the
 * unreadable dates by the typed pass.
 */
export function restValue(column: string, v: unknown): unknown {
  const date = DATE_COLUMNS.has(column) ? 'day' : TIMESTAMP_COLUMNS.has(column) ? 'time' : null;
  if (!date) return v;
  const d = epochMs(v);
  if (!d) return v;
  const stamp = d.getTime() % 86_400_000 === 0 ? `${d.toISOString().slice(0, 10)} 00:00:00` : brazilDateTime(d);
  return date === 'day' ? stamp.slice(0, 10) : stamp;
}

export interface RestStaged extends WfsStageResult {
  manifest: RestManifest;
}

/** Read stage of the REST route: the stored pages into the staging table, by header. */
export async function stageRest(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, table: string, specs: FieldSpec[]): Promise<RestStaged> {
  const manifest = await readRestManifest(file.path);
  const staged = await stageWfsPages(client, table, manifest, specs, {
    dir: path.dirname(file.path), layerName: layerName(manifest.request.endpoint), axisOrder: ctx.cfg.ibamaRest.axisOrder, bounds: BRAZIL_BOUNDS, value: restValue,
  });
  return { ...staged, manifest };
}

/** ULTIMA_ATUALIZACAO_RELATORIO of the first feature, when the layer carries it (as a day). */
export async function restReleaseStamp(file: FetchedFile): Promise<string | null> {
  try {
    const m = await readRestManifest(file.path);
    const first = m.pages.find((p) => p.features > 0);
    if (!first) return null;
    const page = JSON.parse(await readFile(path.join(path.dirname(file.path), first.file), 'utf8')) as { features: { properties?: Record<string, unknown> }[] };
    const props = page.features[0]?.properties ?? {};
    const key = Object.keys(props).find((k) => k.toLowerCase() === 'ultima_atualizacao_relatorio');
    const v = key === undefined ? null : restValue('ultima_atualizacao', props[key]);
    return typeof v === 'string' ? v : null;
  } catch {
    return null; // a broken manifest fails properly in load()
  }
}

/**
 * The route's facts (facts.rest) and its gate rule: fewer distinct features than the layer's
 * count means the download lost some, and the snapshot must not publish.
 */
export async function addRestFacts(client: pg.ClientBase, facts: QualityFacts, r: RestStaged, stage: string, rowsLoaded: number): Promise<void> {
  const m = r.manifest;
  if (m.csvFailed) facts.notes.push(`route: ArcGIS REST, because the CSV download failed (${m.csvFailed.code}: ${m.csvFailed.reason})`);
  else facts.notes.push('route: ArcGIS REST (--source names the layer)');
  const distinct = await checkPagedCount(client, stage, m, facts, ['objectid', 'fid'], {
    rule: 'rest_count',
    shortfall: (count, got) => `the ArcGIS layer counted ${count} features (returnCountOnly) but the download brought ${got}`,
    pages: 'REST',
    countChanged: "the layer's count changed",
  });
  if (distinct > m.numberMatched) facts.notes.push(`the download brought ${distinct} features, ${distinct - m.numberMatched} more than the layer counted (${m.numberMatched}): it grew while paging`);
  Object.assign(facts, {
    rest: {
      endpoint: m.request.endpoint, out_sr: m.request.outSR, srid: r.layer.srid, page_size: m.request.pageSize, order_by: m.request.orderBy,
      pages: m.pages.length, count: m.numberMatched, count_after: m.numberMatchedAfter,
      features_downloaded: m.features, distinct_features: distinct, rows_loaded: rowsLoaded,
      csv_failed: m.csvFailed ?? null,
    },
  });
  facts.notes.push(`ArcGIS REST ${m.request.endpoint} (outSR ${m.request.outSR}): ${rowsLoaded} rows loaded of ${m.numberMatched} features counted`);
}

/** What etl.snapshots.source records about the route beside the files. */
export async function restSourceInfo(f: FetchedFile): Promise<Record<string, unknown>> {
  const m = await readRestManifest(f.path);
  return {
    route: 'rest', endpoint: m.request.endpoint, out_sr: m.request.outSR, page_size: m.request.pageSize, order_by: m.request.orderBy,
    pages: m.pages.length, count: m.numberMatched, count_after: m.numberMatchedAfter, features: m.features,
    ...(m.csvFailed && { csv_failed: m.csvFailed }),
  };
}
