// Benchmark: the HTTP API against the database's own rate on the very SQL each route runs,
// same concurrency, one run.
//
//   node bin/run-ts.mjs bench/api.ts [--db <kept bench_overlaps db>] [--properties 200000]
//        [--concurrency 16] [--duration 15] [--keep] [--log-level info] [--only all|car|socio]
//   node bin/run-ts.mjs bench/api.ts --only socio [--db <db with a published receita-cnpj month>] [--cnpj-size 1000000]
//
// 1. Data: bench/overlaps.ts --only ours --keep builds a database with 200,000 properties in
//    two state snapshots (the count of bench/sicar-load) and its national layers (indigenous
//    lands up to 50,000 vertices, conservation units with huge overlapping APAs, quilombola
//    areas, embargoes), with the overlaps computed. Its catalogue rows are inserted directly,
//    so here the layer tables are given the full template shape and the current.* views are
//    repointed as a publish does; the IBGE municipality fixture is loaded through the
//    pipeline (the enrichment needs a municipality layer). --db reuses a prepared database.
// 2. The API runs as `agro serve` in a child process (its own pool of --concurrency
//    connections, statement timeout, request log to a file); autocannon drives it from here.
// 3. pgbench runs, right after, the statements the route runs as one script per transaction
//    (the API key is checked once and cached by the server, so its lookup is not per request),
//    -M prepared (the API names its hot statements: prepared once per connection), same concurrency and
//    duration; per-transaction logs give p50/p99. Inputs come from a sample table through a
//    scalar subquery (a primary-key read), both sides drawing from the same samples.
//    The socio routes (GET /v1/socio/cnpj/{cnpj}, GET /v1/socio/search, and the search with a
//    typo) run when the database has a published receita-cnpj month; `--only socio` without
//    --db builds one with `bench/cnpj-load.ts --only agro --keep-db --sizes <--cnpj-size>`
//    (1,000,000 establishments and companies by default): CNPJs sampled from it, search terms
//    = the first two words of sampled legal names, lower-cased without accents (the typo
//    route drops their last letter).
// 4. Prints req/s and p50/p99 per side and the API/DB rate ratio; writes bench/out/api-<date>.json.
// Targets: lookups ≥ 0.6 of the DB's rate; by-geometry p99 < 50 ms at concurrency 16.
// Exits non-zero on errors only; a missed target is reported, not failed.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { findPipeline } from '../pipelines/registry.ts';
import { createKey } from '../src/platform/keys.ts';
import { BY_GEOMETRY_SQL, CAR_CURRENT_SQL } from '../src/api/car/sql.ts';
import { ENRICH_SQL } from '../src/api/enriquecimento/sql.ts';
import { SOCIO_SQL } from '../src/api/socio/sql.ts';
import { GEOMETRY_CHECK_SQL } from '../src/api/geometry.ts';
import { loadConfig } from '../src/config.ts';
import { migrate } from '../src/db/migrate.ts';
import { createPool, ident } from '../src/db/pool.ts';
import { refreshCurrentView } from '../src/etl/publish.ts';
import { runPipeline } from '../src/etl/run.ts';
import { createLogger } from '../src/log.ts';
import { BENCH_DATA_DIR, ROOT_DIR, benchServerUrl, dropDatabase, log, machineInfo, parseFlags, prng, table, withDatabase, writeResult } from './lib.ts';

const flags = parseFlags(process.argv.slice(2), { db: '', properties: 200_000, concurrency: 16, duration: 15, keep: false, 'log-level': 'info', samples: 1000, only: 'all', 'cnpj-size': 1_000_000 });
const withCar = flags.only !== 'socio';
const TARGET_LOOKUP_RATIO = 0.6;
const TARGET_GEOMETRY_P99_MS = 50;
const QUERY_HA = 5_000;

// ---------------------------------------------------------------------------------
// Data

