// The whole official night end to end: every agency's endpoint served on loopback in its
// official layout from the bundled fixtures (SICAR and FUNAI GeoServers, IBAMA's CSV, ICMBio's
// and INCRA's zips, MMA's and MAPA's CKAN, DNIT's and Receita's Nextcloud WebDAV shares, IBGE's
// mesh and localidades list), each URL set through the AGRO_SOURCE_* configuration the README
// documents, and a real `agro nightly --sources official --json` child process, three nights:
// a first that publishes everything, an identical one that publishes nothing new, and one where
// agencies answer 503, an HTML page or nothing at all. Then `agro schedule`'s plan for the same.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startDavServer, type DavServer } from '../fixtures/receita-cnpj-server.ts';
import { IBGE_MUNICIPIOS } from '../fixtures/ibge-municipios.ts';
import { wfsFeatures } from '../fixtures/sicar-wfs.ts';
import { PIPELINES } from '../pipelines/registry.ts';
import { loadConfig } from '../src/config.ts';
import { officialRuns } from '../src/cli/main.ts';
import { defaultSchedule } from '../src/schedule/config.ts';
import { DEPENDS_ON, planBatch } from '../src/schedule/plan.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { startWfsServer, type Fault, type WfsServer } from './helpers/wfs-server.ts';

const ROOT = path.resolve(__dirname, '..');
const AGRO = path.join(ROOT, 'bin/agro.mjs');
const FIX = path.join(ROOT, 'fixtures');
const UFS = ['DF', 'MT'];
const CNUC_DATASET = '44b6dc8a-dc82-4a84-8d95-1b0da7c85dac';
const ZARC_DATASET = 'tabua-de-risco-zoneamento-agricola-de-risco-climatico';
const DNIT_FOLDER = 'SNV Bases Geométricas (2013-Atual) (SHP)';
const CNPJ_TOKEN = 'ShareTok3n';

/** What an agency's endpoint does tonight instead of answering. */
type Trouble = '503' | 'html' | 'hang';

/**
 * The agencies that answer plain GETs, on one server, at their official paths: a path → the
 * file served (a CKAN package_show answers its resources with this server's URLs).
 */
interface Agencies {
  base: string;
  trouble: Map<string, Trouble>;
  hits: string[];
  close(): Promise<void>;
}

const files: Record<string, string> = {
  '/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv': 'ibama-embargos/termo_embargo.csv',
  '/icmbio/pt-br/assuntos/dados_geoespaciais/embargos_icmbio.zip': 'icmbio-embargos/embargos_icmbio.zip',
  '/geoserver/Funai/ows': 'funai-tis/tis_poligonais.zip',
  '/csv_shp/zip/Áreas de Quilombolas.zip': 'incra-quilombos/Áreas de Quilombolas.zip',
  [`/dataset/${CNUC_DATASET}/resource/c3/download/shp_cnuc_2024_10.zip`]: 'cnuc-ucs/shp_cnuc_2024_10.zip',
  '/organizacao_do_territorio/malhas_territoriais/malhas_municipais/municipio_2024/Brasil/BR_Municipios_2024.zip': 'ibge-municipios/BR_Municipios_2024.zip',
};
const ZARC_FILES = fs.readdirSync(path.join(FIX, 'zarc')).filter((f) => f.endsWith('.csv')).sort();
for (const f of ZARC_FILES) files[`/dataset/zarc/resource/${f}`] = `zarc/${f}`;

/** IBGE's localidades answer for the fixture mesh's municipalities. */
const LOCALIDADES = JSON.stringify(IBGE_MUNICIPIOS.map((f) => ({
  id: Number(f.attributes.CD_MUN), nome: f.attributes.NM_MUN,
  microrregiao: { id: 0, nome: 'x', mesorregiao: { id: 0, nome: 'x', UF: { id: Number(f.attributes.CD_MUN.slice(0, 2)), sigla: f.attributes.SIGLA_UF, nome: 'x' } } },
})));

