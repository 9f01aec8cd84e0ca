// cnpj-load: a Receita CNPJ month end to end, ours vs `psql \copy`.
//
//   npm run bench:cnpj-load                                  # sizes 250000 and 1000000
//   node bin/run-ts.mjs bench/cnpj-load.ts --sizes 1000000
//
// Input (generated streamed, cached under .data/bench/cnpj-load/): for N establishments,
// N companies and 0.45·N partners (the national proportions 60 M / 60 M / 27 M), 0.6·N
// Simples rows and the real lookups of fixtures/samples/receita-cnpj/, as headerless
// latin1 `;` CSV in the official layout, then zipped into the 37 zips of a month with the
// official inner names. The month is served by a local WebDAV server on 127.0.0.1
// (fixtures/receita-cnpj-server.ts: PROPFIND + GET with Range).
//
// Timed in one run, for each size:
//   ours    `agro run receita-cnpj --source <WebDAV URL> --json` on a fresh database and data
//           folder: discovery, download, validation (CRC), parse, transform, COPY, indexes,
//           quality, publish. Wall clock and peak RSS of the process.
//   anchor  `psql \copy` of the already-unpacked CSVs into bare text tables without indexes
//           (FORMAT csv, DELIMITER ';', ENCODING 'LATIN1'), one psql per file, sequential.
// Projection: a national month (60 M establishments, 60 M companies, 27 M partners) at the
// measured rows per second of the largest size.
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { spawnSync } from 'node:child_process';
import yazl from 'yazl';
import { cnpjCheckDigits } from '../src/documents.ts';
import { startDavServer } from '../fixtures/receita-cnpj-server.ts';
import { dateCode, SAMPLES_DIR } from '../fixtures/receita-cnpj.ts';
import {
  AGRO_BIN, BENCH_DATA_DIR, benchServerUrl, createDatabase, dropDatabase, log, machineInfo, mb, parseFlags, prng, ROOT_DIR, secs, table, timedRun, withDatabase, writeResult,
} from './lib.ts';

const GENERATOR_VERSION = 1;
const MONTH = '2026-10';
const flags = parseFlags(process.argv.slice(2), { sizes: '250000,1000000', seed: 1, regen: false, 'keep-db': false, only: 'both' });
const sizes = String(flags.sizes).split(',').map((s) => Number(s.replace(/_/g, ''))).filter((n) => n > 0);

const FIRST = ['JOSE', 'MARIA', 'ANTONIO', 'FRANCISCO', 'ANA', 'JOÃO', 'LUCIANA', 'CONCEIÇÃO', 'SEBASTIÃO', 'ANDRÉ', 'PAULO', 'MÁRCIA'];
const LAST = ['SILVA', 'SANTOS', 'OLIVEIRA', 'SOUZA', 'PEREIRA', 'LIMA', 'CARVALHO', 'GONÇALVES', 'ARAÚJO', 'RIBEIRO', 'FERREIRA', 'ALMEIDA'];
const ACT = ['AGROPECUÁRIA', 'COMÉRCIO', 'TRANSPORTES', 'CONSTRUÇÃO', 'SERVIÇOS', 'INDÚSTRIA', 'FAZENDA', 'ALIMENTAÇÃO'];
const UFS: [string, string][] = [['SP', '7107'], ['MT', '9067'], ['GO', '9373'], ['PR', '7535'], ['MG', '4123'], ['BA', '3849'], ['DF', '9701'], ['RS', '8801']];
const CNAES = ['0115600', '0111302', '0151201', '4930202', '4755502', '5611203', '9602501', '4772500', '6209100', '8230001'];

const q = (fields: (string | number)[]) => fields.map((f) => `"${f}"`).join(';') + '\n';
const pad = (n: number, w: number) => String(n).padStart(w, '0');

