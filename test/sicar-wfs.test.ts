// SICAR route B: AREA_IMOVEL from a GeoServer WFS, through a real HTTP server on
// 127.0.0.1 that serves the GO fixture state page by page (lat/lon, as GeoServer does
// for URN CRSs under WFS 2.0), fails in the middle, and is killed mid-download.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { SICAR_FIXTURES, buildSicarState } from '../fixtures/sicar.ts';
import { wfsFeatures } from '../fixtures/sicar-wfs.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { defaultSicarRoute, sicarWfsLayer } from '../pipelines/sicar/wfs-route.ts';
import { officialRuns } from '../src/cli/main.ts';
import { loadConfig, type Config } from '../src/config.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import { geojsonToWkb, pageAxisOrder, sridOf } from '../src/etl/wfs-pages.ts';
import { isWfsEndpoint } from '../src/etl/wfs.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { startWfsServer, type Fault, type WfsServer } from './helpers/wfs-server.ts';

const ROOT = path.resolve(__dirname, '..');
const GO = sicarWfsLayer('GO');
const FEATURES = wfsFeatures('GO');
const PAGE = 2;
const STARTS = [0, 2, 4, 6, 8]; // 9 features in pages of 2
const WFS_ENV = { AGRO_SICAR_WFS_PAGE_SIZE: String(PAGE), AGRO_SICAR_WFS_BACKOFF_MS: '5', AGRO_SICAR_WFS_MAX_BACKOFF_MS: '20', AGRO_SICAR_WFS_RETRIES: '3' };

let db: TestDb;
let work: string;
const servers: WfsServer[] = [];