async function startAgencies(): Promise<Agencies> {
  const trouble = new Map<string, Trouble>();
  const hits: string[] = [];
  const stamp = 'Tue, 05 Aug 2025 10:00:00 GMT';
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const pathname = decodeURIComponent(url.pathname);
    hits.push(pathname);
    const t = trouble.get(pathname);
    if (t === 'hang') return;
    if (t === '503') return void res.writeHead(503, { 'content-type': 'text/plain' }).end('Service Unavailable');
    if (t === 'html') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<!DOCTYPE html><html><body>Portal em manutenção</body></html>');
    const json = (body: unknown) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (pathname === '/api/3/action/package_show') {
      const id = url.searchParams.get('id');
      const resource = (name: string, p: string, format: string) => ({ id: name, name, format, url: `${base}${p}` });
      if (id === CNUC_DATASET) return json({ success: true, result: { id, resources: [resource('shp_cnuc_2024_10.zip', `/dataset/${CNUC_DATASET}/resource/c3/download/shp_cnuc_2024_10.zip`, 'ZIP')] } });
      if (id === ZARC_DATASET) return json({ success: true, result: { id, resources: ZARC_FILES.map((f) => resource(f, `/dataset/zarc/resource/${encodeURIComponent(f)}`, 'CSV')) } });
      return void res.writeHead(404).end();
    }
    if (pathname === '/api/v1/localidades/municipios') return void res.writeHead(200, { 'content-type': 'application/json' }).end(LOCALIDADES);
    const file = files[pathname];
    if (!file) return void res.writeHead(404).end();
    const bytes = fs.readFileSync(path.join(FIX, file));
    res.writeHead(200, { 'content-type': file.endsWith('.csv') ? 'text/csv' : 'application/zip', 'content-length': bytes.length, 'last-modified': stamp });
    res.end(bytes);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { base, trouble, hits, close: () => new Promise((r) => (server.closeAllConnections(), server.close(() => r()))) };
}

let db: TestDb;
let work: string;
let agencies: Agencies;
let sicarWfs: WfsServer;
let dnit: DavServer;
let receita: DavServer;
const sicarTrouble = new Map<string, Fault>();
let nightEnv: Record<string, string>;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'official-night-'));
  agencies = await startAgencies();
  sicarWfs = await startWfsServer(
    Object.fromEntries(UFS.map((uf) => [`sicar:sicar_imoveis_${uf.toLowerCase()}`, { features: wfsFeatures(uf as 'DF' | 'MT') }])),
    (hit) => sicarTrouble.get(hit.typeName),
  );
  // DNIT Cloud: the share's folder of SNV versions.
  fs.mkdirSync(path.join(work, 'dnit', DNIT_FOLDER), { recursive: true });
  fs.copyFileSync(path.join(FIX, 'dnit-snv/202507A.zip'), path.join(work, 'dnit', DNIT_FOLDER, '202507A.zip'));
  dnit = await startDavServer({ root: path.join(work, 'dnit'), prefix: '/dnitcloud/public.php/webdav/', token: 'oTpPRmYs5AAdiNr' });
  // Receita's share: its root holds the YYYY-MM months.
  receita = await startDavServer({ root: path.join(FIX, 'receita-cnpj'), token: CNPJ_TOKEN });
  const b = agencies.base;
  nightEnv = {
    DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'warn',
    AGRO_SICAR_UFS: UFS.join(','),
    AGRO_SOURCE_SICAR_WFS: sicarWfs.endpoint,
    // A stalled GeoServer is given up on quickly; every night downloads its pages again.
    AGRO_SICAR_WFS_STALL_TIMEOUT_MS: '1500', AGRO_SICAR_WFS_RETRIES: '1', AGRO_SICAR_WFS_BACKOFF_MS: '50', AGRO_SICAR_WFS_RESUME_HOURS: '0',
    // Plain downloads too: an agency that answers nothing fails its run in seconds, not 5 × 60 s.
    AGRO_DOWNLOAD_STALL_TIMEOUT_MS: '1500', AGRO_DOWNLOAD_RETRIES: '2', AGRO_DOWNLOAD_BACKOFF_MS: '50',
    AGRO_SOURCE_IBAMA_EMBARGOS: `${b}/dados/SIFISC/termo_embargo/termo_embargo/termo_embargo.csv`,
    AGRO_SOURCE_IBAMA_EMBARGOS_REST: 'off',
    AGRO_SOURCE_ICMBIO_EMBARGOS: `${b}/icmbio/pt-br/assuntos/dados_geoespaciais/embargos_icmbio.zip`,
    AGRO_SOURCE_FUNAI_TIS: `${b}/geoserver/Funai/ows?service=WFS&version=1.0.0&request=GetFeature&typeName=Funai%3Atis_poligonais&maxFeatures=10000&outputFormat=SHAPE-ZIP`,
    AGRO_SOURCE_CNUC_UCS: `${b}/api/3/action/package_show?id=${CNUC_DATASET}`,
    AGRO_SOURCE_INCRA_QUILOMBOS: `${b}/csv_shp/zip/%C3%81reas%20de%20Quilombolas.zip`,
    AGRO_SOURCE_DNIT_SNV: `${dnit.url.replace('http://', 'http://oTpPRmYs5AAdiNr:@')}${encodeURIComponent(DNIT_FOLDER)}/`,
    AGRO_SOURCE_ZARC: `${b}/api/3/action/package_show?id=${ZARC_DATASET}`,
    AGRO_SOURCE_RECEITA_CNPJ: receita.url,
    AGRO_CNPJ_SHARE_TOKEN: CNPJ_TOKEN,
    AGRO_SOURCE_IBGE_MUNICIPIOS: `${b}/organizacao_do_territorio/malhas_territoriais/malhas_municipais/municipio_2024/Brasil/BR_Municipios_2024.zip`,
    AGRO_SOURCE_IBGE_LOCALIDADES: `${b}/api/v1/localidades/municipios`,
  };
}, 60_000);
afterAll(async () => {
  await Promise.all([agencies?.close(), sicarWfs?.close(), dnit?.close(), receita?.close()]);
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

/** The child's environment: only this test's configuration, no AGRO_* of the caller's shell. */
function childEnv(): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGRO_') && k !== 'DATABASE_URL'));
  return { ...base, ...nightEnv };
}

/** A real `agro nightly --sources official --json`; killed after `limitMs` (a night that hangs fails the test, it does not outlive it). */
function night(limitMs = 75_000): Promise<{ code: number | null; json: NightJson; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGRO, 'nightly', '--sources', 'official', '--json'], { env: childEnv() });
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      try {
        resolve({ code, json: JSON.parse(out), err });
      } catch {
        reject(new Error(`no JSON result (exit ${code ?? signal}${signal ? `, killed after ${limitMs} ms` : ''}): ${out}\n${err.slice(-2000)}`));
      }
    });
  });
}

