// A small ArcGIS-like FeatureServer layer on 127.0.0.1 for tests: the layer's `?f=json`
// metadata (maxRecordCount), query?returnCountOnly=true, and GeoJSON pages by
// resultOffset/resultRecordCount ordered by OBJECTID (capped at maxRecordCount, with
// exceededTransferLimit when more remain), plus an HTML page where a CSV is expected.
// Errors the way ArcGIS gives them (HTTP 200 with {"error":…}) and others are injected per request.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Feature, Geometry } from 'geojson';

export const LAYER_PATH = '/server/rest/services/01_Publicacoes_Bases/adm_embargos_ibama_a/FeatureServer/0';
export const CSV_PATH = '/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv';

export type ArcgisFault =
  | { kind: 'status'; status: number }
  /** HTTP 200 with ArcGIS's error body. */
  | { kind: 'arcgis-error' }
  /** Half the body, then the connection cut, and the server stops listening. */
  | { kind: 'gone' };

export interface ArcgisHit {
  n: number;
  kind: 'metadata' | 'count' | 'page' | 'csv' | 'other';
  offset: number | null;
  recordCount: number | null;
  outSR: string | null;
  orderBy: string | null;
  fault: ArcgisFault['kind'] | null;
}

export interface ArcgisLayer {
  features: Feature<Geometry | null>[];
  maxRecordCount: number;
  /** count to report instead of the true one (a layer that loses features). */
  count?: number;
}

export interface ArcgisServer {
  port: number;
  endpoint: string;
  csvUrl: string;
  hits: ArcgisHit[];
  /** resultOffset of every page request, in order. */
  pageOffsets(): number[];
  /** Stops listening (closing connections); `listen` starts again on the same port. */
  close(): Promise<void>;
  listen(): Promise<void>;
}

const json = (res: ServerResponse, body: unknown) => {
  const buf = Buffer.from(JSON.stringify(body));
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': buf.length }).end(buf);
};

export async function startArcgisServer(layer: ArcgisLayer, fault?: (hit: ArcgisHit) => ArcgisFault | undefined, port = 0): Promise<ArcgisServer> {
  const hits: ArcgisHit[] = [];
  let server: http.Server;
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const q = url.searchParams;
    const num = (k: string) => (q.has(k) ? Number(q.get(k)) : null);
    const kind: ArcgisHit['kind'] = url.pathname === CSV_PATH ? 'csv'
      : url.pathname === LAYER_PATH && q.get('f') === 'json' ? 'metadata'
      : url.pathname === `${LAYER_PATH}/query` && q.get('returnCountOnly') === 'true' ? 'count'
      : url.pathname === `${LAYER_PATH}/query` && q.get('f') === 'geojson' ? 'page' : 'other';
    const hit: ArcgisHit = { n: hits.length, kind, offset: num('resultOffset'), recordCount: num('resultRecordCount'), outSR: q.get('outSR'), orderBy: q.get('orderByFields'), fault: null };
    hits.push(hit);
    if (kind === 'other') return res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
    // The CSV host answers a maintenance page with 200, as government hosts do.
    if (kind === 'csv') return res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><html><body>Em manutenção</body></html>');
    const f = fault?.(hit);
    hit.fault = f?.kind ?? null;
    if (f?.kind === 'status') return res.writeHead(f.status, { 'content-type': 'text/html' }).end('<html><body>Internal Server Error</body></html>');
    if (f?.kind === 'arcgis-error') return json(res, { error: { code: 500, message: 'Error performing query operation', details: [] } });
    if (kind === 'metadata') return json(res, { currentVersion: 10.91, id: 0, name: 'adm_embargos_ibama_a', type: 'Feature Layer', geometryType: 'esriGeometryPolygon', maxRecordCount: layer.maxRecordCount });
    if (kind === 'count') return json(res, { count: layer.count ?? layer.features.length });
    const sorted = [...layer.features].sort((a, b) => Number(a.properties?.OBJECTID) - Number(b.properties?.OBJECTID));
    const start = hit.offset ?? 0;
    const size = Math.min(hit.recordCount ?? layer.maxRecordCount, layer.maxRecordCount);
    const page = sorted.slice(start, start + size);
    const capped = (hit.recordCount ?? Infinity) > layer.maxRecordCount && start + size < sorted.length;
    const body = Buffer.from(JSON.stringify({
      type: 'FeatureCollection',
      crs: { type: 'name', properties: { name: `EPSG:${hit.outSR ?? '4326'}` } },
      features: page,
      ...(capped && { exceededTransferLimit: true }),
    }));
    res.writeHead(200, { 'content-type': 'application/geo+json; charset=utf-8', 'content-length': body.length });
    if (f?.kind === 'gone') {
      res.write(body.subarray(0, Math.floor(body.length / 2)), () => {
        res.socket?.destroy();
        void s.close();
      });
      return;
    }
    res.end(body);
  };
  const s: ArcgisServer = {
    port,
    endpoint: '',
    csvUrl: '',
    hits,
    pageOffsets: () => hits.filter((h) => h.kind === 'page').map((h) => h.offset ?? 0),
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
    async listen() {
      server = http.createServer(handler);
      await new Promise<void>((resolve) => server.listen(s.port, '127.0.0.1', resolve));
      s.port = (server.address() as AddressInfo).port;
      s.endpoint = `http://127.0.0.1:${s.port}${LAYER_PATH}`;
      s.csvUrl = `http://127.0.0.1:${s.port}${CSV_PATH}`;
    },
  };
  await s.listen();
  return s;
}