/** A config on the test database with its own raw store (each case downloads afresh). */
function cfgWith(dataDir: string, env: Record<string, string> = {}): Config {
  return loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: dataDir, ...WFS_ENV, ...env });
}
const freshDir = (name: string) => fs.mkdtempSync(path.join(work, `${name}-`));
const run = (cfg: Config, source: string, uf = 'GO') => runPipeline({ cfg, pool: db.pool, log: db.log }, sicar, { uf, source });
async function serve(layer: Parameters<typeof startWfsServer>[0][string], fault?: Parameters<typeof startWfsServer>[1]) {
  const s = await startWfsServer({ [GO]: layer }, fault);
  servers.push(s);
  return s;
}
async function snapshot(id: number) {
  return (await db.pool.query('SELECT source, quality, status FROM etl.snapshots WHERE snapshot_id = $1', [id])).rows[0] as { source: Record<string, unknown>; quality: QualityReport; status: string };
}
const countStarts = (starts: number[]) => Object.fromEntries(STARTS.map((s) => [s, starts.filter((x) => x === s).length]));

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sicar-wfs-'));
});
afterAll(async () => {
  for (const s of servers) await s.close();
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('pieces', () => {
  test('a --source is a WFS endpoint when its path ends in /wfs or /ows', () => {
    expect(isWfsEndpoint('https://geoserver.car.gov.br/geoserver/sicar/wfs')).toBe(true);
    expect(isWfsEndpoint('http://127.0.0.1:8080/geoserver/ows')).toBe(true);
    expect(isWfsEndpoint('https://mirror.example/sicar/')).toBe(false);
    expect(isWfsEndpoint('/data/sicar/wfs')).toBe(false);
  });

  test('srsName spellings give their EPSG code', () => {
    for (const s of ['EPSG:4674', 'urn:ogc:def:crs:EPSG::4674', 'http://www.opengis.net/def/crs/EPSG/0/4674', 'http://www.opengis.net/gml/srs/epsg.xml#4674']) expect(sridOf(s)).toBe(4674);
  });

  test('GeoJSON → WKB round-trips through PostGIS, swapped on request', async () => {
    const mp = { type: 'MultiPolygon', coordinates: [[[[-49, -16], [-48.9, -16], [-48.9, -15.9], [-49, -16]], [[-48.98, -15.99], [-48.95, -15.98], [-48.97, -15.97], [-48.98, -15.99]]], [[[-50, -17], [-49.9, -17], [-49.9, -16.9], [-50, -17]]]] };
    const q = async (hex: string) => (await db.pool.query(`SELECT ST_AsText($1::geometry) AS t`, [hex])).rows[0].t;
    expect(await q(geojsonToWkb(mp)!.toString('hex'))).toBe('MULTIPOLYGON(((-49 -16,-48.9 -16,-48.9 -15.9,-49 -16),(-48.98 -15.99,-48.95 -15.98,-48.97 -15.97,-48.98 -15.99)),((-50 -17,-49.9 -17,-49.9 -16.9,-50 -17)))');
    expect(await q(geojsonToWkb({ type: 'Point', coordinates: [-16, -49] }, true)!.toString('hex'))).toBe('POINT(-49 -16)');
    expect(await q(geojsonToWkb({ type: 'LineString', coordinates: [[-49, -16], [-48, -15]] })!.toString('hex'))).toBe('LINESTRING(-49 -16,-48 -15)');
    expect(geojsonToWkb(null)).toBeNull();
    expect(geojsonToWkb({ type: 'Polygon', coordinates: [] })).toBeNull();
  });

  test('axis order is decided from the data and the bounds, a forced order wins', () => {
    const bounds = { lon: [-75, -28] as [number, number], lat: [-35, 6] as [number, number] };
    const at = (x: number, y: number) => ({ geometry: { type: 'Polygon', coordinates: [[[x, y], [x + 0.1, y], [x, y + 0.1], [x, y]]] } });
    expect(pageAxisOrder([at(-49, -16), at(-50, -17)], bounds, 'auto')).toEqual({ order: 'lon-lat', unplaceable: 0 });
    expect(pageAxisOrder([at(-16, -49), at(-17, -50)], bounds, 'auto')).toEqual({ order: 'lat-lon', unplaceable: 0 });
    expect(pageAxisOrder([at(-16, -49), at(10, 10)], bounds, 'auto')).toEqual({ order: 'lat-lon', unplaceable: 1 });
    expect(pageAxisOrder([at(-16, -49)], bounds, 'lon-lat').order).toBe('lon-lat');
    expect(pageAxisOrder([], bounds, 'auto').order).toBe('lon-lat');
  });
});

describe('nightly needs no person for SICAR', () => {
  test('without a zip mirror the plan takes AREA_IMOVEL from the WFS; a mirror still wins', () => {
    const official = loadConfig({ AGRO_SICAR_UFS: 'GO,MT' });
    expect(defaultSicarRoute(official.sources)).toEqual({ kind: 'wfs', endpoint: 'https://geoserver.car.gov.br/geoserver/sicar/wfs' });
    const plan = officialRuns(official).plan.filter((p) => p.pipeline === 'sicar');
    expect(plan).toEqual([
      { pipeline: 'sicar', source: 'https://geoserver.car.gov.br/geoserver/sicar/wfs', uf: 'GO' },
      { pipeline: 'sicar', source: 'https://geoserver.car.gov.br/geoserver/sicar/wfs', uf: 'MT' },
    ]);
    expect(officialRuns(official).skipped.filter((s) => s.startsWith('sicar'))).toEqual([]);
    const local = loadConfig({ AGRO_SICAR_UFS: 'GO', AGRO_SOURCE_SICAR_WFS: 'http://127.0.0.1:1/geoserver/sicar/wfs' });
    expect(officialRuns(local).plan.find((p) => p.pipeline === 'sicar')?.source).toBe('http://127.0.0.1:1/geoserver/sicar/wfs');
    const mirror = loadConfig({ AGRO_SICAR_UFS: 'GO', AGRO_SOURCE_SICAR: '/srv/sicar-mirror' });
    expect(officialRuns(mirror).plan.find((p) => p.pipeline === 'sicar')?.source).toBe('/srv/sicar-mirror');
    const off = loadConfig({ AGRO_SICAR_UFS: 'GO', AGRO_SOURCE_SICAR_WFS: 'off' });
    expect(officialRuns(off).plan.find((p) => p.pipeline === 'sicar')).toBeUndefined();
    expect(officialRuns(off).skipped.some((s) => s.startsWith('sicar'))).toBe(true);
  });

  test('a run without --source uses the configured WFS', async () => {
    const s = await serve({ features: FEATURES });
    const cfg = cfgWith(freshDir('nosource'), { AGRO_SOURCE_SICAR_WFS: s.endpoint });
    const o = await runPipeline({ cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO' });
    expect(o.error).toBeUndefined();
    expect(['published', 'unchanged']).toContain(o.status);
    expect(s.pageStarts()).toEqual(STARTS);
  });
});

describe('route B against a server that fails once in the middle', () => {
  let zipSnapshot: number;
  let wfsSnapshot: number;
  let server: WfsServer;

  beforeAll(async () => {
    // The zip route first, for the same state: what route B must reproduce.
    const zips = path.join(work, 'GO-zips');
    await buildSicarState('GO', zips, { themes: [] });
    const z = await run(cfgWith(freshDir('zip')), zips);
    expect(z.status).toBe('published');
    zipSnapshot = z.snapshot_id!;

    const seen = new Map<number, number>();
    server = await serve({ features: FEATURES, axis: 'lat-lon' }, (hit): Fault | undefined => {
      if (hit.kind !== 'page') return undefined;
      const n = (seen.get(hit.startIndex!) ?? 0) + 1;
      seen.set(hit.startIndex!, n);
      if (hit.startIndex === 4 && n === 1) return { kind: 'status', status: 503 };
      if (hit.startIndex === 6 && n === 1) return { kind: 'cut', share: 0.5 };
      return undefined;
    });
    const o = await run(cfgWith(freshDir('wfs')), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(o.status).toBe('published');
    wfsSnapshot = o.snapshot_id!;
  });

  test('the failed page and the cut page were asked again, every other page once, in sortBy order', () => {
    expect(countStarts(server.pageStarts())).toEqual({ 0: 1, 2: 1, 4: 2, 6: 2, 8: 1 });
    const pages = server.hits.filter((h) => h.kind === 'page');
    expect(new Set(pages.map((h) => h.sortBy))).toEqual(new Set(['cod_imovel ASC']));
    expect(new Set(pages.map((h) => h.count))).toEqual(new Set([PAGE]));
    expect(new Set(pages.map((h) => h.srsName))).toEqual(new Set(['EPSG:4674']));
    // numberMatched before the first page and again after the last.
    expect(server.hits.filter((h) => h.kind === 'hits')).toHaveLength(2);
  });

  test('the snapshot records its route', async () => {
    const w = await snapshot(wfsSnapshot);
    expect(w.source).toMatchObject({ route: 'wfs', endpoint: server.endpoint, layer: GO, pages: 5, number_matched: 9, number_matched_after: 9, features: 9, page_size: PAGE });
    expect(w.source.files).toEqual([expect.objectContaining({ name: 'GO_AREA_IMOVEL.wfs.json' })]);
    expect((await snapshot(zipSnapshot)).source).toMatchObject({ route: 'zip' });
  });

  test('the quality report compares rows with numberMatched and says how the CRS was handled', async () => {
    const q = (await snapshot(wfsSnapshot)).quality;
    expect(q.gate.passed).toBe(true);
    expect(q.counts).toMatchObject({ read: 9, loaded: 7, rejected: 0 });
    expect((q.facts as unknown as { wfs: Record<string, unknown> }).wfs).toMatchObject({
      number_matched: 9, features_downloaded: 9, distinct_features: 9, rows_loaded: 7,
      srs_name: 'EPSG:4674', srid: 4674, axis_order_pages: { 'lat-lon': 5, 'lon-lat': 0 }, axis_unplaceable: 0,
    });
    expect(q.facts.dropped).toEqual({ other_state: 1, duplicate_car: 1 });
    expect(q.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false, repaired: 1 });
    expect(q.facts.layers).toEqual([{ name: GO, features: 9, srid: 4674, encoding: 'UTF-8', decided_by: 'default' }]);
    expect(q.facts.notes.some((n) => /lat\/lon order/.test(n))).toBe(true);
  });

  test('published rows equal the zip route rows for the same state', async () => {
    const cols = `car, uf, cod_municipio_ibge, municipio, situacao, tipo, condicao, modulos_fiscais, area_total_ha, area_calculada_ha, data_inscricao, data_atualizacao, app_ha, geom`;
    const rows = async (id: number) => (await db.pool.query(`SELECT ${cols} FROM snap.car_imovel__s${id} ORDER BY car`)).rows;
    const [z, w] = [await rows(zipSnapshot), await rows(wfsSnapshot)];
    expect(w.map((r) => r.car)).toEqual(z.map((r) => r.car));
    expect(w).toHaveLength(SICAR_FIXTURES.GO.areaImovel.length - 2);
    for (let i = 0; i < z.length; i++) {
      const { area_total_ha: at, area_calculada_ha: ac, modulos_fiscais: mf, geom: _g, ...rest } = z[i];
      const { area_total_ha: wt, area_calculada_ha: wc, modulos_fiscais: wm, geom: _h, ...wrest } = w[i];
      expect(wrest).toEqual(rest);
      expect(wt).toBeCloseTo(at, 6);
      expect(wc).toBeCloseTo(ac, 6);
      expect(wm).toBeCloseTo(mf, 6);
    }
    // The same polygons in the same place (a lat/lon mix-up would put them in the Atlantic).
    const far = await db.pool.query(
      `SELECT count(*)::int AS n FROM snap.car_imovel__s${zipSnapshot} z JOIN snap.car_imovel__s${wfsSnapshot} w USING (car)
        WHERE ST_HausdorffDistance(z.geom, w.geom) > 1e-9 OR NOT ST_Equals(ST_Centroid(z.geom), ST_Centroid(w.geom)) AND ST_Distance(z.centroid, w.centroid) > 1e-9`,
    );
    expect(far.rows[0].n).toBe(0);
  });

  test('the same pages again within the resume window: nothing downloaded, the run is unchanged', async () => {
    const before = server.pageStarts().length;
    const cfg = cfgWith(freshDir('again'));
    const first = await run(cfg, server.endpoint);
    expect(first.status).toBe('unchanged'); // same bytes as the published snapshot
    expect(server.pageStarts().length - before).toBe(STARTS.length);
    const second = await run(cfg, server.endpoint);
    expect(second.status).toBe('unchanged');
    expect(server.pageStarts().length - before).toBe(STARTS.length); // resumed from the stored, complete download
  });
});

describe('a download killed after some pages resumes from the stored pages', () => {
  test('SIGKILL while page 4 arrives; the next run asks only for pages 4 and 5', async () => {
    const dataDir = freshDir('kill');
    let child: ReturnType<typeof spawn> | undefined;
    let killed = false;
    const server = await serve({ features: FEATURES }, (hit) => {
      if (!killed && hit.kind === 'page' && hit.startIndex === 6) {
        killed = true;
        return { kind: 'cut', share: 0.4, then: () => child?.kill('SIGKILL') };
      }
      return undefined;
    });
    child = spawn(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'run', 'sicar', '--uf', 'GO', '--source', server.endpoint, '--json'], {
      env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...WFS_ENV },
      stdio: 'ignore',
    });
    const signal = await new Promise<NodeJS.Signals | null>((r) => child!.on('exit', (_c, sig) => r(sig)));
    expect(signal).toBe('SIGKILL');
    expect(server.pageStarts()).toEqual([0, 2, 4, 6]);

    // What the dead run left: three complete pages listed, the half page not.
    const pagesDir = path.join(dataDir, 'raw', 'sicar', 'GO', 'wfs', GO.replace(/:/g, '_'));
    const session = JSON.parse(fs.readFileSync(path.join(pagesDir, 'session.json'), 'utf8'));
    expect(session.pages.map((p: { startIndex: number }) => p.startIndex)).toEqual([0, 2, 4]);
    expect(session.completedAt).toBeNull();

    // The killed process's backend lets go of its run locks once the server sees the socket
    // closed: on a loaded machine that can come after the exit event.
    await advisoryLocksReleased();
    const before = server.hits.length;
    const o = await run(cfgWith(dataDir), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(['published', 'unchanged']).toContain(o.status);
    const again = server.hits.slice(before);
    expect(again.filter((h) => h.kind === 'page').map((h) => h.startIndex)).toEqual([6, 8]);
    expect(again.filter((h) => h.kind === 'hits')).toHaveLength(2);
    expect(o.rows_read).toBe(9);
    expect(fs.readdirSync(pagesDir).filter((f) => f.endsWith('.part'))).toEqual([]);
    // The dead run was cleaned up by this one.
    const dead = await db.pool.query(`SELECT status FROM etl.runs WHERE pipeline = 'sicar' AND scope = 'GO' AND status IN ('running', 'killed')`);
    expect(dead.rows.map((r) => r.status)).toEqual(['killed']);
  }, 120_000);
});

/** Waits (up to 10 s) until no session holds an advisory lock in the test database. */
async function advisoryLocksReleased(): Promise<void> {
  const held = `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
                 WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()`;
  for (const until = Date.now() + 10_000; (await db.pool.query(held)).rows[0].n > 0; ) {
    if (Date.now() > until) throw new Error('the killed run still holds its advisory locks after 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the download brought fewer features than numberMatched', () => {
  test('the gate blocks the snapshot and says why', async () => {
    const server = await serve({ features: FEATURES, numberMatched: 10 });
    const o = await run(cfgWith(freshDir('short')), server.endpoint);
    expect(o.status).toBe('blocked');
    expect(o.gate?.failures.map((f) => f.rule)).toEqual(['wfs_count']);
    expect(o.message).toMatch(/matched 10 features .* brought 9/);
    // startIndex 9 came back empty: the layer had nothing more to give.
    expect(server.pageStarts()).toEqual([...STARTS, 9]);
    const w = await snapshot(o.snapshot_id!);
    expect(w.status).toBe('blocked');
    expect((w.quality.facts as unknown as { wfs: Record<string, unknown> }).wfs).toMatchObject({ number_matched: 10, distinct_features: 9 });
  });

  test('an unknown layer is a clear error, not a retry loop', async () => {
    const server = await startWfsServer({});
    servers.push(server);
    const o = await run(cfgWith(freshDir('unknown')), server.endpoint);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('source_not_found');
    expect(o.error?.message).toMatch(/sicar_imoveis_go unknown/);
    expect(server.hits).toHaveLength(1);
  });

  test('the retry budget resets when bytes arrive: four cuts mid-page in a row (budget 3) still get through', async () => {
    let cuts = 0;
    const server = await serve({ features: FEATURES }, (hit) => (hit.kind === 'page' && hit.startIndex === 2 && cuts++ < 4 ? { kind: 'cut', share: 0.3 } : undefined));
    const o = await run(cfgWith(freshDir('cuts')), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(o.rows_read).toBe(9);
    expect(countStarts(server.pageStarts())).toEqual({ 0: 1, 2: 5, 4: 1, 6: 1, 8: 1 });
  });

  test('a server that keeps failing exhausts the retry budget', async () => {
    const server = await serve({ features: FEATURES }, (hit) => (hit.kind === 'page' && hit.startIndex === 2 ? { kind: 'status', status: 503 } : undefined));
    const o = await run(cfgWith(freshDir('down')), server.endpoint);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('download_failed');
    expect(countStarts(server.pageStarts())).toMatchObject({ 0: 1, 2: 3, 4: 0 });
  });
});

describe('legacy TLS, for the SICAR host only', () => {
  test('a TLS 1.0-only server: the WFS agent gets through with the chain pinned, Node defaults do not, verification stays on', async () => {
    const dir = freshDir('tls');
    const [key, cert] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const server = await startWfsServer({ [GO]: { features: FEATURES } }, undefined, {
      key: fs.readFileSync(key), cert: fs.readFileSync(cert), minVersion: 'TLSv1', maxVersion: 'TLSv1', ciphers: 'DEFAULT:@SECLEVEL=0',
    });
    servers.push(server);
    expect(server.endpoint).toMatch(/^https:/);

    const legacy = await run(cfgWith(freshDir('tls-legacy'), { AGRO_SICAR_WFS_TLS_CA: cert }), server.endpoint);
    expect(legacy.error).toBeUndefined();
    expect(['published', 'unchanged']).toContain(legacy.status);
    expect(legacy.rows_read).toBe(9);

    const modern = await run(cfgWith(freshDir('tls-modern'), { AGRO_SICAR_WFS_TLS_CA: cert, AGRO_SICAR_WFS_TLS_MIN_VERSION: 'TLSv1.2', AGRO_SICAR_WFS_TLS_CIPHERS: 'DEFAULT' }), server.endpoint);
    expect(modern.status).toBe('failed');
    expect(modern.error?.code).toBe('download_failed');
    expect(modern.error?.message).toMatch(/TLS .*AGRO_SICAR_WFS_TLS_MIN_VERSION/);

    const unpinned = await run(cfgWith(freshDir('tls-unpinned')), server.endpoint);
    expect(unpinned.status).toBe('failed');
    expect(unpinned.error?.message).toMatch(/self[- ]signed/i);
    // Neither was retried: one TLS attempt each (the hits request), nothing the server could log.
    expect(server.hits.filter((h) => h.kind === 'hits')).toHaveLength(2); // both from the legacy run
  });
});

describe('the real WFS sample (DF, fixtures/samples/sicar/sicar_imoveis_df_wfs.csv)', () => {
  test('every attribute lands in its canonical column, commas and accents intact, ISO timestamps as dates', async () => {
    const csv = fs.readFileSync(path.join(ROOT, 'fixtures/samples/sicar/sicar_imoveis_df_wfs.csv'), 'utf8');
    const rows = parse(csv, { columns: true }) as Record<string, string>[];
    const NUMERIC = ['area', 'm_fiscal', 'cod_municipio_ibge'];
    // As GeoServer's GeoJSON types them: numbers as numbers, empty as null. The sample has no
    // geometry: a square of the declared area per row, on a grid inside DF.
    const features = rows.map((r, i) => {
      const { FID, ...attrs } = r;
      const properties = Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, v === '' ? null : NUMERIC.includes(k) ? Number(v) : v]));
      const side = Math.sqrt(Number(r.area) * 1e4) / 111_000;
      const [x, y] = [-47.95 + (i % 5) * 0.02, -15.85 + Math.floor(i / 5) * 0.02];
      return { type: 'Feature' as const, id: FID, properties, geometry: { type: 'Polygon' as const, coordinates: [[[x, y], [x + side, y], [x + side, y + side], [x, y + side], [x, y]]] } };
    });
    const s = await startWfsServer({ [sicarWfsLayer('DF')]: { features } });
    servers.push(s);
    const o = await run(cfgWith(freshDir('df-sample')), s.endpoint, 'DF');
    expect(o.error).toBeUndefined();
    expect(o.status).toBe('published');
    expect(o.rows_loaded).toBe(rows.length);

    const got = new Map(
      (await db.pool.query(`SELECT car, uf, cod_municipio_ibge, municipio, situacao, tipo, condicao, area_total_ha, modulos_fiscais,
                                   data_inscricao::text AS di, data_atualizacao::text AS da, extra FROM snap.car_imovel__s${o.snapshot_id}`)).rows.map((r) => [r.car, r]),
    );
    const SITUACAO: Record<string, string> = { AT: 'ativo', PE: 'pendente', CA: 'cancelado', SU: 'suspenso' };
    for (const r of rows) {
      expect(got.get(r.cod_imovel)).toEqual({
        car: r.cod_imovel, uf: 'DF', cod_municipio_ibge: r.cod_municipio_ibge, municipio: 'Brasília', situacao: SITUACAO[r.status_imovel],
        tipo: 'imovel_rural', condicao: r.condicao, area_total_ha: Number(r.area), modulos_fiscais: Number(r.m_fiscal),
        di: r.dat_criacao.slice(0, 10), da: r.data_atualizacao ? r.data_atualizacao.slice(0, 10) : null,
        extra: { fid: r.FID, cod_municipio_ibge: Number(r.cod_municipio_ibge) },
      });
    }
    expect(rows.some((r) => r.condicao.includes(','))).toBe(true);
    const q = (await snapshot(o.snapshot_id!)).quality;
    expect(q.facts.dates).toEqual({ unparseable: {}, placeholders: {} });
    expect(q.facts.fields.unknown.sort()).toEqual(['cod_municipio_ibge', 'fid']);
    expect(q.facts.fields.missingOptional).toEqual([]);
    expect(q.facts.encoding).toMatchObject({ name: 'UTF-8', assumed: false, replacementChars: 0 });
  });
});