interface NightRun { pipeline: string; uf: string | null; status: string; snapshot_id: number | null; message?: string; error?: { code: string; message: string } }
interface NightJson { runs: NightRun[]; skipped: string[]; summary: { runs: number; by_status: Record<string, number>; failed: string[]; blocked: string[]; not_run: string[] } }

/** The official night's order: PIPELINES, SICAR once per state, car-titulares (no public source) skipped. */
const ORDER = PIPELINES.filter((p) => p.name !== 'car-titulares').flatMap((p) => (p.scopedByUf ? UFS.map((uf) => `${p.name} ${uf}`) : [p.name]));
const where = (r: NightRun) => `${r.pipeline}${r.uf ? ' ' + r.uf : ''}`;
const count = async (sql: string) => (await db.pool.query(sql)).rows[0].n as number;

describe('the official night against every agency on loopback', () => {
  let first: NightJson;

  test('night 1: every pipeline publishes in the documented order, each with its snapshot; overlaps derived', async () => {
    const r = await night();
    expect(r.json.summary.failed, r.err).toEqual([]);
    expect(r.code, r.err).toBe(0);
    expect(r.json.runs.map(where)).toEqual(ORDER);
    for (const run of r.json.runs) expect({ run: where(run), status: run.status, snapshot: run.snapshot_id }).toEqual({ run: where(run), status: 'published', snapshot: expect.any(Number) });
    expect(r.json.skipped).toEqual([expect.stringMatching(/^car-titulares: no source configured/)]);
    expect(r.json.summary).toEqual({ runs: ORDER.length, by_status: { published: ORDER.length }, failed: [], blocked: [], not_run: [] });
    const current = await db.pool.query(`SELECT dataset, scope, snapshot_id::int FROM etl.current`);
    expect(current.rows.map((c) => c.snapshot_id).sort()).toEqual(r.json.runs.map((x) => x.snapshot_id).sort());
    expect(await count(`SELECT count(*)::int AS n FROM serving.car_sobreposicoes`)).toBeGreaterThan(0);
    first = r.json;
  }, 60_000);

  test('night 2, identical: every source downloaded again, nothing published; each run says unchanged', async () => {
    const hitsBefore = agencies.hits.length;
    const snapshots = await count(`SELECT count(*)::int AS n FROM etl.snapshots`);
    const outbox = await count(`SELECT count(*)::int AS n FROM events.outbox`);
    const pages = sicarWfs.hits.length;
    const dav = [dnit.requests.length, receita.requests.length];
    const r = await night();
    expect(r.code, r.err).toBe(0);
    expect(r.json.runs.map(where)).toEqual(ORDER);
    for (const run of r.json.runs) {
      const before = first.runs.find((x) => where(x) === where(run))!;
      expect({ run: where(run), status: run.status, snapshot: run.snapshot_id, message: run.message }).toEqual({ run: where(run), status: 'unchanged', snapshot: before.snapshot_id, message: expect.any(String) });
    }
    expect(r.json.summary.by_status).toEqual({ unchanged: ORDER.length });
    const asked = new Set(agencies.hits.slice(hitsBefore));
    for (const p of [...Object.keys(files), '/api/3/action/package_show', '/api/v1/localidades/municipios']) expect(asked, p).toContain(p);
    expect(sicarWfs.hits.length).toBeGreaterThan(pages);
    expect([dnit.requests.length, receita.requests.length].map((n, i) => n > dav[i])).toEqual([true, true]);
    expect(await count(`SELECT count(*)::int AS n FROM etl.snapshots`)).toBe(snapshots);
    expect(await count(`SELECT count(*)::int AS n FROM events.outbox`)).toBe(outbox);
  }, 60_000);

  test('night 3: FUNAI 503, INCRA an HTML page, ICMBio and SICAR MT silent: those fail with their codes, the others run, exit 1, last good snapshots served', async () => {
    agencies.trouble.set('/geoserver/Funai/ows', '503');
    agencies.trouble.set('/csv_shp/zip/Áreas de Quilombolas.zip', 'html');
    agencies.trouble.set('/icmbio/pt-br/assuntos/dados_geoespaciais/embargos_icmbio.zip', 'hang');
    sicarTrouble.set('sicar:sicar_imoveis_mt', { kind: 'hang' });
    try {
      const r = await night();
      expect(r.code).toBe(1);
      expect(r.json.runs.map(where)).toEqual(ORDER);
      const byName = Object.fromEntries(r.json.runs.map((x) => [where(x), x]));
      expect(byName['funai-tis'].error).toEqual({ code: 'download_failed', message: expect.stringContaining('503') });
      expect(byName['incra-quilombos'].error).toEqual({ code: 'html_instead_of_archive', message: expect.any(String) });
      expect(byName['icmbio-embargos'].error).toEqual({ code: 'download_failed', message: expect.stringContaining('stalled: no data for 1500 ms') });
      expect(byName['sicar MT'].status).toBe('failed');
      expect(byName['sicar MT'].error?.code).toMatch(/^(download_failed|wfs_\w+)$/);
      expect(r.json.summary.failed).toEqual(['funai-tis', 'incra-quilombos', 'icmbio-embargos', 'sicar MT']);
      for (const run of r.json.runs.filter((x) => !r.json.summary.failed.includes(where(x)))) expect(run.status).toBe('unchanged');
      for (const name of r.json.summary.failed) {
        const [dataset, uf] = name.split(' ');
        const good = first.runs.find((x) => where(x) === name)!.snapshot_id;
        const cur = await db.pool.query(`SELECT snapshot_id::int FROM etl.current WHERE dataset = $1 AND scope = $2`, [dataset, uf ?? '']);
        expect(cur.rows).toEqual([{ snapshot_id: good }]);
      }
      expect(await count(`SELECT count(*)::int AS n FROM serving.funai_tis`)).toBeGreaterThan(0);
    } finally {
      agencies.trouble.clear();
      sicarTrouble.clear();
    }
  }, 90_000);
});