/** Runs bench/overlaps.ts --only ours --keep and returns the database it kept. */
function buildOverlapsDatabase(): string {
  log(`building the data with bench/overlaps.ts --only ours --keep --properties ${flags.properties} (minutes)`);
  const r = spawnSync(process.execPath, [path.join(ROOT_DIR, 'bin', 'run-ts.mjs'), 'bench/overlaps.ts', '--only', 'ours', '--keep', '--properties', String(flags.properties)], {
    cwd: ROOT_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`bench/overlaps.ts failed: ${(r.stderr || r.stdout).slice(-2000)}`);
  const m = /database (bench_overlaps_\w+)/.exec(r.stderr + r.stdout);
  if (!m) throw new Error('could not find the kept database name in bench/overlaps.ts output');
  return m[1];
}

/** Runs bench/cnpj-load.ts --only agro --keep-db (a generated Receita month loaded by the pipeline) and returns the database it kept. */
function buildCnpjDatabase(): string {
  log(`building a ${flags['cnpj-size']}-establishment Receita month with bench/cnpj-load.ts --only agro --keep-db (minutes)`);
  const r = spawnSync(process.execPath, [path.join(ROOT_DIR, 'bin', 'run-ts.mjs'), 'bench/cnpj-load.ts', '--only', 'agro', '--keep-db', '--sizes', String(flags['cnpj-size'])], {
    cwd: ROOT_DIR, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`bench/cnpj-load.ts failed: ${(r.stderr || r.stdout).slice(-2000)}`);
  const m = /kept database (bench_cnpj_ours_\w+)/.exec(r.stderr + r.stdout);
  if (!m) throw new Error('could not find the kept database name in bench/cnpj-load.ts output');
  return m[1];
}

/** Extra values for NOT NULL template columns the bench layers lack. */
const FILL: Record<string, Record<string, string>> = {
  ibama_embargos: { id_tad: 'numero_tad', cancelado: 'false', desembargado: 'false', geom_origem: `CASE WHEN GeometryType(geom) LIKE '%POINT' THEN 'ponto' ELSE 'poligono' END` },
};

/** Gives bench/overlaps' layer tables the template shape and repoints current.* as a publish does. */
async function publishBenchTables(pool: pg.Pool): Promise<void> {
  const cur = (await pool.query(`SELECT c.dataset, c.scope, c.snapshot_id FROM etl.current c`)).rows as { dataset: string; scope: string; snapshot_id: number }[];
  const relationOf: Record<string, string> = { 'funai-tis': 'funai_tis', 'cnuc-ucs': 'cnuc_ucs', 'incra-quilombos': 'incra_quilombos', 'ibama-embargos': 'ibama_embargos' };
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const c of cur.filter((x) => relationOf[x.dataset])) {
      const rel = relationOf[c.dataset];
      const name = `${rel}__s${c.snapshot_id}`;
      const cols = (await client.query(
        `SELECT a.column_name FROM information_schema.columns a JOIN information_schema.columns t
           ON t.table_schema = 'snap' AND t.table_name = $2 AND t.column_name = a.column_name
          WHERE a.table_schema = 'snap' AND a.table_name = $1 ORDER BY a.ordinal_position`, [name, `${rel}__template`])).rows.map((x) => x.column_name as string);
      const fill = Object.entries(FILL[rel] ?? {}).filter(([k]) => !cols.includes(k));
      const full = `${name}_full`;
      await client.query(`CREATE TABLE snap.${ident(full)} (LIKE snap.${ident(rel + '__template')})`);
      await client.query(
        `INSERT INTO snap.${ident(full)} (${[...cols, ...fill.map(([k]) => k)].map(ident).join(', ')})
         SELECT ${[...cols.map(ident), ...fill.map(([, v]) => v)].join(', ')} FROM snap.${ident(name)}`,
      );
      await client.query(`DROP TABLE snap.${ident(name)}`);
      await client.query(`ALTER TABLE snap.${ident(full)} RENAME TO ${ident(name)}`);
      await client.query(`CREATE INDEX ON snap.${ident(name)} USING gist (geom)`);
      await client.query(`CREATE INDEX ON snap.${ident(name)} (${rel === 'ibama_embargos' ? 'numero_tad' : 'codigo'})`);
      await refreshCurrentView(client, rel, [c.snapshot_id]);
    }
    await refreshCurrentView(client, 'car_imovel', cur.filter((x) => x.dataset === 'sicar').map((x) => x.snapshot_id));
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK');
    throw e;
  } finally {
    client.release();
  }
  await pool.query('ANALYZE');
}

