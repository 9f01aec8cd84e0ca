// IBAMA's ArcGIS REST route (SOURCES.md §3.1, §3.7) against a real FeatureServer-like layer on
// 127.0.0.1 (test/helpers/arcgis-server.ts) serving fixtures/ibama-rest.ts in pages of 3
// (its maxRecordCount): a full load, a page failing with HTTP 500 and with ArcGIS's 200
// error body, a download whose server goes away and a second run that resumes, the CSV
// answering an HTML page (fallback to REST) and a count the pages do not reach.
// Expectations come from the fixture and from PostGIS run directly on the served GeoJSON.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { REST_RELEASE_DAY, REST_TERMS, restFeatures } from '../fixtures/ibama-rest.ts';
import { ibamaEmbargos, type EmbargoFacts } from '../pipelines/ibama-embargos/index.ts';
import { restValue } from '../pipelines/ibama-embargos/rest-route.ts';
import { officialRuns } from '../src/cli/main.ts';
import { arcgisRequest, isArcgisLayer, maxRecordCount } from '../src/etl/arcgis.ts';
import { loadConfig, type Config } from '../src/config.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { startArcgisServer, type ArcgisFault, type ArcgisHit, type ArcgisServer } from './helpers/arcgis-server.ts';

type Report = QualityReport & { facts: QualityReport['facts'] & { embargos: EmbargoFacts; rest: Record<string, unknown> } };

const PAGE = 3; // the layer's maxRecordCount: smaller than the 1000 asked by default
const OFFSETS = [0, 3, 6]; // 7 features
const REST_ENV = { AGRO_IBAMA_REST_BACKOFF_MS: '5', AGRO_IBAMA_REST_MAX_BACKOFF_MS: '20', AGRO_IBAMA_REST_RETRIES: '3' };

let db: TestDb;
let work: string;
const servers: ArcgisServer[] = [];

