// Benchmark: the read stage of a SICAR load (zip → staged rows in PostgreSQL), every
// candidate reader side by side on the same input, in one run, each in its own child
// process (wall clock, client CPU, peak RSS), then checked against today's reader.
//
//   node bin/run-ts.mjs bench/read-paths.ts [--sizes 100000,1000000] [--seed 1]
//        [--candidates gdal-text,shp-binary,...] [--theme 0] [--keep-db]
//
// Candidates (see bench/README.md, "read-paths"):
//   gdal-text      today: extract the zip, one gdal-async call per feature, text COPY
//                  (src/etl/stage-vector.ts stageLayers)
//   shp-binary     extract, .shp/.dbf byte streams → WKB + decoded fields → binary COPY
//                  (src/etl/read/shp-stream.ts stageShapefiles)
//   shp-zip        the same reader fed straight from the zip's entries (CRC-checked, nothing extracted)
//   shapefile-pkg  extract, the `shapefile` npm package (GeoJSON per feature) → WKB → binary COPY
//   gdal-translate gdal.vectorTranslateAsync from /vsizip/ → unlogged table (src/etl/read/translate.ts)
//   ogr2ogr        the CLI, same options (the anchor)
// Sizes: the MT_AREA_IMOVEL state of bench/sicar-load.ts; `--theme N` adds a theme-like
// layer (N small polygons, the theme schema) measured the same way.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MultiPolygon, Polygon, Position } from 'geojson';
import pg from 'pg';
import pgCopy from 'pg-copy-streams';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { THEME_FIELDS as THEME_DBF_FIELDS } from '../fixtures/sicar.ts';
import { PROPERTY_FIELDS, THEME_FIELDS } from '../pipelines/sicar/index.ts';
import { extractZip } from '../src/etl/archive.ts';
import { BinaryCopyWriter } from '../src/etl/read/binary-copy.ts';
import { stageShapefiles } from '../src/etl/read/shp-stream.ts';
import { ZipEntries } from '../src/etl/read/zip-source.ts';
import { pgConnInfo, translateArgs, translateLayer } from '../src/etl/read/translate.ts';
import { PRJ_SIRGAS2000, ShapefileWriter, zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { createStagingTable, mapFields, stageLayers, type FieldSpec } from '../src/etl/stage-vector.ts';
import { findShapefiles, openLayer } from '../src/etl/vector-reader.ts';
import {
  BENCH_DATA_DIR, benchServerUrl, createDatabase, dropDatabase, log, machineInfo, mb, parseFlags, prng, secs, table, tail,
  timedRun, writeResult, type TimedRun,
} from './lib.ts';
import { ensureDataset } from './sicar-load.ts';

const CANDIDATES = ['gdal-text', 'shp-binary', 'shp-zip', 'shapefile-pkg', 'gdal-translate', 'ogr2ogr'] as const;
type Candidate = (typeof CANDIDATES)[number];
const BASELINE: Candidate = 'gdal-text';
const ENCODING = 'ISO-8859-1';
const SRID = 4674;
const FLAT_TOLERANCE = 0.1;
const TARGET_RSS_BYTES = 500 * 1024 * 1024;
const SELF = path.resolve(process.argv[1] ?? 'bench/read-paths.ts');

interface Input {
  kind: 'area_imovel' | 'theme';
  features: number;
  zip: string;
  layer: string;
  specs: FieldSpec[];
}

// ---------------------------------------------------------------------------------
// A theme-like layer: many small polygons (APP strips, reserve patches), theme schema.

const THEME_VERSION = 1;

async function ensureTheme(n: number, seed: number): Promise<Input> {
  const layer = 'MT_APPS';
  const dir = path.join(BENCH_DATA_DIR, 'read-paths', `${layer}-n${n}-seed${seed}-v${THEME_VERSION}`);
  const zip = path.join(dir, `${layer}.zip`);
  const input: Input = { kind: 'theme', features: n, zip, layer, specs: THEME_FIELDS };
  if (fs.existsSync(zip)) return input;
  const work = path.join(path.dirname(dir), `.tmp-${process.pid}`);
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  log(`generating a theme layer of ${n} small polygons`);
  const w = await ShapefileWriter.open({
    basePath: path.join(work, layer), shapeType: 'polygon', fields: THEME_DBF_FIELDS, encoding: 'latin1', cpg: null, prj: PRJ_SIRGAS2000,
    lastUpdate: new Date(Date.UTC(2024, 5, 30)),
  });
  const rnd = prng(seed);
  const codes = [['APP_RIO_ATE_10', 'Área de Preservação Permanente de Rios até 10 metros'], ['APP_TOTAL', 'Área de Preservação Permanente'], ['ARL_PROPOSTA', 'Reserva Legal Proposta']];
  for (let i = 0; i < n; i++) {
    const cx = -61 + rnd() * 11, cy = -18 + rnd() * 10, r = 0.0005 + rnd() * 0.003;
    const k = 5 + Math.floor(rnd() * 12);
    const ring: Position[] = [];
    for (let j = 0; j < k; j++) {
      const t = (2 * Math.PI * j) / k;
      ring.push([cx + r * (0.6 + 0.4 * rnd()) * Math.cos(t), cy + r * (0.6 + 0.4 * rnd()) * Math.sin(t)]);
    }
    const hole = rnd() < 0.02;
    const geometry: Polygon = { type: 'Polygon', coordinates: hole ? [ring, ring.map(([x, y]) => [cx + (x - cx) * 0.2, cy + (y - cy) * 0.2])] : [ring] };
    const [code, name] = codes[i % codes.length];
    await w.write(geometry, {
      cod_imovel: `MT-5107925-${(i * 2654435761 >>> 0).toString(16).toUpperCase().padStart(32, '0')}`,
      cod_tema: code, nom_tema: name, num_area: Math.round(rnd() * 1e6) / 1e4, ind_status: 'AT', des_condic: 'Aguardando análise',
    });
  }
  const { files } = await w.close();
  await zipFiles(path.join(work, `${layer}.zip`), files.map((f) => ({ path: f, name: path.basename(f) })), { mtime: new Date(2024, 5, 30) });
  for (const f of files) fs.rmSync(f);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.renameSync(work, dir);
  return input;
}

// ---------------------------------------------------------------------------------
// The candidates, each run in a child process (`--child <name>`)

interface ChildArgs {
  child: string;
  zip: string;
  layer: string;
  url: string;
  table: string;
  work: string;
  theme: boolean;
}

interface ChildReport {
  rows: number;
  phases: Record<string, number>;
}

const msSince = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

async function extract(a: ChildArgs, phases: Record<string, number>): Promise<string[]> {
  const t0 = process.hrtime.bigint();
  const shps = findShapefiles(await extractZip(a.zip, a.work));
  phases.extract_ms = msSince(t0);
  return shps;
}

/** GeoJSON (Multi)Polygon → ISO WKB, little-endian (for the `shapefile` package's features). */
function geojsonWkb(g: Polygon | MultiPolygon): Buffer {
  const polys = g.type === 'Polygon' ? [g.coordinates] : g.coordinates;
  let size = 9;
  for (const p of polys) size += 9 + p.reduce((s, r) => s + 4 + 16 * r.length, 0);
  if (g.type === 'Polygon') size -= 9;
  const b = Buffer.allocUnsafe(size);
  let o = 0;
  const head = (t: number, n: number) => {
    b[o] = 1;
    b.writeUInt32LE(t, o + 1);
    b.writeUInt32LE(n, o + 5);
    o += 9;
  };
  if (g.type === 'MultiPolygon') head(6, polys.length);
  for (const p of polys) {
    head(3, p.length);
    for (const r of p) {
      b.writeUInt32LE(r.length, o);
      o += 4;
      for (const [x, y] of r) {
        b.writeDoubleLE(x, o);
        b.writeDoubleLE(y, o + 8);
        o += 16;
      }
    }
  }
  return b;
}

async function shapefilePackage(client: pg.Client, a: ChildArgs, shp: string, specs: FieldSpec[]): Promise<number> {
  const shapefile = createRequire(import.meta.url)('shapefile') as {
    open(shp: string, dbf: string, o: { encoding: string }): Promise<{ read(): Promise<{ done: boolean; value: { properties: Record<string, unknown>; geometry: Polygon | MultiPolygon | null } }> }>;
  };
  const layer = openLayer(shp, { srid: SRID });
  const { index, unknown } = mapFields(layer, specs);
  await createStagingTable(client, a.table, specs);
  const columns = ['src_seq', 'src_layer', 'src_srid', ...specs.map((s) => s.name), 'extra', 'geom'];
  const canonToSrc = new Map([...index].map(([src, canon]) => [canon, src]));
  const source = await shapefile.open(shp, shp.slice(0, -4) + '.dbf', { encoding: 'iso-8859-1' });
  const w = new BinaryCopyWriter();
  let seq = 0;
  async function* chunks(): AsyncGenerator<Buffer> {
    for (;;) {
      const r = await source.read();
      if (r.done) break;
      const { properties: p, geometry } = r.value;
      w.row(columns.length);
      w.int8(++seq);
      w.text(layer.name);
      w.int4(layer.srid);
      for (const s of specs) {
        const src = canonToSrc.get(s.name);
        const v = src === undefined ? null : p[src];
        w.text(v === null || v === undefined ? null : v instanceof Date ? v.toISOString().slice(0, 10) : String(v));
      }
      let extra: Record<string, unknown> | null = null;
      for (const u of unknown) if (p[u] !== null && p[u] !== undefined && p[u] !== '') (extra ??= {})[u] = p[u];
      w.jsonb(extra ? JSON.stringify(extra) : null);
      if (geometry) {
        const wkb = geojsonWkb(geometry);
        w.field({ size: wkb.length, write: (b, at) => at + wkb.copy(b, at) });
      } else w.nullField();
      if (w.full) yield w.take();
    }
    w.end();
    yield w.take();
  }
  const stream = client.query(pgCopy.from(`COPY ${a.table} (${columns.join(', ')}) FROM STDIN WITH (FORMAT binary)`));
  await pipeline(Readable.from(chunks()), stream);
  return Number(stream.rowCount ?? 0);
}

async function runChild(a: ChildArgs): Promise<ChildReport> {
  const phases: Record<string, number> = {};
  const specs = a.theme ? THEME_FIELDS : PROPERTY_FIELDS;
  const t0 = process.hrtime.bigint();
  if (a.child === 'gdal-translate') {
    const rows = await translateLayer(`/vsizip/${a.zip}/${a.layer}.shp`, a.url, { table: a.table, encoding: ENCODING, srid: SRID });
    phases.translate_ms = msSince(t0);
    return { rows, phases };
  }
  const client = new pg.Client({ connectionString: a.url, application_name: 'agro-bench' });
  await client.connect();
  if (a.child === 'shp-zip') {
    const zip = await ZipEntries.open(a.zip);
    try {
      const shps = zip.names().filter((n) => n.toLowerCase().endsWith('.shp'));
      const layers = shps.map((s) => openLayer(`/vsizip/${a.zip}/${s}`, { srid: SRID }));
      const rows = (await stageShapefiles(client, a.table, layers, specs, (l) => zip.layerSources(shps[layers.indexOf(l)]))).rows;
      phases.read_copy_ms = msSince(t0);
      return { rows, phases };
    } finally {
      zip.close();
      await client.end();
    }
  }
  try {
    const shps = await extract(a, phases);
    const t1 = process.hrtime.bigint();
    let rows: number;
    if (a.child === 'gdal-text') {
      const layers = shps.map((s) => openLayer(s, { srid: SRID }));
      rows = (await stageLayers(client, a.table, layers, specs)).rows;
    } else if (a.child === 'shp-binary') {
      const layers = shps.map((s) => openLayer(s, { srid: SRID }));
      rows = (await stageShapefiles(client, a.table, layers, specs)).rows;
    } else if (a.child === 'shapefile-pkg') {
      rows = await shapefilePackage(client, a, shps[0], specs);
    } else throw new Error(`unknown candidate ${a.child}`);
    phases.read_copy_ms = msSince(t1);
    return { rows, phases };
  } finally {
    await client.end();
    fs.rmSync(a.work, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------
// The parent: runs the candidates and compares their tables

interface Measured {
  candidate: Candidate;
  wall_ms: number;
  cpu_s: number | null;
  /** CPU seconds of the PostgreSQL backend(s) that served the candidate. */
  server_cpu_s: number | null;
  peak_rss_bytes: number | null;
  rows: number;
  phases: Record<string, number>;
  loadavg_before: number[];
  table: string;
  check: Check | null;
}

interface Check {
  rows_equal: boolean;
  joined: number;
  /** Per canonical column: rows whose value differs from the baseline's. */
  attribute_mismatches: Record<string, number>;
  extra_mismatches: number | null;
  geometry_hash_mismatches: number;
  geometry_not_equal: number;
  accented_sample: { baseline: string | null; candidate: string | null }[];
  ok: boolean;
}

async function q<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url, application_name: 'agro-bench' });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** utime + stime of a process in seconds, or null when it is gone / not readable. */
function procCpu(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/**
 * CPU seconds of the PostgreSQL backends serving `db` while a candidate runs (the
 * server's side of the COPY): pg_stat_activity polled for the database's backends,
 * /proc/<pid>/stat sampled every 100 ms, the last sample per backend summed. Needs the
 * server on this machine (null otherwise, e.g. a remote DATABASE_URL).
 */
async function serverCpuSampler(url: string, db: string): Promise<{ stop(): Promise<number | null> }> {
  const c = new pg.Client({ connectionString: url.replace(/\/[^/]*$/, '/postgres'), application_name: 'agro-bench' });
  await c.connect();
  const last = new Map<number, number>();
  let readable = true, stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const r = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = $2', [db, 'client backend']).catch(() => ({ rows: [] as { pid: number }[] }));
      for (const { pid } of r.rows) {
        const cpu = procCpu(pid);
        if (cpu === null) readable = last.size > 0 || readable;
        else last.set(pid, cpu);
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await c.end();
      return readable && last.size ? [...last.values()].reduce((a, b) => a + b, 0) : null;
    },
  };
}

const cpuOf = (r: TimedRun): number | null => (r.cpuUserS === null ? null : r.cpuUserS + (r.cpuSysS ?? 0));

async function runCandidate(cand: Candidate, input: Input, url: string, tbl: string, logDir: string): Promise<Measured> {
  await q(url, 'CHECKPOINT');
  const loadavg = machineInfo().loadavg;
  const stderrFile = path.join(logDir, `${input.kind}-${input.features}-${cand}.stderr.log`);
  let r: TimedRun;
  let report: ChildReport = { rows: 0, phases: {} };
  const server = await serverCpuSampler(url, new URL(url).pathname.slice(1));
  log(`${cand} on ${input.kind} ${input.features} (load ${loadavg.join(' ')})`);
  if (cand === 'ogr2ogr') {
    const args = translateArgs({ table: tbl, encoding: ENCODING, srid: SRID });
    const cmd = ['ogr2ogr', ...args.slice(0, 2), `PG:${pgConnInfo(url)}`, `/vsizip/${input.zip}/${input.layer}.shp`, ...args.slice(2),
      '--config', 'PG_USE_COPY', 'YES', '--config', 'SHAPE_ENCODING', ENCODING];
    r = await timedRun(cmd, { stderrFile });
  } else {
    const work = path.join(logDir, `work-${cand}`);
    r = await timedRun(
      [process.execPath, path.join(path.dirname(SELF), '..', 'bin', 'run-ts.mjs'), SELF, '--child', cand, '--zip', input.zip, '--layer', input.layer,
        '--url', url, '--table', tbl, '--work', work, ...(input.kind === 'theme' ? ['--child-theme'] : [])],
      { stderrFile },
    );
    if (r.exitCode === 0) report = JSON.parse(r.stdout.trim().split('\n').pop()!) as ChildReport;
  }
  const serverCpu = await server.stop();
  if (r.exitCode !== 0 || r.signal) throw new Error(`${cand} failed (exit ${r.exitCode}); ${stderrFile}:\n${tail(stderrFile)}`);
  const [{ n }] = await q<{ n: number }>(url, `SELECT count(*)::int AS n FROM ${tbl}`);
  return { candidate: cand, wall_ms: r.wallMs, cpu_s: cpuOf(r), server_cpu_s: serverCpu, peak_rss_bytes: r.peakRssBytes, rows: n, phases: report.phases, loadavg_before: loadavg, table: tbl, check: null };
}

/**
 * Compares a candidate's table with the baseline's, row by row (joined on the feature
 * number): every canonical attribute, `extra`, and the geometry (EWKB of ST_Multi with
 * the layer's SRID, then ST_Equals for the rows whose bytes differ).
 */
async function compare(url: string, input: Input, base: Measured, m: Measured): Promise<Check> {
  const gdalTable = m.candidate === 'gdal-translate' || m.candidate === 'ogr2ogr';
  const cols = await q<{ column_name: string; data_type: string }>(url, `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '${m.table}'`);
  const typeOf = new Map(cols.map((c) => [c.column_name, c.data_type]));
  const exprs: string[] = [];
  const names: string[] = [];
  for (const s of input.specs) {
    let cand: string;
    if (!gdalTable) cand = `c.${s.name}`;
    else {
      const src = s.aliases.find((al) => typeOf.has(al));
      if (!src) continue;
      cand = typeOf.get(src) === 'character varying' || typeOf.get(src) === 'text' ? `c.${src}::text` : `c.${src}`;
    }
    const t = typeOf.get(gdalTable ? s.aliases.find((al) => typeOf.has(al))! : s.name);
    const cmp = t && t !== 'text' && t !== 'character varying'
      ? `b.${s.name}::${t === 'date' ? 'date' : 'numeric'} IS DISTINCT FROM ${cand}::${t === 'date' ? 'date' : 'numeric'}`
      : `b.${s.name} IS DISTINCT FROM ${cand}`;
    exprs.push(`count(*) FILTER (WHERE ${cmp})::int AS "${s.name}"`);
    names.push(s.name);
  }
  const join = gdalTable ? `c.src_fid + 1 = b.src_seq` : `c.src_seq = b.src_seq`;
  const cgeom = gdalTable ? 'c.geom' : 'ST_SetSRID(c.geom, c.src_srid)';
  const [row] = await q<Record<string, number>>(url, `
    SELECT count(*)::int AS joined, ${exprs.join(', ')},
      ${gdalTable ? 'NULL' : 'count(*) FILTER (WHERE b.extra IS DISTINCT FROM c.extra)::int'} AS extra,
      count(*) FILTER (WHERE ST_AsEWKB(ST_Multi(ST_SetSRID(b.geom, b.src_srid))) IS DISTINCT FROM ST_AsEWKB(ST_Multi(${cgeom})))::int AS ghash,
      count(*) FILTER (WHERE ST_AsEWKB(ST_Multi(ST_SetSRID(b.geom, b.src_srid))) IS DISTINCT FROM ST_AsEWKB(ST_Multi(${cgeom}))
                         AND NOT ST_Equals(ST_SetSRID(b.geom, b.src_srid), ${cgeom}))::int AS gneq
    FROM ${base.table} b JOIN ${m.table} c ON ${join}`);
  const accentCol = input.kind === 'theme' ? 'nom_tema' : 'municipio';
  const sample = await q<{ baseline: string | null; candidate: string | null }>(url, `
    SELECT b.${accentCol} AS baseline, c.${accentCol}::text AS candidate FROM ${base.table} b JOIN ${m.table} c ON ${join}
    WHERE b.${accentCol} ~ '[^[:ascii:]]' ORDER BY b.src_seq LIMIT 3`);
  const attribute_mismatches = Object.fromEntries(names.map((n) => [n, row[n]]));
  const check: Check = {
    rows_equal: m.rows === base.rows,
    joined: row.joined,
    attribute_mismatches,
    extra_mismatches: row.extra,
    geometry_hash_mismatches: row.ghash,
    geometry_not_equal: row.gneq,
    accented_sample: sample,
    ok: false,
  };
  check.ok = check.rows_equal && row.joined === base.rows && Object.values(attribute_mismatches).every((v) => v === 0) && !row.extra && row.gneq === 0 && sample.length > 0;
  return check;
}

function stamp(): string {
  return new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

async function main(): Promise<number> {
  const args = parseFlags(process.argv.slice(2), {
    sizes: '100000,1000000', seed: 1, candidates: CANDIDATES.join(','), theme: 0, 'keep-db': false,
    child: '', zip: '', layer: '', url: '', table: '', work: '', 'child-theme': false,
  });
  if (args.child) {
    const report = await runChild({ child: args.child, zip: args.zip, layer: args.layer, url: args.url, table: args.table, work: args.work, theme: args['child-theme'] });
    process.stdout.write(JSON.stringify(report) + '\n');
    return 0;
  }
  const sizes = String(args.sizes).split(',').filter(Boolean).map((s) => Number(s.replace(/_/g, '')));
  const cands = args.candidates.split(',') as Candidate[];
  for (const c of cands) if (!CANDIDATES.includes(c)) throw new Error(`unknown candidate ${c} (known: ${CANDIDATES.join(', ')})`);
  if (!cands.includes(BASELINE)) throw new Error(`${BASELINE} (today's reader) is the baseline of the checks: keep it in --candidates`);
  const machine = machineInfo();
  const inputs: Input[] = [];
  for (const n of sizes) {
    const ds = await ensureDataset(n, args.seed, false);
    inputs.push({ kind: 'area_imovel', features: n, zip: ds.zip, layer: ds.manifest.layer, specs: PROPERTY_FIELDS });
  }
  if (args.theme > 0) inputs.push(await ensureTheme(args.theme, args.seed));

  const serverUrl = benchServerUrl();
  const ts = stamp();
  const logDir = path.join(BENCH_DATA_DIR, 'runs', `read-paths-${ts}`);
  fs.mkdirSync(logDir, { recursive: true });
  const results: { input: Omit<Input, 'specs'>; runs: Measured[] }[] = [];
  for (const input of inputs) {
    const db = `bench_readpaths_${ts}_${input.kind}_${input.features}`;
    const url = await createDatabase(serverUrl, db);
    const runs: Measured[] = [];
    try {
      await q(url, 'CREATE EXTENSION postgis');
      for (const cand of cands) runs.push(await runCandidate(cand, input, url, `stage_${cand.replace(/-/g, '_')}`, logDir));
      const base = runs.find((r) => r.candidate === BASELINE)!;
      for (const m of runs) if (m !== base) m.check = await compare(url, input, base, m);
    } finally {
      if (!args['keep-db']) await dropDatabase(serverUrl, db).catch((e) => log(`could not drop ${db}: ${(e as Error).message}`));
      else log(`kept ${db}`);
    }
    const { specs: _specs, ...rest } = input;
    results.push({ input: rest, runs });
  }

  const out: string[] = [];
  for (const { input, runs } of results) {
    const anchor = runs.find((r) => r.candidate === 'ogr2ogr');
    out.push(`${input.kind} ${input.features} features (${path.basename(input.zip)})`, '');
    const rows = [['candidate', 'wall', 'vs ogr2ogr', 'client CPU', 'server CPU', 'CPU vs ogr2ogr', 'peak RSS', 'rows', 'phases', 'load', 'check']];
    for (const r of runs) {
      rows.push([
        r.candidate, secs(r.wall_ms), anchor ? (r.wall_ms / anchor.wall_ms).toFixed(2) : '-', r.cpu_s == null ? 'n/a' : `${r.cpu_s.toFixed(1)} s`,
        r.server_cpu_s == null ? 'n/a' : `${r.server_cpu_s.toFixed(1)} s`,
        anchor && r.cpu_s != null && r.server_cpu_s != null && anchor.cpu_s != null && anchor.server_cpu_s != null
          ? ((r.cpu_s + r.server_cpu_s) / (anchor.cpu_s + anchor.server_cpu_s)).toFixed(2) : '-',
        mb(r.peak_rss_bytes), String(r.rows), Object.entries(r.phases).map(([k, v]) => `${k.replace(/_ms$/, '')} ${secs(v)}`).join(', '),
        r.loadavg_before[0].toFixed(1),
        r.check ? (r.check.ok ? 'same' : `DIFF ${JSON.stringify({ ...r.check.attribute_mismatches, extra: r.check.extra_mismatches, geom: r.check.geometry_not_equal, rows: r.check.rows_equal })}`) : 'baseline',
      ]);
    }
    out.push(table(rows), '');
    for (const r of runs) {
      if (r.check && r.check.geometry_hash_mismatches) out.push(`  ${r.candidate}: ${r.check.geometry_hash_mismatches} geometries differ in bytes (EWKB of ST_Multi), ${r.check.geometry_not_equal} of them not ST_Equals`);
      if (r.check?.accented_sample[0]) out.push(`  ${r.candidate}: accented sample ${JSON.stringify(r.check.accented_sample[0])}`);
    }
    out.push('');
  }
  // Flatness: peak RSS at the largest AREA_IMOVEL size against the smallest.
  const sized = results.filter((r) => r.input.kind === 'area_imovel');
  const flat: Record<string, { small: number | null; large: number | null; growth: number | null; flat: boolean | null; under_500mb: boolean | null }> = {};
  if (sized.length >= 2) {
    const small = sized[0], large = sized[sized.length - 1];
    const frows = [['candidate', `RSS ${small.input.features}`, `RSS ${large.input.features}`, 'growth', `flat (≤ ${FLAT_TOLERANCE * 100} %)`, '< 500 MB']];
    for (const c of cands) {
      const s = small.runs.find((r) => r.candidate === c)?.peak_rss_bytes ?? null;
      const l = large.runs.find((r) => r.candidate === c)?.peak_rss_bytes ?? null;
      const growth = s && l ? l / s - 1 : null;
      flat[c] = { small: s, large: l, growth, flat: growth === null ? null : growth <= FLAT_TOLERANCE, under_500mb: l === null ? null : l < TARGET_RSS_BYTES };
      frows.push([c, mb(s), mb(l), growth === null ? 'n/a' : `${(growth * 100).toFixed(1)} %`, flat[c].flat ? 'yes' : 'NO', flat[c].under_500mb ? 'yes' : 'NO']);
    }
    out.push('memory flatness', '', table(frows), '');
  }
  const file = writeResult('read-paths', {
    bench: 'read-paths', at: new Date().toISOString(), machine: { ...machine, loadavg_after: machineInfo().loadavg },
    params: { sizes, seed: args.seed, theme: args.theme, candidates: cands, encoding: ENCODING, srid: SRID },
    results, flatness: flat, logs: path.relative(process.cwd(), logDir),
  });
  out.push(`figures: ${path.relative(process.cwd(), file)}   logs: ${path.relative(process.cwd(), logDir)}`);
  process.stdout.write(out.join('\n') + '\n');
  const failed = results.flatMap((r) => r.runs).filter((r) => r.check && !r.check.ok);
  return failed.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`bench/read-paths: ${(e as Error).stack ?? e}\n`);
      process.exitCode = 1;
    },
  );
}