async function prepare(url: string): Promise<void> {
  const pool = createPool(url, 4);
  try {
    await migrate(pool);
    // Ready once the CAR view shows the bench's properties (bench/overlaps now registers its own
    // municipality mesh as current, so a current ibge-municipios no longer says it was done).
    const ready = (await pool.query(`SELECT EXISTS (SELECT 1 FROM "current".car_imovel) AS ok`)).rows[0].ok;
    if (ready || !withCar) return;
    log('publishing the bench layers (template shape, current views)');
    await publishBenchTables(pool);
    log('loading the IBGE municipality fixture through the pipeline');
    const cfg = loadConfig({ ...process.env, DATABASE_URL: url, AGRO_DATA_DIR: path.join(BENCH_DATA_DIR, 'api') });
    // --force: it replaces bench/overlaps' generated mesh (5,570 rows), a drop the gate would refuse.
    const o = await runPipeline({ cfg, pool, log: createLogger('warn') }, findPipeline('ibge-municipios')!, { source: path.join(ROOT_DIR, 'fixtures', 'ibge-municipios'), force: true });
    if (o.status !== 'published' && o.status !== 'unchanged') throw new Error(`ibge-municipios: ${o.status}`);
  } finally {
    await pool.end();
  }
}

/** A square of QUERY_HA hectares centred at (lon, lat). */
function square(lon: number, lat: number) {
  const side = Math.sqrt(QUERY_HA * 10_000);
  const dy = side / 2 / 110_574;
  const dx = side / 2 / (111_320 * Math.cos((lat * Math.PI) / 180));
  return { type: 'Polygon', coordinates: [[[lon - dx, lat - dy], [lon + dx, lat - dy], [lon + dx, lat + dy], [lon - dx, lat + dy], [lon - dx, lat - dy]]] };
}

interface Samples {
  cars: string[];
  polygons: string[];
  /** The published receita-cnpj month, its sampled CNPJs and search terms (empty without a month). */
  cnpjSnapshot: number | null;
  cnpjs: string[];
  terms: string[];
}

/**
 * The socio samples (bench.api_cnpjs, bench.api_terms) from the published receita-cnpj month:
 * CNPJs, and search terms = the first two words of legal names, lower-cased without accents.
 */
