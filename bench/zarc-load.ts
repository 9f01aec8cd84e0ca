// ZARC load benchmark: a full-size season CSV (3.3 M rows by default, the 2025/26 national
// file) in the official 55-column layout, generated on disk as a stream, then
//   1. runPipeline(zarc) end to end (copy into the raw store, stage through the CSV reader + COPY,
//      normalise and deduplicate in SQL, index, quality, publish), and
//   2. the anchor: a plain `psql \copy` of the same file into a 55-column text table.
// Prints rows/s of both, their ratio and the peak RSS of this process.
//
//   node bin/run-ts.mjs bench/zarc-load.ts [--rows 3300000] [--keep]
//
// Uses the embedded cluster (or DATABASE_URL) and a throw-away database cloned from the
// migrated template, like the tests.
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { EmbeddedCluster } from '../src/db/cluster.ts';
import { runPipeline } from '../src/etl/run.ts';
import { LAYOUT_2026 } from '../fixtures/zarc.ts';
import { zarc } from '../pipelines/zarc/index.ts';
import { prepareTemplate, testDatabase } from '../test/helpers/db.ts';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const ROWS = Number(arg('rows') ?? 3_300_000);
const KEEP = process.argv.includes('--keep');

const UF = { 11: 'RO', 12: 'AC', 13: 'AM', 14: 'RR', 15: 'PA', 16: 'AP', 17: 'TO', 21: 'MA', 22: 'PI', 23: 'CE', 24: 'RN', 25: 'PB', 26: 'PE', 27: 'AL', 28: 'SE', 29: 'BA', 31: 'MG', 32: 'ES', 33: 'RJ', 35: 'SP', 41: 'PR', 42: 'SC', 43: 'RS', 50: 'MS', 51: 'MT', 52: 'GO', 53: 'DF' } as Record<number, string>;
const UF_CODES = Object.keys(UF).map(Number);
const MUNICIPIOS = 5570;
const CROPS = [
  'Soja', 'Milho 1ª Safra', 'Milho 2ª Safra', 'Feijão', 'Feijão 2ª Safra', 'Feijão 3ª Safra', 'Arroz', 'Algodão', 'Trigo', 'Sorgo',
  'Café Arábica Produção', 'Café Arábica Implantação', 'Cana-de-açúcar', 'Girassol', 'Amendoim', 'Mandioca', 'Cevada', 'Aveia', 'Canola', 'Triticale',
  ...Array.from({ length: 20 }, (_, i) => `Cultura Sintética ${i + 1}`),
];

/** Row i of the synthetic season: every (municipality, crop, cycle, soil) at most once. */
function line(i: number): string {
  const mun = i % MUNICIPIOS;
  const combo = Math.floor(i / MUNICIPIOS);
  const crop = combo % CROPS.length;
  const ciclo = 20 + (Math.floor(combo / CROPS.length) % 3);
  const solo = 11 + (Math.floor(combo / (CROPS.length * 3)) % 6);
  const ufCode = UF_CODES[mun % UF_CODES.length];
  const geocodigo = `${ufCode}${String(10000 + Math.floor(mun / UF_CODES.length) * 7).padStart(5, '0')}`;
  const cells = Array<string>(36).fill('0');
  const start = (mun + crop) % 36;
  const len = 6 + (solo % 5);
  for (let k = 0; k < len; k++) {
    const d = Math.min(k, len - 1 - k);
    cells[(start + k) % 36] = d === 0 ? '40' : d === 1 ? '30' : '20';
  }
  return [
    CROPS[crop], '2025', '2026', String(crop + 1), String(ciclo), String(solo), geocodigo, UF[ufCode], `Município ${mun}`,
    '1', 'Padrão', '1', 'Sequeiro', '', '', String(10000 + mun), String(ufCode * 100 + (mun % 7)), String(ufCode * 1000 + (mun % 31)),
    `Portaria SPA/MAPA nº ${300 + crop}, de 1º de agosto de 2025`, ...cells,
  ].join(';');
}

