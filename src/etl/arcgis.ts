// An ArcGIS REST layer (FeatureServer/N or MapServer/N) downloaded page by page through the
// paged machinery of wfs.ts (page store, resume, retries, TLS and timeouts): the expected
// count from returnCountOnly, then GeoJSON pages by resultOffset/resultRecordCount under a
// fixed orderByFields, in the outSR asked (SOURCES.md §3.1: set it explicitly, record it).
//
// ArcGIS answers errors with HTTP 200 and `{"error":{"code":…,"message":…}}`: a failed page,
// retried, never an empty one. A page with fewer features than asked and no
// exceededTransferLimit is the last; a page capped by the server (maxRecordCount below what
// was asked, exceededTransferLimit true) is followed by the next offset.
import { AgroError } from '../errors.ts';
import { Retryable, isHttpPath, type PagedProtocol } from './wfs.ts';

/** What identifies an ArcGIS download: a stored page is reused only under the same request. */
export interface ArcgisRequest {
  /** The layer's URL, …/FeatureServer/0. */
  endpoint: string;
  where: string;
  orderBy: string;
  /** The CRS asked (outSR): the staged geometries' SRID. */
  outSR: number;
  pageSize: number;
  /** srsName of the same CRS, as the GeoJSON stager reads it. */
  srsName: string;
}

/** An ArcGIS layer URL: an http(s) URL whose path ends in /FeatureServer/N or /MapServer/N. */
export const isArcgisLayer = (uri: string): boolean => isHttpPath(uri, /\/(FeatureServer|MapServer)\/\d+\/?$/i);

function layerUrl(endpoint: string, params: Record<string, string | number>, sub = ''): string {
  const u = new URL(endpoint.replace(/\/+$/, '') + sub);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
  return u.toString();
}

/** The `error` member of an ArcGIS answer, as text; null when there is none. */
export function arcgisError(doc: unknown): { code: number | null; text: string } | null {
  const e = (doc as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  if (!e || typeof e !== 'object') return null;
  const details = Array.isArray(e.details) ? e.details.filter((d) => typeof d === 'string' && d).join('; ') : '';
  const code = typeof e.code === 'number' ? e.code : Number.isFinite(Number(e.code)) ? Number(e.code) : null;
  return { code, text: `ArcGIS error ${code ?? '?'}: ${String(e.message ?? '')}${details ? ` (${details})` : ''}`.slice(0, 500) };
}

function parseJson(text: string, what: string, gotBytes: boolean): unknown {
  const head = text.trimStart();
  if (head.startsWith('<')) throw new Retryable(`the ${what} is HTML/XML, not JSON: ${head.slice(0, 120).replace(/\s+/g, ' ')}`, false);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Retryable(`the ${what} is not complete JSON: ${(e as Error).message}`, gotBytes);
  }
}

/** maxRecordCount of the layer's `?f=json` metadata; null when the answer does not carry one. */
export function maxRecordCount(text: string | null): number | null {
  if (!text) return null;
  try {
    const n = Number((JSON.parse(text) as { maxRecordCount?: unknown }).maxRecordCount);
    return Number.isInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

/** The request of a layer: pages of `pageSize`, or of the layer's maxRecordCount when smaller. */
export function arcgisRequest(endpoint: string, o: { pageSize: number; orderBy: string; outSR: number; maxRecordCount: number | null }): ArcgisRequest {
  const pageSize = o.maxRecordCount ? Math.min(o.pageSize, o.maxRecordCount) : o.pageSize;
  return { endpoint: endpoint.replace(/\/+$/, ''), where: '1=1', orderBy: o.orderBy, outSR: o.outSR, pageSize, srsName: `EPSG:${o.outSR}` };
}

export const arcgisMetadataUrl = (endpoint: string): string => layerUrl(endpoint, { f: 'json' });

export function arcgisProtocol(r: ArcgisRequest): PagedProtocol<ArcgisRequest, 'arcgis'> {
  const query = (params: Record<string, string | number>) => layerUrl(r.endpoint, { where: r.where, ...params }, '/query');
  return {
    route: 'arcgis', request: r, what: r.endpoint,
    countUrl: query({ returnCountOnly: 'true', f: 'json' }),
    countName: 'count',
    parseCount(text) {
      const doc = parseJson(text, 'count answer', false);
      const err = arcgisError(doc);
      if (err) {
        // A layer or service that does not exist will not appear on a retry.
        if (err.code === 404 || /not (be )?found|does not exist/i.test(err.text)) throw new AgroError('source_not_found', `${r.endpoint}: ${err.text}`);
        throw new Retryable(err.text, false);
      }
      const n = (doc as { count?: unknown }).count;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) throw new Retryable(`the count answer carries no count: ${text.slice(0, 200).replace(/\s+/g, ' ')}`, false);
      return n;
    },
    pageUrl: (offset) => query({ outFields: '*', f: 'geojson', outSR: r.outSR, orderByFields: r.orderBy, resultOffset: offset, resultRecordCount: r.pageSize }),
    parsePage(buf) {
      const doc = parseJson(buf.toString('utf8'), 'page', true) as { type?: string; features?: unknown[]; exceededTransferLimit?: unknown; properties?: { exceededTransferLimit?: unknown } };
      const err = arcgisError(doc);
      // An error body is complete: it counts against the retry budget like a 500.
      if (err) throw new Retryable(err.text, false);
      if (doc?.type !== 'FeatureCollection' || !Array.isArray(doc.features)) throw new Retryable('the page is not a GeoJSON FeatureCollection', true);
      // f=geojson puts the flag at the top level, some versions under `properties`.
      const more = doc.exceededTransferLimit === true || doc.properties?.exceededTransferLimit === true;
      return { features: doc.features.length, more };
    },
    continues(last, next, expected) {
      if (last === null) return true;
      if (last.features === 0) return false;
      // A server that ignores resultOffset would page forever: stop well past the expected count.
      if (next >= 2 * expected + 10 * r.pageSize) return false;
      return last.more === true || last.features >= r.pageSize;
    },
    sourceUri: query({ outFields: '*', f: 'geojson', outSR: r.outSR, orderByFields: r.orderBy }),
    contentType: 'application/geo+json',
  };
}