async function socioSamples(pool: pg.Pool): Promise<Pick<Samples, 'cnpjSnapshot' | 'cnpjs' | 'terms'>> {
  const cnpjSnapshot: number | null = (await pool.query(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'receita-cnpj'`)).rows[0]?.id ?? null;
  await pool.query(`CREATE TABLE bench.api_cnpjs (i int PRIMARY KEY, cnpj text NOT NULL)`);
  await pool.query(`CREATE TABLE bench.api_terms (i int PRIMARY KEY, q text NOT NULL)`);
  if (cnpjSnapshot !== null) {
    await pool.query(`INSERT INTO bench.api_cnpjs SELECT row_number() OVER (ORDER BY md5(cnpj)), cnpj FROM (SELECT cnpj FROM serving.cnpj_estabelecimentos ORDER BY md5(cnpj) LIMIT $1) x`, [flags.samples]);
    await pool.query(
      `INSERT INTO bench.api_terms SELECT row_number() OVER (ORDER BY md5(cnpj_basico)), q FROM (
         SELECT cnpj_basico, trim(split_part(etl.cnpj_busca(razao_social), ' ', 1) || ' ' || split_part(etl.cnpj_busca(razao_social), ' ', 2)) AS q
           FROM serving.cnpj_empresas ORDER BY md5(cnpj_basico) LIMIT $1) x WHERE length(q) >= 3`, [flags.samples]);
  }
  const cnpjs = (await pool.query(`SELECT cnpj FROM bench.api_cnpjs ORDER BY i`)).rows.map((r) => r.cnpj as string);
  const terms = (await pool.query(`SELECT q FROM bench.api_terms ORDER BY i`)).rows.map((r) => r.q as string);
  return { cnpjSnapshot, cnpjs, terms };
}

/** The same inputs for both sides: sample tables the pgbench scripts read by key. */
async function samples(url: string): Promise<Samples> {
  const pool = createPool(url, 2);
  try {
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query('DROP TABLE IF EXISTS bench.api_cars, bench.api_polygons, bench.api_cnpjs, bench.api_terms');
    await pool.query(`CREATE TABLE bench.api_cars (i int PRIMARY KEY, car text NOT NULL)`);
    if (withCar) await pool.query(`INSERT INTO bench.api_cars SELECT row_number() OVER (ORDER BY md5(car)), car FROM (SELECT car FROM "current".car_imovel ORDER BY md5(car) LIMIT $1) x`, [flags.samples]);
    const cars = (await pool.query(`SELECT car FROM bench.api_cars ORDER BY i`)).rows.map((r) => r.car as string);
    const rnd = prng(7);
    const polygons = Array.from({ length: flags.samples }, () => JSON.stringify(square(-59.5 + 9 * rnd(), -14.5 + 9 * rnd())));
    await pool.query(`CREATE TABLE bench.api_polygons (i int PRIMARY KEY, geojson text NOT NULL)`);
    await pool.query(`INSERT INTO bench.api_polygons SELECT i, g FROM unnest($1::text[]) WITH ORDINALITY AS t(g, i)`, [polygons]);
    const { cnpjSnapshot, cnpjs, terms } = await socioSamples(pool);
    await pool.query('ANALYZE bench.api_cars, bench.api_polygons, bench.api_cnpjs, bench.api_terms');
    return { cars, polygons, cnpjSnapshot, cnpjs, terms };
  } finally {
    await pool.end();
  }
}

/** The socio routes and their pgbench scripts (the statements each route runs, in order). */
function socioRoutes(s: Samples, pick: <T>(xs: T[]) => T) {
  if (s.cnpjSnapshot === null) return [];
  const sid = String(s.cnpjSnapshot);
  const cnpjOf = 'SELECT cnpj FROM bench.api_cnpjs WHERE i = :i';
  const search = (name: string, term: (q: string) => string, termSql: string) => ({
    name, method: 'GET' as const,
    next: () => ({ path: `/v1/socio/search?q=${encodeURIComponent(term(pick(s.terms)))}` }),
    script: [
      `\\set i random(1, ${s.terms.length})`,
      `${bind(SOCIO_SQL.snapshots, ["'receita-cnpj'"])};`,
      `${bind(SOCIO_SQL.busca, [sid, termSql, 'NULL::text', 'NULL::text', 'NULL::text', '20'])};`,
    ].join('\n') + '\n',
  });
  return [
    {
      name: 'GET /v1/socio/cnpj/{cnpj}', method: 'GET' as const,
      next: () => ({ path: `/v1/socio/cnpj/${pick(s.cnpjs)}` }),
      script: `\\set i random(1, ${s.cnpjs.length})\n${bind(SOCIO_SQL.cnpj, ['NULL::date', cnpjOf])};\n`,
    },
    search('GET /v1/socio/search (limit 20)', (q) => q, 'SELECT q FROM bench.api_terms WHERE i = :i'),
    // A typo: the last letter of the term dropped (no name scores 1: the walk and the raised threshold).
    search('GET /v1/socio/search (typo, limit 20)', (q) => (q.length > 4 ? q.slice(0, -1) : q), 'SELECT CASE WHEN length(q) > 4 THEN left(q, -1) ELSE q END FROM bench.api_terms WHERE i = :i'),
  ];
}

// ---------------------------------------------------------------------------------
// The two sides

interface Side {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
}

async function startServer(url: string, logFile: string): Promise<{ base: string; stop: () => void }> {
  // `agro serve`'s server with the platform's metering (rate limit, quota, history) bypassed:
  // this benchmark measures the query layer; bench/platform.ts measures the metering's cost.
  const child = spawn(process.execPath, [path.join(ROOT_DIR, 'bin', 'run-ts.mjs'), 'bench/platform-server.ts', '--bypass'], {
    cwd: ROOT_DIR,
    env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: flags['log-level'], AGRO_API_POOL: String(flags.concurrency) },
    stdio: ['ignore', 'pipe', fs.openSync(logFile, 'w')],
  });
  const base = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d) => {
      buf += d;
      const line = buf.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line).url);
    });
    child.on('exit', (code) => reject(new Error(`agro serve exited ${code}; see ${logFile}`)));
  });
  return { base, stop: () => child.kill('SIGTERM') };
}

async function api(base: string, key: string, route: { method: 'GET' | 'POST'; next: () => { path: string; body?: string } }): Promise<Side> {
  const r = await autocannon({
    url: base,
    connections: flags.concurrency,
    duration: flags.duration,
    requests: [{
      method: route.method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      setupRequest: (req: Record<string, unknown>) => ({ ...req, ...route.next() }),
    }],
  });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx, requests: r.requests.total };
}

/** pgbench over a script; p50/p99 from the per-transaction log. */
function pgbench(url: string, name: string, script: string, dir: string): Side {
  const file = path.join(dir, `${name}.sql`);
  fs.writeFileSync(file, script);
  const prefix = path.join(dir, `${name}-log`);
  const r = spawnSync('pgbench', ['-n', '-M', 'prepared', '-c', String(flags.concurrency), '-j', String(Math.min(flags.concurrency, os.cpus().length)),
    '-T', String(flags.duration), '-f', file, '-l', `--log-prefix=${prefix}`, url], { // libpq takes the URI as the dbname argument
    cwd: dir, encoding: 'utf8', env: { ...process.env, PGOPTIONS: '-c jit=off' },
  });
  if (r.status !== 0) throw new Error(`pgbench ${name} failed: ${r.stderr.slice(-2000)}`);
  const tps = Number(/tps = ([\d.]+)/.exec(r.stdout)?.[1] ?? NaN);
  const failed = Number(/number of failed transactions: (\d+)/.exec(r.stdout)?.[1] ?? 0);
  const lat: number[] = [];
  for (const f of fs.readdirSync(dir).filter((x) => x.startsWith(path.basename(prefix)))) {
    for (const line of fs.readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      const parts = line.split(' ');
      if (parts.length >= 3) lat.push(Number(parts[2]) / 1000);
    }
    fs.rmSync(path.join(dir, f));
  }
  lat.sort((a, b) => a - b);
  const pct = (p: number) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : NaN);
  return { rps: tps, p50: pct(0.5), p99: pct(0.99), errors: failed, requests: lat.length };
}

/** Replaces $n with pgbench-side expressions (a literal or a subquery on the sample tables). */
const bind = (sql: string, args: string[]) =>
  sql.replace(/--[^\n]*/g, '').replace(/\$(\d+)/g, (_m, n) => `(${args[Number(n) - 1]})`).replace(/\s+/g, ' ').trim();

async function main(): Promise<void> {
  const serverUrl = benchServerUrl();
  const db = flags.db || (withCar ? buildOverlapsDatabase() : buildCnpjDatabase());
  const url = withDatabase(serverUrl, db);
  log(`database ${db}`);
  await prepare(url);
  const s = await samples(url);
  const keyPool = createPool(url, 1);
  const key = await createKey(keyPool, { env: 'live', plan: 'enterprise', name: 'bench' });
  await keyPool.end();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-api-'));
  const server = await startServer(url, path.join(dir, 'serve.log'));
  log(`API at ${server.base}; concurrency ${flags.concurrency}, ${flags.duration} s per side`);

  let i = 0;
  const pick = <T>(xs: T[]) => xs[i++ % xs.length];
  const polygon = `SELECT geojson FROM bench.api_polygons WHERE i = :i`;
  const areaOf = `SELECT serving.area_ha(ST_SetSRID(ST_GeomFromGeoJSON(geojson), 4326)) FROM bench.api_polygons WHERE i = :i`;
  const carRoutes = [
    {
      name: 'GET /v1/car/{numero}', method: 'GET' as const,
      next: () => ({ path: `/v1/car/${pick(s.cars)}` }),
      script: `\\set i random(1, ${s.cars.length})\n${bind(CAR_CURRENT_SQL, ['SELECT car FROM bench.api_cars WHERE i = :i', 'false'])};\n`,
    },
    {
      name: 'POST /v1/car/by-geometry (5,000 ha)', method: 'POST' as const,
      next: () => ({ path: '/v1/car/by-geometry', body: `{"geometry":${pick(s.polygons)},"limit":100}` }),
      script: `\\set i random(1, ${s.polygons.length})\n${bind(GEOMETRY_CHECK_SQL, [polygon])};\n${bind(BY_GEOMETRY_SQL, [polygon, '0', '100'])};\n`,
    },
    {
      name: 'POST /v1/enriquecimento/territorial', method: 'POST' as const,
      next: () => ({ path: '/v1/enriquecimento/territorial', body: `{"geometry":${pick(s.polygons)},"layers":["ti","uc","quilombo"]}` }),
      script: [
        `\\set i random(1, ${s.polygons.length})`,
        `${bind(GEOMETRY_CHECK_SQL, [polygon])};`,
        ...(['municipios', 'ti', 'uc', 'quilombo'] as const).map((l) => `${bind(ENRICH_SQL[l], [polygon, areaOf])};`),
      ].join('\n') + '\n',
    },
  ];
  if (s.cnpjSnapshot === null) log('no published receita-cnpj month: the socio routes are skipped');
  const routes = [...(withCar ? carRoutes : []), ...(flags.only === 'car' ? [] : socioRoutes(s, pick))];

  const results: { route: string; api: Side; db: Side }[] = [];
  try {
    for (const r of routes) {
      log(`${r.name}: warm-up, API, pgbench`);
      await api(server.base, key.key, { method: r.method, next: r.next }).catch(() => null); // warm-up (plans, caches) — discarded
      const a = await api(server.base, key.key, { method: r.method, next: r.next });
      const d = pgbench(url, r.name.replace(/\W+/g, '_'), r.script, dir);
      results.push({ route: r.name, api: a, db: d });
      // An answer that is not 2xx (a 429, a 503) is not a measurement of the route: fail loudly.
      if (a.errors > 0) throw new Error(`${r.name}: ${a.errors} of ${a.requests} API answers were errors or not 2xx; see ${path.join(dir, 'serve.log')}`);
      log(`  API ${a.rps.toFixed(0)} req/s p50 ${a.p50} ms p99 ${a.p99} ms (${a.errors} errors); DB ${d.rps.toFixed(0)} tx/s p50 ${d.p50.toFixed(1)} ms p99 ${d.p99.toFixed(1)} ms`);
    }
  } finally {
    server.stop();
  }

  const fmt = (x: number, dp = 1) => (Number.isFinite(x) ? x.toFixed(dp) : 'n/a');
  const rows = [['route', 'API req/s', 'API p50 ms', 'API p99 ms', 'DB tx/s', 'DB p50 ms', 'DB p99 ms', 'API/DB', 'errors']];
  for (const r of results) rows.push([r.route, fmt(r.api.rps, 0), fmt(r.api.p50), fmt(r.api.p99), fmt(r.db.rps, 0), fmt(r.db.p50), fmt(r.db.p99), fmt(r.api.rps / r.db.rps, 2), String(r.api.errors + r.db.errors)]);
  const verdicts: string[] = [];
  for (const lookup of results.filter((r) => r.route === 'GET /v1/car/{numero}' || r.route === 'GET /v1/socio/cnpj/{cnpj}')) {
    verdicts.push(`${lookup.route} API/DB ${fmt(lookup.api.rps / lookup.db.rps, 2)} (target ≥ ${TARGET_LOOKUP_RATIO}): ${lookup.api.rps / lookup.db.rps >= TARGET_LOOKUP_RATIO ? 'met' : 'MISSED'}`);
  }
  const geometry = results.find((r) => r.route.startsWith('POST /v1/car/by-geometry'));
  if (geometry) verdicts.push(`by-geometry API p99 ${fmt(geometry.api.p99)} ms at concurrency ${flags.concurrency} (target < ${TARGET_GEOMETRY_P99_MS} ms): ${geometry.api.p99 < TARGET_GEOMETRY_P99_MS ? 'met' : 'MISSED'}`);
  const machine = machineInfo();
  process.stdout.write(`\n${table(rows)}\n\n${verdicts.join('\n')}\nmachine: ${machine.cpus} cpus, load average ${machine.loadavg.join(' ')}\n`);
  const file = writeResult('api', { benchmark: 'api', date: new Date().toISOString(), flags, database: db, machine, results, verdicts });
  log(`wrote ${file}`);
  fs.rmSync(dir, { recursive: true, force: true });
  if (flags.keep || flags.db) log(`database ${db} kept (rerun with --db ${db})`);
  else await dropDatabase(serverUrl, db);
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? e}\n`);
  process.exit(1);
});