test("agro schedule plans the official night's runs: the same runs (dependencies first), each on the configured source", async () => {
  const cfg = loadConfig(childEnv());
  const name = (r: { pipeline: string; uf?: string }) => `${r.pipeline}${r.uf ? ' ' + r.uf : ''}`;
  const official = officialRuns(cfg).plan;
  const schedule = defaultSchedule(PIPELINES.map((p) => p.name));
  const scheduled = planBatch(schedule.jobs, (p) => !!PIPELINES.find((x) => x.name === p)?.scopedByUf, cfg.sicarUfs);
  expect(scheduled.map(name).sort()).toEqual(official.map(name).sort());
  // Each run after those it depends on, as in the night.
  const at = (p: string) => scheduled.findIndex((r) => r.pipeline === p);
  for (const r of scheduled) for (const d of DEPENDS_ON[r.pipeline] ?? []) expect(at(d), `${r.pipeline} after ${d}`).toBeLessThan(at(r.pipeline));
  // A scheduled run carries no source of its own: runPipeline takes the configured one, which the night planned.
  for (const r of scheduled) expect(r.source).toBeUndefined();
  for (const r of official) if (r.pipeline !== 'sicar') expect(r.source).toBe(cfg.sources[r.pipeline]);
  // The real command counts the same runs.
  const check = spawnSync(process.execPath, [AGRO, 'schedule', '--check', '--json'], { env: childEnv(), encoding: 'utf8' });
  expect(check.status, check.stderr).toBe(0);
  expect(JSON.parse(check.stdout).jobs.reduce((a: number, j: { runs: number }) => a + j.runs, 0)).toBe(official.length);
}, 30_000);
