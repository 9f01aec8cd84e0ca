// A small GeoServer-like WFS 2.0 on 127.0.0.1 for tests: GetFeature with resultType=hits
// (numberMatched), count/startIndex paging under sortBy, GeoJSON output with a `crs`
// member, an OGC ExceptionReport for an unknown layer, and faults injected per request.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Feature, Geometry, Position } from 'geojson';

export type Fault =
  | { kind: 'status'; status: number }
  /** Send this share of the page body (Content-Length announces all of it), then cut the connection. */
  | { kind: 'cut'; share: number; then?: () => void }
  /** Send nothing, keep the connection open. */
  | { kind: 'hang'; then?: () => void };

export interface WfsHit {
  n: number;
  kind: 'hits' | 'page' | 'other';
  typeName: string;
  startIndex: number | null;
  count: number | null;
  sortBy: string | null;
  srsName: string | null;
  fault: Fault['kind'] | null;
}

export interface WfsLayer {
  features: Feature[];
  /** numberMatched to report instead of the true count (a layer that loses features). */
  numberMatched?: number;
  /** Coordinate order of the served geometries (GeoServer serves lat/lon for URN srsNames under WFS 2.0). */
  axis?: 'lon-lat' | 'lat-lon';
}

export interface WfsServer {
  endpoint: string;
  hits: WfsHit[];
  /** startIndex of every page request, in order. */
  pageStarts(): number[];
  close(): Promise<void>;
}

const swap = (g: Geometry): Geometry => {
  const flip = (c: unknown): unknown => (typeof (c as number[])[0] === 'number' ? [(c as Position)[1], (c as Position)[0]] : (c as unknown[]).map(flip));
  return g.type === 'GeometryCollection' ? { ...g, geometries: g.geometries.map(swap) } : ({ ...g, coordinates: flip(g.coordinates) } as Geometry);
};

function sortFeatures(features: Feature[], sortBy: string | null): Feature[] {
  if (!sortBy) return features;
  const keys = sortBy.split(',').map((k) => {
    const [prop, dir] = k.trim().split(/\s+/);
    return { prop, desc: /^(DESC|D)$/i.test(dir ?? '') };
  });
  // Ties broken by feature id, as GeoServer's JDBC store adds the primary key.
  return [...features].sort((a, b) => {
    for (const k of keys) {
      const x = String(a.properties?.[k.prop] ?? '');
      const y = String(b.properties?.[k.prop] ?? '');
      if (x !== y) return (x < y ? -1 : 1) * (k.desc ? -1 : 1);
    }
    return String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0;
  });
}

function exceptionReport(res: ServerResponse, text: string) {
  res.writeHead(200, { 'content-type': 'application/xml' });
  res.end(`<?xml version="1.0" encoding="UTF-8"?><ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows/1.1" version="2.0.0"><ows:Exception exceptionCode="InvalidParameterValue" locator="typeName"><ows:ExceptionText>${text}</ows:ExceptionText></ows:Exception></ows:ExceptionReport>`);
}

/** Serves `layers` (by typeName) at http://127.0.0.1:<port>/geoserver/sicar/wfs. */
export async function startWfsServer(layers: Record<string, WfsLayer>, fault?: (hit: WfsHit) => Fault | undefined, tls?: https.ServerOptions): Promise<WfsServer> {
  const hits: WfsHit[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // KVP parameter names are case-insensitive.
    const q = new Map([...url.searchParams].map(([k, v]) => [k.toLowerCase(), v]));
    const typeName = q.get('typenames') ?? q.get('typename') ?? '';
    const isHits = (q.get('resulttype') ?? '').toLowerCase() === 'hits';
    const num = (k: string) => (q.has(k) ? Number(q.get(k)) : null);
    const hit: WfsHit = {
      n: hits.length, kind: !/\/wfs$/.test(url.pathname) || q.get('request') !== 'GetFeature' ? 'other' : isHits ? 'hits' : 'page',
      typeName, startIndex: num('startindex'), count: num('count'), sortBy: q.get('sortby') ?? null, srsName: q.get('srsname') ?? null, fault: null,
    };
    hits.push(hit);
    if (hit.kind === 'other') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('unsupported request');
      return;
    }
    const f = fault?.(hit);
    hit.fault = f?.kind ?? null;
    if (f?.kind === 'status') {
      res.writeHead(f.status, { 'content-type': 'text/html' }).end('<html><body>Service Unavailable</body></html>');
      return;
    }
    if (f?.kind === 'hang') {
      f.then?.();
      return;
    }
    const layer = layers[typeName];
    if (!layer) return exceptionReport(res, `Feature type ${typeName} unknown`);
    const matched = layer.numberMatched ?? layer.features.length;
    const stamp = '2026-11-23T03:00:00.000Z';
    if (isHits) {
      res.writeHead(200, { 'content-type': 'text/xml; subtype=gml/3.2' });
      res.end(`<?xml version="1.0" encoding="UTF-8"?><wfs:FeatureCollection xmlns:wfs="http://www.opengis.net/wfs/2.0" numberMatched="${matched}" numberReturned="0" timeStamp="${stamp}"/>`);
      return;
    }
    const start = hit.startIndex ?? 0;
    const page = sortFeatures(layer.features, hit.sortBy).slice(start, hit.count === null ? undefined : start + hit.count);
    const srs = hit.srsName?.match(/(\d+)$/)?.[1] ?? '4326';
    // GeoServer places the collection's counts and crs after the features.
    const body = Buffer.from(
      JSON.stringify({
        type: 'FeatureCollection',
        features: page.map((x) => ({ ...x, geometry: x.geometry && layer.axis === 'lat-lon' ? swap(x.geometry) : x.geometry })),
        totalFeatures: matched, numberMatched: matched, numberReturned: page.length, timeStamp: stamp,
        crs: { type: 'name', properties: { name: `urn:ogc:def:crs:EPSG::${srs}` } },
      }),
    );
    res.writeHead(200, { 'content-type': 'application/json;charset=UTF-8', 'content-length': body.length });
    if (f?.kind === 'cut') {
      res.write(body.subarray(0, Math.floor(body.length * f.share)), () => {
        f.then?.();
        setTimeout(() => res.socket?.destroy(), 20);
      });
      return;
    }
    res.end(body);
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `${tls ? 'https' : 'http'}://127.0.0.1:${port}/geoserver/sicar/wfs`,
    hits,
    pageStarts: () => hits.filter((h) => h.kind === 'page').map((h) => h.startIndex ?? 0),
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