function cfgWith(dataDir: string, env: Record<string, string> = {}): Config {
  return loadConfig({ ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: dataDir, ...REST_ENV, ...env });
}
const freshDir = (name: string) => fs.mkdtempSync(path.join(work, `${name}-`));
const run = (cfg: Config, source?: string): Promise<RunOutcome> => runPipeline({ cfg, pool: db.pool, log: db.log }, ibamaEmbargos, source ? { source } : {});
async function serve(o: { count?: number } = {}, fault?: (hit: ArcgisHit) => ArcgisFault | undefined) {
  const s = await startArcgisServer({ features: restFeatures(), maxRecordCount: PAGE, ...o }, fault);
  servers.push(s);
  return s;
}
async function snapshot(id: number) {
  return (await db.pool.query('SELECT source, quality, status, as_of::text AS as_of FROM etl.snapshots WHERE snapshot_id = $1', [id])).rows[0] as { source: Record<string, unknown>; quality: Report; status: string; as_of: string };
}
const countOffsets = (offsets: number[]) => Object.fromEntries(OFFSETS.map((s) => [s, offsets.filter((x) => x === s).length]));

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ibama-rest-'));
});
afterAll(async () => {
  for (const s of servers) await s.close().catch(() => {});
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('pieces', () => {
  test('a --source is an ArcGIS layer when its path ends in /FeatureServer/N or /MapServer/N', () => {
    expect(isArcgisLayer('https://pamgia.ibama.gov.br/server/rest/services/01_Publicacoes_Bases/adm_embargos_ibama_a/FeatureServer/0')).toBe(true);
    expect(isArcgisLayer('http://127.0.0.1:8080/arcgis/rest/services/x/MapServer/12/')).toBe(true);
    expect(isArcgisLayer('https://dadosabertos.ibama.gov.br/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv')).toBe(false);
    expect(isArcgisLayer('/data/FeatureServer/0')).toBe(false);
  });

  test('pages of 1000, or of the layer\'s maxRecordCount when smaller or when its metadata says so', () => {
    const o = { pageSize: 1000, orderBy: 'OBJECTID', outSR: 4674 };
    expect(arcgisRequest('http://h/x/FeatureServer/0/', { ...o, maxRecordCount: maxRecordCount('{"maxRecordCount":2000}') }).pageSize).toBe(1000);
    expect(arcgisRequest('http://h/x/FeatureServer/0', { ...o, maxRecordCount: maxRecordCount('{"maxRecordCount":500}') }).pageSize).toBe(500);
    expect(maxRecordCount('{"error":{"code":499,"message":"Token Required"}}')).toBeNull();
    expect(maxRecordCount(null)).toBeNull();
    expect(arcgisRequest('http://h/x/FeatureServer/0/', { ...o, maxRecordCount: null })).toEqual({ endpoint: 'http://h/x/FeatureServer/0', where: '1=1', orderBy: 'OBJECTID', outSR: 4674, pageSize: 1000, srsName: 'EPSG:4674' });
  });

  test('epoch-ms dates become their day in Brazil (DAT_ULT_ALTERACAO its Brasília time, as the CSV writes it); other values stay as served', () => {
    expect(restValue('data_embargo', Date.parse('2024-05-10T03:00:00Z'))).toBe('2024-05-10');
    expect(restValue('data_desembargo', '1739502000000')).toBe('2025-02-14');
    expect(restValue('data_alteracao', Date.parse('2026-10-01T03:01:00Z'))).toBe('2026-10-01 00:01:00');
    // An instant of the evening in Brazil is already tomorrow in UTC: the report generated at
    // 22:30 on 20 November is of the 20th (as the CSV's stamp says), not the 21st.
    expect(restValue('ultima_atualizacao', Date.parse('2026-11-21T01:30:00Z'))).toBe('2026-11-20');
    expect(restValue('data_embargo', Date.parse('2025-03-01T02:59:59Z'))).toBe('2025-02-28');
    expect(restValue('data_alteracao', Date.parse('2026-10-02T01:30:00.500Z'))).toBe('2026-10-01 22:30:00');
    // A date typed without a time that a layer stores as UTC midnight is that day, not 21:00 the day before.
    expect(restValue('data_embargo', Date.parse('2024-05-10T00:00:00Z'))).toBe('2024-05-10');
    expect(restValue('data_alteracao', Date.parse('2024-05-10T00:00:00Z'))).toBe('2024-05-10 00:00:00');
    expect(restValue('data_embargo', 'sem data')).toBe('sem data');
    // A date written as digits is not milliseconds since 1970 (it would be 1970-01-01): as served.
    expect(restValue('data_embargo', 20190821)).toBe(20190821);
    expect(restValue('data_embargo', '20190821')).toBe('20190821');
    expect(restValue('data_embargo', null)).toBeNull();
    expect(restValue('numero_tad', 1234)).toBe(1234);
  });

  test('the configured REST layer is the official one, overridable and off-able', () => {
    expect(loadConfig({}).sources['ibama-embargos-rest']).toBe('https://pamgia.ibama.gov.br/server/rest/services/01_Publicacoes_Bases/adm_embargos_ibama_a/FeatureServer/0');
    expect(loadConfig({ AGRO_SOURCE_IBAMA_EMBARGOS_REST: 'off' }).sources['ibama-embargos-rest']).toBe('off');
    // The nightly keeps running the CSV (the REST layer is its fallback), not a pipeline of its own.
    expect(officialRuns(loadConfig({})).plan.filter((p) => p.pipeline.startsWith('ibama'))).toEqual([
      { pipeline: 'ibama-embargos', source: 'https://dadosabertos.ibama.gov.br/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv' },
    ]);
  });
});

describe('(a) a full load from --source <…/FeatureServer/0>', () => {
  let server: ArcgisServer;
  let o: RunOutcome;
  let rows: Map<string, Record<string, any>>;

  beforeAll(async () => {
    server = await serve();
    o = await run(cfgWith(freshDir('full')), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(o.status).toBe('published');
    const r = await db.pool.query(`SELECT *, data_embargo::text AS de, data_desembargo::text AS dd, data_alteracao::text AS da, ST_SRID(geom) AS srid, GeometryType(geom) AS gtype, ST_AsGeoJSON(geom) AS gj FROM snap.ibama_embargos__s${o.snapshot_id}`);
    rows = new Map(r.rows.map((x) => [x.id_tad, x]));
  });

  test('pages of the layer\'s maxRecordCount, ordered by OBJECTID, in EPSG:4674; the count asked before and after', () => {
    expect(server.pageOffsets()).toEqual(OFFSETS);
    const pages = server.hits.filter((h) => h.kind === 'page');
    expect(new Set(pages.map((h) => h.recordCount))).toEqual(new Set([PAGE]));
    expect(new Set(pages.map((h) => h.outSR))).toEqual(new Set(['4674']));
    expect(new Set(pages.map((h) => h.orderBy))).toEqual(new Set(['OBJECTID']));
    expect(server.hits.filter((h) => h.kind === 'metadata')).toHaveLength(1);
    expect(server.hits.filter((h) => h.kind === 'count')).toHaveLength(2);
  });

  test('every term loads, keyed as the CSV route keys it, with its point-only and lifted terms', () => {
    expect([...rows.keys()].sort()).toEqual(REST_TERMS.map((t) => t.idTad).sort());
    const byRole = (role: string) => rows.get(REST_TERMS.find((t) => t.role === role)!.idTad)!;
    expect(byRole('ponto')).toMatchObject({ geom_origem: 'ponto', gtype: 'POINT', srid: 4326 });
    expect(byRole('desembargado')).toMatchObject({ desembargado: true, ativo: false, situacao: 'desembargado', dd: '2025-02-14', tipo_desembargo: 'Total' });
    expect(byRole('cancelado')).toMatchObject({ cancelado: true, ativo: false });
    expect(byRole('poligono')).toMatchObject({ ativo: true, situacao: 'ativo', uf: 'PA', municipio: 'Paragominas', nome_embargado: 'Fazenda Teste 1 Ltda', area_embargada_ha: 12.5 });
    expect(byRole('aie').numero_tad).toBe('AIE123');
    expect(byRole('bowtie')).toMatchObject({ geom_origem: 'poligono', gtype: 'MULTIPOLYGON' });
    // Fields of no route land in extra, as the other routes keep them.
    expect(byRole('poligono').extra).toMatchObject({ globalid: '{00000001-AAAA-BBBB-CCCC-DDDDDDDDDDDD}' });
  });

  test('dates: epoch ms as their day, an unreadable one NULL and counted', async () => {
    for (const t of REST_TERMS) expect(rows.get(t.idTad)!.de).toBe(t.dataEmbargo);
    expect(rows.get(REST_TERMS[0].idTad)!.da).toBe('2026-10-01 00:01:00'); // 00:01 in Brasília, as the CSV writes it
    const q = (await snapshot(o.snapshot_id!)).quality;
    expect(q.facts.dates.unparseable).toMatchObject({ data_embargo: 1 });
    expect((await snapshot(o.snapshot_id!)).as_of).toBe(REST_RELEASE_DAY);
  });

  test('polygons in EPSG:4326, as PostGIS transforms the served 4674 geometry (the bowtie repaired)', async () => {
    for (const t of REST_TERMS.filter((x) => x.geometry && x.role !== 'bowtie')) {
      const r = await db.pool.query(
        `SELECT ST_HausdorffDistance(ST_Multi(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON($1), 4674), 4326)), geom) AS d, ST_SRID(geom) AS srid FROM snap.ibama_embargos__s${o.snapshot_id} WHERE id_tad = $2`,
        [JSON.stringify(t.geometry), t.idTad],
      );
      expect(r.rows[0].srid).toBe(4326);
      expect(r.rows[0].d).toBeLessThan(1e-9);
    }
    const bow = await db.pool.query(`SELECT ST_IsValid(geom) AS v FROM snap.ibama_embargos__s${o.snapshot_id} WHERE id_tad = $1`, [REST_TERMS.find((t) => t.role === 'bowtie')!.idTad]);
    expect(bow.rows[0].v).toBe(true);
  });

  test('the snapshot and the report record the route', async () => {
    const s = await snapshot(o.snapshot_id!);
    expect(s.source).toMatchObject({ route: 'rest', endpoint: server.endpoint, out_sr: 4674, page_size: PAGE, order_by: 'OBJECTID', pages: 3, count: 7, count_after: 7, features: 7 });
    expect(s.source.csv_failed).toBeUndefined();
    expect(s.source.files).toEqual([expect.objectContaining({ name: 'adm_embargos_ibama_a.rest.json' })]);
    const q = s.quality;
    expect(q.gate.passed).toBe(true);
    expect(q.counts).toMatchObject({ read: 7, loaded: 7, rejected: 0 });
    expect(q.facts.embargos).toMatchObject({ route: 'rest', poligono: 6, ponto: 1 });
    expect(q.facts.rest).toMatchObject({ count: 7, features_downloaded: 7, distinct_features: 7, rows_loaded: 7, out_sr: 4674, srid: 4674, csv_failed: null });
    expect(q.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false });
    expect(q.facts.notes).toContain('route: ArcGIS REST (--source names the layer)');
  });
});

describe('(b) a page failing with HTTP 500, another with ArcGIS\'s 200 error body', () => {
  test('both are retried, every other page asked once, and the download is the same as a clean one', async () => {
    const clean = await serve();
    const a = await run(cfgWith(freshDir('clean')), clean.endpoint);
    expect(['published', 'unchanged']).toContain(a.status);

    const seen = new Map<number, number>();
    const server = await serve({}, (hit): ArcgisFault | undefined => {
      if (hit.kind !== 'page') return undefined;
      const n = (seen.get(hit.offset!) ?? 0) + 1;
      seen.set(hit.offset!, n);
      if (hit.offset === 3 && n === 1) return { kind: 'status', status: 500 };
      if (hit.offset === 6 && n === 1) return { kind: 'arcgis-error' };
      return undefined;
    });
    const o = await run(cfgWith(freshDir('faulty')), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(countOffsets(server.pageOffsets())).toEqual({ 0: 1, 3: 2, 6: 2 });
    expect(server.hits.filter((h) => h.fault).map((h) => [h.offset, h.fault])).toEqual([[3, 'status'], [6, 'arcgis-error']]);
    // The same terms as the clean download (another endpoint, so a snapshot of its own).
    expect(o.status).toBe('published');
    expect(a.status).toBe('published');
    const rows = async (id: number) => (await db.pool.query(`SELECT * FROM snap.ibama_embargos__s${id} ORDER BY id_tad`)).rows.map(({ snapshot_id: _s, ...r }) => r);
    const [ra, ro] = [await rows(a.snapshot_id!), await rows(o.snapshot_id!)];
    expect(ro).toHaveLength(REST_TERMS.length);
    expect(ro).toEqual(ra);
  });

  test('an error body on every attempt exhausts the retry budget: a failed run, never an empty page', async () => {
    const server = await serve({}, (hit) => (hit.kind === 'page' && hit.offset === 3 ? { kind: 'arcgis-error' } : undefined));
    const o = await run(cfgWith(freshDir('errors')), server.endpoint);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('download_failed');
    expect(o.error?.message).toMatch(/page at 3 .*ArcGIS error 500: Error performing query operation \(3 attempts\)/);
    expect(countOffsets(server.pageOffsets())).toEqual({ 0: 1, 3: 3, 6: 0 });
  });
});

describe('(c) the server goes away mid-download', () => {
  test('the run fails; the next one resumes after the last complete page', async () => {
    const dataDir = freshDir('resume');
    let gone = false;
    const server = await serve({}, (hit) => {
      if (!gone && hit.kind === 'page' && hit.offset === 3) {
        gone = true;
        return { kind: 'gone' };
      }
      return undefined;
    });
    const first = await run(cfgWith(dataDir), server.endpoint);
    expect(first.status).toBe('failed');
    expect(first.error?.code).toBe('download_failed');
    expect(server.pageOffsets()).toEqual([0, 3]);
    const pagesDir = path.join(dataDir, 'raw', 'ibama-embargos', 'rest', 'adm_embargos_ibama_a');
    const session = JSON.parse(fs.readFileSync(path.join(pagesDir, 'session.json'), 'utf8'));
    expect(session.pages.map((p: { startIndex: number }) => p.startIndex)).toEqual([0]);
    expect(session.completedAt).toBeNull();

    await server.listen(); // back, on the same port
    const before = server.hits.length;
    const o = await run(cfgWith(dataDir), server.endpoint);
    expect(o.error).toBeUndefined();
    expect(['published', 'unchanged']).toContain(o.status);
    const again = server.hits.slice(before);
    expect(again.filter((h) => h.kind === 'page').map((h) => h.offset)).toEqual([3, 6]);
    expect(again.filter((h) => h.kind === 'count')).toHaveLength(2);
    expect(o.rows_read).toBe(7);
    expect(fs.readdirSync(pagesDir).filter((f) => f.endsWith('.part'))).toEqual([]);
  });
});

describe('(d) the CSV download fails', () => {
  test('an HTML page instead of the CSV: the run takes the REST route and the report says why', async () => {
    const server = await serve();
    const cfg = cfgWith(freshDir('fallback'), { AGRO_SOURCE_IBAMA_EMBARGOS: server.csvUrl, AGRO_SOURCE_IBAMA_EMBARGOS_REST: server.endpoint });
    const o = await run(cfg); // no --source: the configured CSV, as the nightly runs it
    expect(o.error).toBeUndefined();
    expect(o.status).toBe('published');
    expect(server.hits.filter((h) => h.kind === 'csv')).toHaveLength(1);
    expect(server.pageOffsets()).toEqual(OFFSETS);
    const s = await snapshot(o.snapshot_id!);
    expect(s.source).toMatchObject({ route: 'rest', endpoint: server.endpoint, csv_failed: { uri: server.csvUrl, code: 'html_instead_of_archive' } });
    expect(s.quality.facts.embargos.route).toBe('rest');
    expect(s.quality.facts.rest).toMatchObject({ csv_failed: { uri: server.csvUrl, code: 'html_instead_of_archive' } });
    expect(s.quality.facts.notes.find((n) => n.startsWith('route: ArcGIS REST, because the CSV download failed'))).toMatch(/html_instead_of_archive: .*HTML page/);
  });

  test('when the REST layer fails too, the run fails saying what happened to both', async () => {
    const server = await serve({}, (hit) => (hit.kind === 'count' ? { kind: 'status', status: 503 } : undefined));
    const o = await run(cfgWith(freshDir('both-fail'), { AGRO_SOURCE_IBAMA_EMBARGOS: server.csvUrl, AGRO_SOURCE_IBAMA_EMBARGOS_REST: server.endpoint }));
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('download_failed');
    expect(o.error?.message).toMatch(/count of .*FeatureServer\/0: HTTP 503 \(3 attempts.*taken because the CSV download failed: .*HTML page/);
    expect(server.hits.filter((h) => h.kind === 'count')).toHaveLength(3);
  });

  test('with the REST route off, the CSV failure is the run\'s failure', async () => {
    const server = await serve();
    const o = await run(cfgWith(freshDir('no-fallback'), { AGRO_SOURCE_IBAMA_EMBARGOS: server.csvUrl, AGRO_SOURCE_IBAMA_EMBARGOS_REST: 'off' }));
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('html_instead_of_archive');
    expect(server.pageOffsets()).toEqual([]);
  });
});

describe('(e) the pages do not reach the layer\'s count', () => {
  test('the gate blocks the snapshot and the report gives both numbers', async () => {
    const server = await serve({ count: 8 });
    const o = await run(cfgWith(freshDir('short')), server.endpoint);
    expect(o.status).toBe('blocked');
    expect(o.gate?.failures.map((f) => f.rule)).toEqual(['rest_count']);
    expect(o.message).toMatch(/counted 8 features .* brought 7/);
    // The last page held fewer than asked and no exceededTransferLimit: paging ended there.
    expect(server.pageOffsets()).toEqual(OFFSETS);
    const s = await snapshot(o.snapshot_id!);
    expect(s.quality.facts.rest).toMatchObject({ count: 8, features_downloaded: 7, distinct_features: 7, rows_loaded: 7 });
  });
});