async function generate(file: string, rows: number) {
  const out = fs.createWriteStream(file);
  const write = async (s: string) => {
    if (!out.write(s)) await once(out, 'drain');
  };
  await write('\uFEFF' + LAYOUT_2026.join(';') + '\r\n');
  let buf = '';
  for (let i = 0; i < rows; i++) {
    buf += line(i) + '\r\n';
    if (buf.length > 1 << 20) {
      await write(buf);
      buf = '';
    }
  }
  await write(buf);
  out.end();
  await once(out, 'finish');
}

function psqlBin(): string {
  const which = spawnSync('sh', ['-c', 'command -v psql'], { encoding: 'utf8' }).stdout.trim();
  return which || '/usr/lib/postgresql/15/bin/psql';
}

const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;
const rate = (rows: number, ms: number) => `${Math.round(rows / (ms / 1000)).toLocaleString('en-US')} rows/s`;

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'zarc-bench-'));
const file = path.join(work, 'dados-abertos-tabua-de-risco-safra-2025-2026.csv');
const cfg = loadConfig();
if (!cfg.databaseUrl) await new EmbeddedCluster(cfg).start();
await prepareTemplate();
const db = await testDatabase({ LOG_LEVEL: 'warn' });
try {
  let t0 = Date.now();
  await generate(file, ROWS);
  const size = fs.statSync(file).size;
  console.log(`generated ${ROWS.toLocaleString('en-US')} rows, ${(size / 1e6).toFixed(1)} MB in ${Date.now() - t0} ms (RSS peak so far ${mb(process.resourceUsage().maxRSS)})`);

  t0 = Date.now();
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, zarc, { source: file, force: true });
  const pipeMs = Date.now() - t0;
  if (out.status !== 'published') throw new Error(`pipeline ${out.status}: ${out.error?.message ?? out.message}`);
  if (out.rows_loaded !== ROWS) throw new Error(`loaded ${out.rows_loaded} of ${ROWS} rows`);
  const peakAfterPipeline = process.resourceUsage().maxRSS;
  const detail = (await db.pool.query(`SELECT stage, detail FROM etl.run_stages WHERE run_id = $1 AND stage = 'normalise'`, [out.run_id])).rows[0]?.detail;

  await db.pool.query(`CREATE TABLE bench_copy (${LAYOUT_2026.map((c) => `"${c.toLowerCase()}" text`).join(', ')})`);
  t0 = Date.now();
  const copy = spawnSync(psqlBin(), [db.url, '-v', 'ON_ERROR_STOP=1', '-q', '-c', `\\copy bench_copy FROM '${file}' WITH (FORMAT csv, DELIMITER ';', HEADER true)`], { encoding: 'utf8' });
  const copyMs = Date.now() - t0;
  if (copy.status !== 0) throw new Error(`psql failed: ${copy.stderr}`);
  const copied = Number((await db.pool.query('SELECT count(*) AS n FROM bench_copy')).rows[0].n);

  console.log(`\nrows: ${ROWS.toLocaleString('en-US')} (file ${(size / 1e6).toFixed(1)} MB)`);
  console.log(`runPipeline(zarc): ${pipeMs} ms  ${rate(ROWS, pipeMs)}  stages ${JSON.stringify(out.stages)}`);
  console.log(`normalise steps (ms): ${JSON.stringify(detail?.ms ?? {})}`);
  console.log(`psql \\copy (anchor): ${copyMs} ms  ${rate(copied, copyMs)}`);
  console.log(`ratio pipeline / psql copy: ${(pipeMs / copyMs).toFixed(2)}×`);
  console.log(`peak RSS of this process: ${mb(peakAfterPipeline)} after the pipeline (maxRSS)`);
} finally {
  await db.drop();
  if (!KEEP) fs.rmSync(work, { recursive: true, force: true });
  else console.log(`kept ${file}`);
}