/** Writes lines from a generator to a latin1 file, honouring back-pressure. */
async function writeLatin1(file: string, rows: Iterable<string>): Promise<void> {
  const out = createWriteStream(file, { highWaterMark: 1 << 20 });
  let buf = '';
  for (const r of rows) {
    buf += r;
    if (buf.length >= 1 << 20) {
      if (!out.write(Buffer.from(buf, 'latin1'))) await once(out, 'drain');
      buf = '';
    }
  }
  out.end(Buffer.from(buf, 'latin1'));
  await once(out, 'finish');
}

function* empresas(n: number, part: number, rnd: () => number) {
  for (let i = part; i < n; i += 10) {
    const basico = pad(10_000_000 + i, 8);
    const mei = rnd() < 0.5;
    const name = mei
      ? `${FIRST[i % FIRST.length]} ${LAST[(i >> 3) % LAST.length]} ${LAST[(i >> 5) % LAST.length]} ${pad(Math.floor(rnd() * 1e11), 11)}`
      : `${ACT[i % ACT.length]} ${LAST[(i >> 2) % LAST.length]} ${mei ? '' : 'LTDA'}`.trim();
    const cap = rnd() < 0.001 ? '999999999999,00' : `${Math.floor(rnd() * 200000)},00`;
    yield q([basico, name, mei ? '2135' : '2062', mei ? '50' : '49', cap, mei ? '01' : rnd() < 0.2 ? '03' : '05', '']);
  }
}

function* estabelecimentos(n: number, part: number, rnd: () => number) {
  for (let i = part; i < n; i += 10) {
    const basico = pad(10_000_000 + i, 8);
    const ordem = '0001';
    const dv = cnpjCheckDigits(basico + ordem);
    const [uf, mun] = UFS[i % UFS.length];
    const sit = rnd() < 0.55 ? '02' : '08';
    const cep = rnd() < 0.001 ? pad(1_000_000 + (i % 8_999_999), 7) : pad(10_000_000 + (i % 89_999_999), 8);
    const sec = rnd() < 0.55 ? [CNAES[(i + 1) % 10], CNAES[(i + 3) % 10]].join(',') : '';
    yield q([basico, ordem, dv, '1', rnd() < 0.4 ? `${ACT[(i >> 1) % ACT.length]} ${LAST[i % LAST.length]}` : '', sit, '20200115', sit === '08' ? '01' : '00', '', '', '20150301',
      CNAES[i % 10], sec, 'RUA', `DAS ${LAST[(i >> 4) % LAST.length]}`, String(i % 3000), rnd() < 0.3 ? 'SALA 1' : '', 'CENTRO', cep, uf, mun, '11', pad(30000000 + (i % 9999999), 8), '', '', '', '', rnd() < 0.3 ? `CONTATO${i}@EXEMPLO.COM.BR` : '', '', '']);
  }
}

function* socios(n: number, part: number, rnd: () => number) {
  // 0.45 partners per company: companies i with i % 20 < 9 get one partner.
  for (let i = part; i < n; i += 10) {
    if (i % 20 >= 9) continue;
    const basico = pad(10_000_000 + i, 8);
    const pf = rnd() < 0.9;
    yield q([basico, pf ? '2' : '1', `${FIRST[(i >> 2) % FIRST.length]} ${LAST[i % LAST.length]} ${LAST[(i >> 6) % LAST.length]}`,
      pf ? `***${pad(Math.floor(rnd() * 1e6), 6)}**` : pad(20_000_000 + i, 8) + '0001' + cnpjCheckDigits(pad(20_000_000 + i, 8) + '0001'),
      pf ? '49' : '22', '20190611', '', '***000000**', '', '00', pf ? String(1 + Math.floor(rnd() * 8)) : '0']);
  }
}

function* simples(n: number, rnd: () => number) {
  for (let i = 0; i < n; i++) {
    if (i % 5 >= 3) continue;
    const s = rnd() < 0.5;
    yield q([pad(10_000_000 + i, 8), s ? 'S' : 'N', '20180101', s ? '00000000' : '20220101', s ? 'S' : 'N', s ? '20180101' : '00000000', '00000000']);
  }
}

interface Input {
  dir: string;
  monthRoot: string;
  csvs: { table: string; file: string }[];
  rows: { empresas: number; estabelecimentos: number; socios: number; simples: number };
  zipBytes: number;
  csvBytes: number;
}

async function zipOne(zipFile: string, member: string, csv: string): Promise<void> {
  const zip = new yazl.ZipFile();
  zip.addFile(csv, member, { mtime: new Date(Date.UTC(2026, 9, 11)), mode: 0o100644, compress: true });
  zip.end();
  await pipeline(zip.outputStream, createWriteStream(zipFile));
}

async function generate(n: number, seed: number): Promise<Input> {
  const dir = path.join(BENCH_DATA_DIR, 'cnpj-load', `n${n}-seed${seed}-v${GENERATOR_VERSION}`);
  const manifest = path.join(dir, 'manifest.json');
  if (existsSync(manifest) && !flags.regen) return JSON.parse(readFileSync(manifest, 'utf8'));
  await rm(dir, { recursive: true, force: true });
  const csvDir = path.join(dir, 'csv');
  const monthRoot = path.join(dir, 'month');
  const monthDir = path.join(monthRoot, MONTH);
  mkdirSync(csvDir, { recursive: true });
  mkdirSync(monthDir, { recursive: true });
  const d = dateCode(MONTH);
  const csvs: Input['csvs'] = [];
  const t0 = Date.now();
  const fam: [string, string, string, (p: number, r: () => number) => Iterable<string>][] = [
    ['Empresas', 'EMPRECSV', 'empresas', (p, r) => empresas(n, p, r)],
    ['Estabelecimentos', 'ESTABELE', 'estabelecimentos', (p, r) => estabelecimentos(n, p, r)],
    ['Socios', 'SOCIOCSV', 'socios', (p, r) => socios(n, p, r)],
  ];
  for (const [zipName, suffix, tableName, gen] of fam) {
    for (let part = 0; part < 10; part++) {
      const csv = path.join(csvDir, `${zipName}${part}.csv`);
      await writeLatin1(csv, gen(part, prng(seed * 1000 + part * 7 + suffix.length)));
      await zipOne(path.join(monthDir, `${zipName}${part}.zip`), `K3241.K03200Y${part}.${d}.${suffix}`, csv);
      csvs.push({ table: tableName, file: csv });
    }
    log(`generated ${zipName} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const sCsv = path.join(csvDir, 'Simples.csv');
  await writeLatin1(sCsv, simples(n, prng(seed + 99)));
  await zipOne(path.join(monthDir, 'Simples.zip'), `F.K03200$W.SIMPLES.CSV.${d}`, sCsv);
  csvs.push({ table: 'simples', file: sCsv });
  for (const [zipName, suffix] of [['Cnaes', 'CNAECSV'], ['Motivos', 'MOTICSV'], ['Municipios', 'MUNICCSV'], ['Naturezas', 'NATJUCSV'], ['Paises', 'PAISCSV'], ['Qualificacoes', 'QUALSCSV']]) {
    const csv = path.join(SAMPLES_DIR, `${suffix}.csv`);
    await zipOne(path.join(monthDir, `${zipName}.zip`), `F.K03200$Z.${d}.${suffix}`, csv);
    csvs.push({ table: 'lookup', file: csv });
  }
  const size = (f: string) => Number(spawnSync('stat', ['-c', '%s', f], { encoding: 'utf8' }).stdout.trim());
  const dirSize = (p: string) => Number(spawnSync('du', ['-sb', p], { encoding: 'utf8' }).stdout.split('\t')[0]);
  const input: Input = {
    dir, monthRoot, csvs,
    rows: { empresas: n, estabelecimentos: n, socios: Array.from({ length: n }, (_, i) => i % 20 < 9).filter(Boolean).length, simples: Array.from({ length: n }, (_, i) => i % 5 < 3).filter(Boolean).length },
    zipBytes: dirSize(monthDir), csvBytes: csvs.reduce((a, c) => a + size(c.file), 0),
  };
  writeFileSync(manifest, JSON.stringify(input, null, 2));
  log(`input ready: ${mb(input.csvBytes)} CSV, ${mb(input.zipBytes)} zipped (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
  return input;
}

function psqlBin(): string {
  const which = spawnSync('sh', ['-c', 'command -v psql'], { encoding: 'utf8' }).stdout.trim();
  return which || '/usr/lib/postgresql/15/bin/psql';
}

const COLS: Record<string, number> = { empresas: 7, estabelecimentos: 30, socios: 11, simples: 7, lookup: 2 };

async function anchor(server: string, input: Input, dbName: string): Promise<{ ms: number; rows: number }> {
  const url = await createDatabase(server, dbName);
  for (const [t, n] of Object.entries(COLS)) {
    const cols = Array.from({ length: n }, (_, i) => `c${i + 1} text`).join(', ');
    spawnSync(psqlBin(), [url, '-q', '-c', `CREATE TABLE bench_${t} (${cols})`]);
  }
  spawnSync(psqlBin(), [url, '-q', '-c', 'CHECKPOINT']);
  const t0 = Date.now();
  for (const c of input.csvs) {
    const r = spawnSync(psqlBin(), [url, '-v', 'ON_ERROR_STOP=1', '-q', '-c', `\\copy bench_${c.table} FROM '${c.file}' WITH (FORMAT csv, DELIMITER ';', ENCODING 'LATIN1')`], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`psql \\copy failed: ${r.stderr}`);
  }
  const ms = Date.now() - t0;
  const rows = Number(spawnSync(psqlBin(), [url, '-Atc', `SELECT (SELECT count(*) FROM bench_empresas) + (SELECT count(*) FROM bench_estabelecimentos) + (SELECT count(*) FROM bench_socios) + (SELECT count(*) FROM bench_simples)`], { encoding: 'utf8' }).stdout.trim());
  if (!flags['keep-db']) await dropDatabase(server, dbName);
  return { ms, rows };
}

async function ours(server: string, input: Input, dbName: string) {
  const url = await createDatabase(server, dbName);
  const dataDir = path.join(os.tmpdir(), `agro-bench-cnpj-${process.pid}-${dbName}`);
  await rm(dataDir, { recursive: true, force: true });
  const env = { ...process.env, DATABASE_URL: url, AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'info', AGRO_CNPJ_PROGRESS_MS: '10000' };
  const mig = Date.now();
  const m = spawnSync(process.execPath, [AGRO_BIN, 'migrate'], { env, encoding: 'utf8', cwd: ROOT_DIR });
  if (m.status !== 0) throw new Error(`migrate failed: ${m.stderr}`);
  const migrateMs = Date.now() - mig;
  spawnSync(psqlBin(), [url, '-q', '-c', 'CHECKPOINT']);
  const dav = await startDavServer({ root: input.monthRoot, token: 'benchtoken' });
  try {
    const run = await timedRun([process.execPath, AGRO_BIN, 'run', 'receita-cnpj', '--source', dav.url.replace('http://', 'http://benchtoken@'), '--json'], {
      env, stderrFile: path.join(input.dir, `ours-${dbName}.log`),
    });
    if (run.exitCode !== 0) throw new Error(`agro run exited ${run.exitCode}: see ${run.stderrFile}`);
    const out = JSON.parse(run.stdout);
    if (out.status !== 'published') throw new Error(`run ended ${out.status}: ${out.message}`);
    const counts = spawnSync(psqlBin(), [url, '-Atc', `SELECT (SELECT count(*) FROM serving.cnpj_empresas), (SELECT count(*) FROM serving.cnpj_estabelecimentos), (SELECT count(*) FROM serving.cnpj_socios), (SELECT count(*) FROM serving.cnpj_simples)`], { encoding: 'utf8' }).stdout.trim().split('|').map(Number);
    const exp = input.rows;
    if (counts.join() !== [exp.empresas, exp.estabelecimentos, exp.socios, exp.simples].join()) throw new Error(`loaded ${counts.join('/')} rows, generated ${Object.values(exp).join('/')}`);
    // Where the load stage's time went (the pipeline's timings: COPY end, indexes, facts per relation).
    const loadDetail = JSON.parse(spawnSync(psqlBin(), [url, '-Atc', `SELECT detail FROM etl.run_stages WHERE stage = 'load' ORDER BY run_id DESC LIMIT 1`], { encoding: 'utf8' }).stdout.trim() || 'null');
    return { run, out, migrateMs, loaded: counts.reduce((a, b) => a + b, 0), loadDetail };
  } finally {
    await dav.close();
    await rm(dataDir, { recursive: true, force: true });
    if (!flags['keep-db']) await dropDatabase(server, dbName);
    else log(`kept database ${dbName}`);
  }
}

const server = benchServerUrl();
const machine = machineInfo();
log(`machine: ${machine.cpus} cpus, load ${machine.loadavg.join(' ')}`);
const results: Record<string, unknown>[] = [];
for (const n of sizes) {
  const input = await generate(n, Number(flags.seed));
  const total = input.rows.empresas + input.rows.estabelecimentos + input.rows.socios + input.rows.simples;
  const tag = `${process.pid}_${n}`;
  log(`${n}: ours…`);
  const o = flags.only === 'anchor' ? null : await ours(server, input, `bench_cnpj_ours_${tag}`);
  log(`${n}: psql \\copy…`);
  const a = flags.only === 'agro' ? null : await anchor(server, input, `bench_cnpj_copy_${tag}`);
  results.push({
    establishments: n, rows: input.rows, total_rows: total, csv_bytes: input.csvBytes, zip_bytes: input.zipBytes,
    ours: o && { wall_ms: Math.round(o.run.wallMs), peak_rss_bytes: o.run.peakRssBytes, cpu_user_s: o.run.cpuUserS, cpu_sys_s: o.run.cpuSysS, stages: o.out.stages, load_detail: o.loadDetail, migrate_ms: o.migrateMs, rows_per_s: Math.round(total / (o.run.wallMs / 1000)) },
    anchor: a && { wall_ms: a.ms, rows: a.rows, rows_per_s: Math.round(a.rows / (a.ms / 1000)) },
    ratio: o && a ? o.run.wallMs / a.ms : null,
  });
}
const loadAfter = os.loadavg().map((x) => Number(x.toFixed(2)));
const rows = [['establishments', 'rows', 'ours', 'ours rows/s', 'peak RSS', 'psql \\copy', 'copy rows/s', 'ratio']];
for (const r of results as any[]) {
  rows.push([String(r.establishments), String(r.total_rows), secs(r.ours?.wall_ms), String(r.ours?.rows_per_s ?? 'n/a'), mb(r.ours?.peak_rss_bytes), secs(r.anchor?.wall_ms), String(r.anchor?.rows_per_s ?? 'n/a'), r.ratio ? `${r.ratio.toFixed(2)}×` : 'n/a']);
}
console.log(table(rows));
const last = results[results.length - 1] as any;
let projection: Record<string, number> | null = null;
if (last?.ours) {
  // National month: 60 M establishments, 60 M companies, 27 M partners (+ Simples at the same share as here).
  const nationalRows = 60e6 + 60e6 + 27e6 + 0.6 * 60e6;
  const hours = nationalRows / last.ours.rows_per_s / 3600;
  projection = { national_rows: nationalRows, hours: Number(hours.toFixed(2)) };
  console.log(`stages of the largest run (ms): ${JSON.stringify(last.ours.stages)}`);
  console.log(`load stage of the largest run (ms): ${JSON.stringify(last.ours.load_detail)}`);
  console.log(`projection, national month (${(nationalRows / 1e6).toFixed(0)} M rows) at ${last.ours.rows_per_s} rows/s: ${hours.toFixed(2)} h (goal < 2 h)`);
}
console.log(`load average before ${machine.loadavg.join(' ')}, after ${loadAfter.join(' ')}`);
const file = writeResult('cnpj-load', { machine, loadavg_after: loadAfter, flags, results, projection });
console.log(`figures: ${path.relative(ROOT_DIR, file)}`);
void withDatabase;
