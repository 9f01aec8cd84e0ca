// ZARC pipeline against the real PostGIS: both header layouts through one alias map,
// exact serving rows (expected values computed from the fixture bytes with an independent
// reader), the long-form periods view, BOM handling, duplicates, the quality report,
// required-column failures, the gate, and CKAN discovery.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runPipeline } from '../src/etl/run.ts';
import type { MissingFieldFailure } from '../src/etl/quality.ts';
import { LAYOUT_2026, SOJA_COD_CULTURA, ZARC_FILE_NAMES, buildZarcFixtures, zarcFiles } from '../fixtures/zarc.ts';
import { pickCkanResources, safraFromName, zarc } from '../pipelines/zarc/index.ts';
import { IBGE_FIXTURE_DIR } from '../fixtures/ibge-municipios.ts';
import { ibgeMunicipios } from '../pipelines/ibge-municipios/index.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'zarc');
const UF_CODES = new Set(['11', '12', '13', '14', '15', '16', '17', '21', '22', '23', '24', '25', '26', '27', '28', '29', '31', '32', '33', '35', '41', '42', '43', '50', '51', '52', '53']);
const DECS = Array.from({ length: 36 }, (_, i) => `dec${i + 1}`);

let db: TestDb;
let tmp: string;
const deps = () => ({ cfg: db.cfg, pool: db.pool, log: db.log });

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zarc-test-'));
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

// ---------- an independent reading of the fixture files ----------

interface Expected {
  row: Record<string, unknown>;
}

/** Splits the files by hand (no csv-parse), strips the BOM, maps by header name. */
function expectedFromFiles(dir: string) {
  const byKey = new Map<string, Expected>();
  const decsByKey = new Map<string, (number | null)[]>();
  let read = 0;
  let badGeo = 0;
  let exact = 0;
  let conflicting = 0;
  for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.csv')).sort()) {
    let text = fs.readFileSync(path.join(dir, name), 'utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    const [head, ...lines] = text.split(/\r?\n/).filter((l) => l !== '');
    const header = head.split(';').map((h) => h.toLowerCase());
    for (const line of lines) {
      read++;
      const cells = line.split(';');
      const get = (h: string): string | null => (header.includes(h) ? cells[header.indexOf(h)].trim() : null);
      // Codes are text (contract: codes are text everywhere; 14-digit crop codes exist).
      const code = (h: string) => get(h) || null;
      const text = (h: string) => get(h) || null;
      const geocodigo = get('geocodigo')!;
      if (!/^\d{7}$/.test(geocodigo) || !UF_CODES.has(geocodigo.slice(0, 2))) {
        badGeo++;
        continue;
      }
      const ini = get('safraini');
      const fim = get('safrafin');
      const safra = !ini && !fim ? 'perene' : `${ini}/${fim}`;
      const cultura = get('nome_cultura')!;
      const decs = DECS.map((d) => (['20', '30', '40'].includes(get(d) ?? '') ? Number(get(d)) : null));
      const chave = [cultura, code('cod_ciclo'), code('cod_solo'), geocodigo, code('cod_outros_manejos') ?? '', code('cod_clima') ?? '', safra, text('portaria') ?? ''].join('|');
      const row: Record<string, unknown> = {
        geocodigo, safra, cultura,
        cultura_busca: cultura.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase(),
        cod_cultura: code('cod_cultura'), ciclo: code('cod_ciclo'), solo: code('cod_solo'), manejo: code('cod_outros_manejos'),
        nome_manejo: text('nome_outros_manejos'), cod_clima: code('cod_clima'), clima: text('nome_clima'), portaria: text('portaria'),
        uf: text('uf'), municipio: text('municipio'), cod_municipio_bacen: text('cod_munic'),
        ...Object.fromEntries(DECS.map((d, i) => [d, decs[i]])),
        safra_ini: ini ? Number(ini) : null, safra_fim: fim ? Number(fim) : null,
        produtividade: text('produtividade'), cod_nm: text('cod_nm'), cod_meso: code('cod_meso'), cod_micro: code('cod_micro'),
        // The invalid risk cell (25) is NULL and its text is kept in extra (contract: never silently nulled).
        chave, extra: decs.some((d, i) => d === null && !['', '0'].includes(get(DECS[i]) ?? '')) ? Object.fromEntries(DECS.filter((d, i) => decs[i] === null && !['', '0'].includes(get(d) ?? '')).map((d) => [d, get(d)])) : null,
      };
      const prev = decsByKey.get(chave);
      if (prev) {
        if (JSON.stringify(prev) === JSON.stringify(decs)) exact++;
        else conflicting++;
      }
      decsByKey.set(chave, decs);
      byKey.set(chave, { row }); // later rows replace earlier ones: last read wins
    }
  }
  const rows = [...byKey.values()].map((e) => e.row).sort((a, b) => ((a.chave as string) < (b.chave as string) ? -1 : 1));
  return { rows, read, badGeo, exact, conflicting };
}

const SERVING_COLUMNS = [
  'geocodigo', 'safra', 'cultura', 'cultura_busca', 'cod_cultura', 'ciclo', 'solo', 'manejo', 'nome_manejo', 'cod_clima', 'clima',
  'portaria', 'uf', 'municipio', 'cod_municipio_bacen', ...DECS, 'safra_ini', 'safra_fim', 'produtividade', 'cod_nm', 'cod_meso',
  'cod_micro', 'chave', 'extra',
];

async function servingRows() {
  const r = await db.pool.query(`SELECT ${SERVING_COLUMNS.join(', ')}, snapshot_id FROM serving.zarc_risco`);
  return r.rows.sort((a, b) => (a.chave < b.chave ? -1 : 1));
}

async function quality(snapshotId: number) {
  return (await db.pool.query(`SELECT quality, schema_fingerprint, status FROM etl.snapshots WHERE snapshot_id = $1`, [snapshotId])).rows[0];
}

/**
 * A CKAN on loopback: package_show lists `resources` (their urls made absolute), and
 * /download/<name> answers `body(name)` (404 when undefined).
 */
async function ckanServer(resources: { url: string }[], body: (name: string) => string | Buffer | undefined): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const port = (server.address() as { port: number }).port;
    if (req.url?.startsWith('/api/3/action/package_show')) {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ success: true, result: { resources: resources.map((r) => ({ ...r, url: `http://127.0.0.1:${port}${r.url}` })) } }));
      return;
    }
    const b = body(decodeURIComponent(req.url!.replace('/download/', '')));
    if (b === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.setHeader('content-type', 'text/csv');
    res.setHeader('last-modified', 'Tue, 05 Aug 2025 10:00:00 GMT');
    res.end(b);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

// ---------- tests ----------

describe('zarc on the fixtures', () => {
  let snapshotId: number;

  test('both layouts load through one alias map; counts, duplicates and the quality report', async () => {
    const out = await runPipeline(deps(), zarc, { source: FIXTURES });
    expect(out.error).toBeUndefined();
    expect(out.status).toBe('published');
    snapshotId = out.snapshot_id!;
    const exp = expectedFromFiles(FIXTURES);
    expect(exp.read).toBe(105);
    expect(out.rows_read).toBe(105);
    expect(out.rows_loaded).toBe(102);
    expect(out.rows_rejected).toBe(1);
    expect(Object.keys(out.stages)).toEqual(['download', 'read', 'normalise', 'index', 'quality', 'publish']);

    const q = await quality(snapshotId);
    const f = q.quality.facts;
    expect(q.quality.counts).toEqual({ read: 105, loaded: 102, rejected: 1, dropped: 2 });
    expect(f.rejected).toEqual({ bad_geocodigo: exp.badGeo });
    expect(f.dropped).toEqual({ duplicate_row: exp.exact, conflicting_duplicate: exp.conflicting });
    expect([exp.exact, exp.conflicting]).toEqual([1, 1]);
    expect(f.zarc.duplicates.conflicting_keys).toEqual(['Soja|22|13|5218805|1|1|2025/2026|Portaria SPA/MAPA nº 312, de 1º de agosto de 2025']);
    expect(f.zarc.seasons).toEqual({ '2016/2017': 36, '2025/2026': 58, perene: 8 });
    expect(f.zarc.perennial_rows).toBe(8);
    expect(f.zarc.invalid_risk).toEqual({
      cells: 1, rows: 1, values: { '25': 1 },
      samples: [{ file: ZARC_FILE_NAMES.s2025, record: 7, decendio: 30, valor: '25' }],
    });
    // The old layout has no Produtividade / Cod_NM; nothing is unknown.
    expect(f.fields.missingOptional.sort()).toEqual(['cod_nm', 'produtividade']);
    expect(f.fields.unknown).toEqual([]);
    const files = f.zarc.files as { name: string; columns: number; bom: boolean; fingerprint: string; missing_optional: string[]; rows: number }[];
    expect(files.map((x) => [x.name, x.columns, x.rows, x.bom, x.missing_optional])).toEqual([
      [ZARC_FILE_NAMES.s2016, 53, 36, true, ['produtividade', 'cod_nm']],
      [ZARC_FILE_NAMES.s2025, 55, 61, true, []],
      [ZARC_FILE_NAMES.perene, 55, 8, true, []],
    ]);
    expect(files[0].fingerprint).not.toBe(files[1].fingerprint);
    expect(files[1].fingerprint).toBe(files[2].fingerprint);
    expect(q.schema_fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(f.encoding.replacementChars).toBe(0);
    // Empty counts among loaded rows: the 2016 file has no climate (36 rows).
    expect(f.fields.empty).toMatchObject({ cod_clima: 36, clima: 36, portaria: 0, cod_cultura: 0, manejo: 0 });
    expect(f.notes.join('\n')).toContain('"25" × 1');
    // The invalid cell's text is kept (contract: an unparseable value is never silently nulled).
    expect(f.fields.unparsed).toEqual({ dec30: 1 });
    expect(f.fields.overflowed).toBeUndefined();
    expect(q.quality.gate.passed).toBe(true);
  });

  test('serving.zarc_risco holds exactly the rows read independently from the files', async () => {
    const exp = expectedFromFiles(FIXTURES);
    const got = await servingRows();
    expect(got.length).toBe(102);
    expect(got.map(({ snapshot_id, ...r }) => r)).toEqual(exp.rows);
    expect(new Set(got.map((r) => r.snapshot_id))).toEqual(new Set([snapshotId]));
  });

  test('hand-checked rows: accents, search names, conflict winner, invalid cell, perennial, old layout', async () => {
    const one = async (where: string) => (await db.pool.query(`SELECT * FROM serving.zarc_risco WHERE ${where}`)).rows;
    const feijao = await one(`cultura_busca = 'feijao' AND geocodigo = '5208707' AND safra = '2025/2026' AND solo = '12' AND manejo = '2'`);
    expect(feijao).toHaveLength(1);
    expect(feijao[0]).toMatchObject({ cultura: 'Feijão', municipio: 'Goiânia', nome_manejo: 'Irrigado', clima: 'Padrão', ciclo: '20', cod_cultura: '32' });
    // window(30, 9): dec30..dec36 then dec1, dec2 (wraps into January)
    expect([feijao[0].dec29, feijao[0].dec30, feijao[0].dec31, feijao[0].dec32, feijao[0].dec36, feijao[0].dec1, feijao[0].dec2, feijao[0].dec3]).toEqual([null, 40, 30, 20, 20, 30, 40, null]);

    const milho = await one(`cultura_busca = 'milho 2a safra' AND geocodigo = '5218805' AND safra = '2025/2026' AND ciclo = '21' AND solo = '12'`);
    expect(milho).toHaveLength(1);
    expect(milho[0].cultura).toBe('Milho 2ª Safra');

    // Conflicting duplicate: the row read last (window dec27..dec34) wins over dec28..dec1.
    const conflict = await one(`chave = 'Soja|22|13|5218805|1|1|2025/2026|Portaria SPA/MAPA nº 312, de 1º de agosto de 2025'`);
    expect(conflict).toHaveLength(1);
    expect([conflict[0].dec27, conflict[0].dec28, conflict[0].dec34, conflict[0].dec35, conflict[0].dec1]).toEqual([40, 30, 40, null, null]);

    // Invalid cell 25 at dec30 of Soja/Sorriso/21/11: NULL, neighbours kept.
    const inv = await one(`cultura = 'Soja' AND geocodigo = '5107925' AND safra = '2025/2026' AND ciclo = '21' AND solo = '11'`);
    expect([inv[0].dec27, inv[0].dec28, inv[0].dec29, inv[0].dec30, inv[0].dec31, inv[0].dec33, inv[0].dec34]).toEqual([40, 30, 20, null, 20, 40, null]);

    const perene = await one(`safra = 'perene' ORDER BY chave`);
    expect(perene.map((r) => r.cultura)).toEqual(['Banana', ...Array(6).fill('Café Arábica Produção'), 'Tomate']);
    expect(perene.every((r) => r.safra_ini === null && r.safra_fim === null)).toBe(true);
    expect(perene[1].cultura_busca).toBe('cafe arabica producao');

    const old = await one(`safra = '2016/2017' AND cultura = 'Soja' AND geocodigo = '5300108' AND solo = '1'`);
    expect(old[0]).toMatchObject({ safra_ini: 2016, safra_fim: 2017, cod_clima: null, clima: null, produtividade: null, cod_nm: null, manejo: '1', uf: 'DF', municipio: 'Brasília', cod_municipio_bacen: '10001', cod_meso: '5301', cod_micro: '53001' });
    // riskWindow(29, 7) with empty cells written as "": dec29..dec35
    expect(DECS.map((d) => old[0][d])).toEqual([...Array(28).fill(null), 40, 30, 20, 20, 20, 30, 40, null]);

    expect(await one(`geocodigo = '5408707'`)).toEqual([]);
    // A 14-digit crop code (the real soy code) is kept whole: codes are text, never an overflowing integer.
    expect(SOJA_COD_CULTURA).toBe('12016720000011');
    const soja = await db.pool.query(`SELECT DISTINCT cod_cultura FROM serving.zarc_risco WHERE cultura = 'Soja'`);
    expect(soja.rows).toEqual([{ cod_cultura: '12016720000011' }]);
    const types = await db.pool.query(
      `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'serving' AND table_name = 'zarc_risco'
          AND column_name IN ('cod_cultura', 'ciclo', 'solo', 'manejo', 'cod_clima', 'cod_meso', 'cod_micro') ORDER BY 1`,
    );
    expect(types.rows.every((r) => r.data_type === 'text')).toBe(true);
    expect(types.rows).toHaveLength(7);
    const chaves = (await db.pool.query(`SELECT count(*)::int AS n, count(DISTINCT chave)::int AS d FROM serving.zarc_risco`)).rows[0];
    expect(chaves).toEqual({ n: 102, d: 102 });
  });

  test('serving.zarc_periodos: one row per indicated decêndio with its calendar days', async () => {
    const r = await db.pool.query(
      `SELECT decendio, risco, inicio, fim FROM serving.zarc_periodos
        WHERE cultura = 'Milho 2ª Safra' AND geocodigo = '5208707' AND safra = '2025/2026' AND ciclo = '21' AND solo = '12' ORDER BY decendio`,
    );
    expect(r.rows).toEqual([
      { decendio: 1, risco: 40, inicio: '01-01', fim: '01-10' },
      { decendio: 2, risco: 30, inicio: '01-11', fim: '01-20' },
      { decendio: 3, risco: 20, inicio: '01-21', fim: '01-31' },
      { decendio: 4, risco: 20, inicio: '02-01', fim: '02-10' },
      { decendio: 5, risco: 30, inicio: '02-11', fim: '02-20' },
      { decendio: 6, risco: 40, inicio: '02-21', fim: '02-29' },
    ]);
    const d36 = await db.pool.query(
      `SELECT decendio, risco, inicio, fim FROM serving.zarc_periodos
        WHERE cultura = 'Soja' AND geocodigo = '5107925' AND safra = '2025/2026' AND ciclo = '22' AND solo = '13' AND decendio >= 35 ORDER BY decendio`,
    );
    expect(d36.rows).toEqual([
      { decendio: 35, risco: 30, inicio: '12-11', fim: '12-20' },
      { decendio: 36, risco: 40, inicio: '12-21', fim: '12-31' },
    ]);
    // Every decêndio against a calendar computed here (leap year: February ends on the 29th).
    const cal = Array.from({ length: 36 }, (_, i) => {
      const n = i + 1;
      const month = Math.ceil(n / 3);
      const part = (n - 1) % 3;
      const last = new Date(Date.UTC(2024, month, 0)).getUTCDate();
      const mm = String(month).padStart(2, '0');
      return { n, inicio: `${mm}-${['01', '11', '21'][part]}`, fim: `${mm}-${part === 0 ? '10' : part === 1 ? '20' : String(last)}` };
    });
    const sqlCal = await db.pool.query(`SELECT n, etl.zarc_decendio_inicio(n) AS inicio, etl.zarc_decendio_fim(n) AS fim FROM generate_series(1, 36) n ORDER BY n`);
    expect(sqlCal.rows).toEqual(cal);
    // The long form has exactly the non-NULL cells of the wide table.
    const counts = await db.pool.query(
      `SELECT (SELECT count(*)::int FROM serving.zarc_periodos) AS long,
              (SELECT sum(36 - num_nulls(${DECS.join(', ')}))::int FROM serving.zarc_risco) AS wide,
              (SELECT count(*)::int FROM serving.zarc_periodos WHERE risco NOT IN (20, 30, 40)) AS bad`,
    );
    expect(counts.rows[0].long).toBe(counts.rows[0].wide);
    expect(counts.rows[0].bad).toBe(0);
    const exp = expectedFromFiles(FIXTURES);
    expect(counts.rows[0].long).toBe(exp.rows.reduce((a, r) => a + DECS.filter((d) => r[d] !== null).length, 0));
  });

  test('the BOM is stripped: the first column (Nome_cultura) is matched, with or without a BOM', async () => {
    for (const name of Object.values(ZARC_FILE_NAMES)) {
      expect([...fs.readFileSync(path.join(FIXTURES, name)).subarray(0, 4)]).toEqual([0xef, 0xbb, 0xbf, 0x4e]); // BOM + 'N'
    }
    const nulls = await db.pool.query(`SELECT count(*)::int AS n FROM serving.zarc_risco WHERE cultura IS NULL OR (extra IS NOT NULL AND extra <> '{"dec30": "25"}')`);
    expect(nulls.rows[0].n).toBe(0); // the one extra is the invalid risk cell's text
    // The same files without a BOM load the same keys; the report says the BOM is missing.
    const dir = path.join(tmp, 'nobom');
    await buildZarcFixtures(dir, zarcFiles(), { bom: false });
    expect(fs.readFileSync(path.join(dir, ZARC_FILE_NAMES.s2025)).subarray(0, 4).toString()).toBe('Nome');
    const out = await runPipeline(deps(), zarc, { source: dir });
    expect(out.status).toBe('published');
    expect(out.rows_loaded).toBe(102);
    const q = await quality(out.snapshot_id!);
    expect(q.quality.facts.zarc.files.map((f: { bom: boolean }) => f.bom)).toEqual([false, false, false]);
    expect(q.quality.facts.notes.filter((n: string) => n.includes('has no UTF-8 BOM'))).toHaveLength(3);
    expect(q.quality.change).toMatchObject({ previous_snapshot_id: snapshotId, added: 0, removed: 0 });
  });

  test('an unchanged source creates nothing', async () => {
    const out = await runPipeline(deps(), zarc, { source: path.join(tmp, 'nobom') });
    expect(out.status).toBe('unchanged');
  });
});

describe('zarc variants', () => {
  test('a file without the dec columns blocks the run before loading; the current snapshot stays', async () => {
    const before = (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'zarc'`)).rows[0].snapshot_id;
    const dir = path.join(tmp, 'nodecs');
    const [f2025, f2016] = zarcFiles();
    await buildZarcFixtures(dir, [f2016]); // a good file first, so the failure is not the first file's
    await buildZarcFixtures(dir, [{ ...f2025, name: 'dados-abertos-tabua-de-risco-safra-2026-2027.csv' }], { header: LAYOUT_2026.slice(0, 19) });
    const out = await runPipeline(deps(), zarc, { source: dir });
    expect(out.status).toBe('blocked');
    expect(out.error?.code).toBe('required_field_missing');
    expect(out.gate?.failures[0]).toMatchObject({ rule: 'required_field_missing', file: 'dados-abertos-tabua-de-risco-safra-2026-2027.csv' });
    expect((out.gate?.failures[0] as MissingFieldFailure).fields).toHaveLength(36);
    expect(out.error?.message).toContain('dados-abertos-tabua-de-risco-safra-2026-2027.csv: required columns missing: dec1, dec2');
    expect(out.error?.message).toContain('(36 in all)');
    expect(out.rows_loaded).toBe(0);
    const snap = (await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0];
    expect(snap).toEqual({ status: 'blocked', tables: [] });
    const stages = (await db.pool.query(`SELECT stage, status FROM etl.run_stages WHERE run_id = $1 ORDER BY seq`, [out.run_id])).rows;
    expect(stages).toEqual([{ stage: 'download', status: 'done' }, { stage: 'read', status: 'failed' }]);
    expect((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'zarc'`)).rows[0].snapshot_id).toBe(before);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`)).rows[0].n).toBe(0);
    expect((await servingRows()).length).toBe(102);
  });

  test('one CSV as source: unknown columns kept in extra, bad field counts and geocodes rejected, the gate blocks', async () => {
    const [f2025] = zarcFiles();
    const header = [...LAYOUT_2026.slice(0, 19), 'Cod_Grupo', ...LAYOUT_2026.slice(19)];
    const rows = f2025.rows.map((r, i) => ({ ...r, values: { ...r.values, Cod_Grupo: i === 0 ? 'G1' : '' } }));
    const short = header.slice(0, 30).map(() => 'x').join(';');
    const bad = (values: Record<string, string>) => ({ role: 'plain' as const, values: { ...rows[1].values, ...values } });
    const extraRows = [
      bad({ geocodigo: '520870' }), bad({ Nome_cultura: ' ' }), bad({ Cod_Ciclo: 'G2' }), bad({ Cod_Solo: '' }), bad({ SafraFin: '' }),
      bad({ Cod_Cultura: 'sessenta', Nome_cultura: 'Soja Safrinha' }), // loaded, cod_cultura NULL, counted
    ];
    const file = path.join(tmp, 'single', ZARC_FILE_NAMES.s2025);
    await buildZarcFixtures(path.dirname(file), [{ ...f2025, header, rows: [...rows, ...extraRows] }], { rawLines: [short] });
    const out = await runPipeline(deps(), zarc, { source: file });
    expect(out.status).toBe('blocked');
    expect(out.rows_read).toBe(68);
    expect(out.rows_rejected).toBe(7);
    expect(out.rows_loaded).toBe(59);
    expect(out.gate?.failures.map((f) => f.rule).sort()).toEqual(['rejected_share', 'row_drop']);
    const q = await quality(out.snapshot_id!);
    expect(q.status).toBe('blocked');
    expect(q.quality.facts.rejected).toEqual({ bad_geocodigo: 2, bad_field_count: 1, missing_cultura: 1, bad_ciclo: 1, bad_solo: 1, bad_safra: 1 });
    expect(q.quality.facts.zarc.bad_codes).toBe(1);
    expect(q.quality.facts.fields.unknown).toEqual(['cod_grupo']);
    expect(q.quality.facts.notes).toContain(`${ZARC_FILE_NAMES.s2025}: unknown columns kept in extra: cod_grupo`);

    const forced = await runPipeline(deps(), zarc, { source: file, force: true });
    expect(forced.status).toBe('published');
    expect(forced.forced).toBe(true);
    const extra = await db.pool.query(`SELECT chave, extra FROM serving.zarc_risco WHERE extra IS NOT NULL ORDER BY chave`);
    expect(extra.rows).toEqual([
      { chave: 'Soja Safrinha|21|12|5103403|1|1|2025/2026|Portaria SPA/MAPA nº 312, de 1º de agosto de 2025', extra: { cod_cultura: 'sessenta' } },
      { chave: 'Soja|21|11|5103403|1|1|2025/2026|Portaria SPA/MAPA nº 312, de 1º de agosto de 2025', extra: { cod_grupo: 'G1' } },
      { chave: 'Soja|21|11|5107925|1|1|2025/2026|Portaria SPA/MAPA nº 312, de 1º de agosto de 2025', extra: { dec30: '25' } },
    ]);
    expect(q.quality.facts.fields.unparsed).toEqual({ cod_cultura: 1, dec30: 1 });
    expect((await servingRows()).every((r) => r.safra === '2025/2026')).toBe(true);
    const sessenta = await db.pool.query(`SELECT cod_cultura, cultura_busca FROM serving.zarc_risco WHERE cultura = 'Soja Safrinha'`);
    expect(sessenta.rows).toEqual([{ cod_cultura: null, cultura_busca: 'soja safrinha' }]);
  });

  test('a header without SafraIni/SafraFin takes the season from the file name', async () => {
    const [, f2016] = zarcFiles();
    const header = f2016.header.filter((h) => h !== 'SafraIni' && h !== 'SafraFin');
    const dir = path.join(tmp, 'noseason');
    await buildZarcFixtures(dir, [f2016], { header });
    const out = await runPipeline(deps(), zarc, { source: dir, force: true });
    expect(out.status).toBe('published');
    expect(out.rows_loaded).toBe(36);
    const r = await db.pool.query(`SELECT DISTINCT safra, safra_ini, safra_fim FROM serving.zarc_risco`);
    expect(r.rows).toEqual([{ safra: '2016/2017', safra_ini: 2016, safra_fim: 2017 }]);
    const q = await quality(out.snapshot_id!);
    expect(q.quality.facts.fields.missingOptional).toEqual(['safra_ini', 'safra_fim', 'produtividade', 'cod_nm']);
  });

  test('CKAN discovery: season and perennial CSVs are chosen by name from package_show', async () => {
    const resources = [
      { name: 'Dicionário de dados 04/24', format: 'PDF', url: '/download/dicionario-de-dados-tabua-de-risco-04_24.pdf' },
      { name: 'Tábua de risco safra 2016/2017', format: 'CSV', url: `/download/${ZARC_FILE_NAMES.s2016}` },
      { name: 'Tábua de risco safra 2025/2026', format: 'CSV', url: `/download/${ZARC_FILE_NAMES.s2025}` },
      { name: 'Tábua de risco perene, olerícola e sem safra', format: 'CSV', url: `/download/${ZARC_FILE_NAMES.perene}` },
      { name: 'Tábua de risco (arquivo antigo)', format: 'CSV', url: '/download/dados-abertos-tabua-de-risco.csv' },
    ];
    const server = await ckanServer(resources, (name) => {
      const p = path.join(FIXTURES, name);
      return fs.existsSync(p) ? fs.readFileSync(p) : undefined;
    });
    try {
      const port = (server.address() as { port: number }).port;
      const picked = pickCkanResources(resources.map((r) => ({ ...r, url: `http://x${r.url}` })));
      expect(picked.map((p) => p.name)).toEqual([ZARC_FILE_NAMES.s2016, ZARC_FILE_NAMES.s2025, ZARC_FILE_NAMES.perene]);
      const out = await runPipeline(deps(), zarc, { source: `http://127.0.0.1:${port}/api/3/action/package_show?id=tabua-de-risco-zoneamento-agricola-de-risco-climatico` });
      expect(out.error).toBeUndefined();
      expect(out.status).toBe('published');
      expect(out.rows_loaded).toBe(102);
      expect(out.as_of).toBe('2025-08-05');
      const src = (await db.pool.query(`SELECT source FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].source;
      expect(src.files.map((f: { name: string }) => f.name).sort()).toEqual(Object.values(ZARC_FILE_NAMES).sort());
    } finally {
      server.close();
    }
  });

  test('cell and code parsing rules', async () => {
    const r = await db.pool.query(
      `SELECT v, etl.zarc_risco(v) AS risco, etl.zarc_risco_invalido(v) AS invalido, etl.zarc_int(v) AS int
         FROM unnest(ARRAY['20', ' 30 ', '40', '0', '00', '', ' ', '25', '2', 'x', '20.0', '1234567890', '-1', NULL]) WITH ORDINALITY AS t(v, i) ORDER BY i`,
    );
    expect(r.rows.map((x) => [x.v, x.risco, x.invalido, x.int])).toEqual([
      ['20', 20, false, 20], [' 30 ', 30, false, 30], ['40', 40, false, 40], ['0', null, false, 0], ['00', null, false, 0],
      ['', null, false, null], [' ', null, false, null], ['25', null, true, 25], ['2', null, true, 2], ['x', null, true, null],
      ['20.0', null, true, null], ['1234567890', null, true, null], ['-1', null, true, null], [null, null, false, null],
    ]);
    const c = await db.pool.query(
      `SELECT v, etl.zarc_code(v) AS code, etl.is_overflow(v) AS overflow
         FROM unnest(ARRAY['12016720000011', ' 21 ', '0013', '', ' ', 'x', '20.0', '**********', ' *** ', '-1', NULL]) WITH ORDINALITY AS t(v, i) ORDER BY i`,
    );
    expect(c.rows.map((x) => [x.v, x.code, x.overflow])).toEqual([
      ['12016720000011', '12016720000011', false], [' 21 ', '21', false], ['0013', '0013', false], ['', null, false], [' ', null, false],
      ['x', null, false], ['20.0', null, false], ['**********', null, true], [' *** ', null, true], ['-1', null, false], [null, null, false],
    ]);
    const g = await db.pool.query(
      `SELECT array_agg(etl.zarc_geocodigo_ok(v) ORDER BY i) AS ok FROM unnest(ARRAY['5300108', '5408707', '520870', '52087070', '1100015', '5208a07', NULL]) WITH ORDINALITY AS t(v, i)`,
    );
    expect(g.rows[0].ok).toEqual([true, false, false, false, true, false, false]);
  });

  test('season from the file name', () => {
    expect(safraFromName(ZARC_FILE_NAMES.s2025)).toBe('2025/2026');
    expect(safraFromName(ZARC_FILE_NAMES.perene)).toBe('perene');
    expect(safraFromName('dados-abertos-tabua-de-risco.csv')).toBeNull();
  });
});

describe('the municipality crosswalk: ZARC pairs geocodigo with the Bacen code (SOURCES §7.7)', () => {
  let db2: TestDb;
  beforeAll(async () => {
    db2 = await testDatabase();
  });
  afterAll(async () => {
    await db2?.drop();
  });
  const deps2 = () => ({ cfg: db2.cfg, pool: db2.pool, log: db2.log });
  const crosswalk = async () =>
    Object.fromEntries((await db2.pool.query(`SELECT geocodigo, cod_municipio_bacen FROM serving.ref_municipio ORDER BY geocodigo`)).rows.map((r) => [r.geocodigo, r.cod_municipio_bacen]));

  /** geocodigo → the Cod_Munic values its rows carry, read by hand from the files. */
  function pairsFromFiles(dir: string): Map<string, Set<string>> {
    const out = new Map<string, Set<string>>();
    for (const name of fs.readdirSync(dir).filter((n) => n.endsWith('.csv'))) {
      const [head, ...lines] = fs.readFileSync(path.join(dir, name), 'utf8').replace(/^\uFEFF/, '').split(/\r?\n/).filter(Boolean);
      const h = head.split(';').map((x) => x.toLowerCase());
      for (const l of lines) {
        const c = l.split(';');
        const g = c[h.indexOf('geocodigo')];
        if (!/^\d{7}$/.test(g) || !UF_CODES.has(g.slice(0, 2))) continue;
        out.set(g, (out.get(g) ?? new Set()).add(c[h.indexOf('cod_munic')]));
      }
    }
    return out;
  }

  test('serving.ref_municipio.cod_municipio_bacen holds the Cod_Munic ZARC gives each municipality; NULL where ZARC has none', async () => {
    const ibge = await runPipeline(deps2(), ibgeMunicipios, { source: IBGE_FIXTURE_DIR });
    expect(ibge.status).toBe('published');
    const before = await crosswalk();
    expect(Object.values(before).every((v) => v === null)).toBe(true);
    const out = await runPipeline(deps2(), zarc, { source: FIXTURES });
    expect(out.status).toBe('published');
    const pairs = pairsFromFiles(FIXTURES);
    const after = await crosswalk();
    const both = Object.keys(after).filter((g) => pairs.has(g));
    expect(both.length).toBeGreaterThanOrEqual(4);
    for (const g of Object.keys(after)) expect([g, after[g]]).toEqual([g, pairs.has(g) ? [...pairs.get(g)!][0] : null]);
    expect(after['5103403']).toBe('10902'); // Cuiabá (hand-checked)
  });

  test('a geocodigo paired with two Bacen codes: NULL in the crosswalk (no guess) and reported', async () => {
    const dir = path.join(tmp, 'bacen-conflict');
    fs.mkdirSync(dir, { recursive: true });
    for (const name of Object.values(ZARC_FILE_NAMES)) fs.copyFileSync(path.join(FIXTURES, name), path.join(dir, name));
    // One Cuiabá row of the 2025/26 season carries another Bacen code.
    const file = path.join(dir, ZARC_FILE_NAMES.s2025);
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    const i = lines.findIndex((l) => l.includes(';5103403;') && l.includes(';10902;'));
    lines[i] = lines[i].replace(';10902;', ';10903;');
    fs.writeFileSync(file, lines.join('\n'));
    const out = await runPipeline(deps2(), zarc, { source: dir });
    expect(out.status).toBe('published');
    const after = await crosswalk();
    expect(after['5103403']).toBeNull();
    expect(after['5208707']).toBe('10527');
    const q = (await db2.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].quality;
    expect(q.facts.zarc.bacen_conflicts).toEqual([{ geocodigo: '5103403', cod_municipio_bacen: ['10902', '10903'] }]);
    expect(q.facts.notes.join('\n')).toContain('5103403 (10902, 10903)');
  });
});

describe('CKAN resources whose download name is not a plain file name (SOURCES §7.1: chosen by name, never by UUID)', () => {
  let db3: TestDb;
  beforeAll(async () => {
    db3 = await testDatabase();
  });
  afterAll(async () => {
    await db3?.drop();
  });

  test('a season CSV named with spaces, accents or no .csv suffix is loaded; a season offered in another format is named in the report', async () => {
    const s2026 = fs.readFileSync(path.join(FIXTURES, ZARC_FILE_NAMES.s2025), 'utf8').replaceAll(';2025;2026;', ';2026;2027;');
    const files: Record<string, string | Buffer> = {
      [ZARC_FILE_NAMES.s2025]: fs.readFileSync(path.join(FIXTURES, ZARC_FILE_NAMES.s2025)),
      'Tábua de Risco safra 2026-2027 (1).csv': s2026,
      'download': fs.readFileSync(path.join(FIXTURES, ZARC_FILE_NAMES.perene)),
    };
    const resources = [
      { name: 'Tábua de risco safra 2025/2026', format: 'CSV', url: `/download/${ZARC_FILE_NAMES.s2025}` },
      { name: 'Tábua de risco safra 2026/2027', format: 'CSV', url: `/download/${encodeURIComponent('Tábua de Risco safra 2026-2027 (1).csv')}` },
      { name: 'Tábua de risco perene, olerícola e sem safra', format: 'CSV', url: '/download/download' },
      { name: 'Tábua de risco safra 2024/2025 (compactada)', format: 'ZIP', url: '/download/safra-2024-2025.zip' },
    ];
    const server = await ckanServer(resources, (name) => files[name]);
    try {
      const port = (server.address() as { port: number }).port;
      const out = await runPipeline({ cfg: db3.cfg, pool: db3.pool, log: db3.log }, zarc, { source: `http://127.0.0.1:${port}/api/3/action/package_show?id=x`, force: true });
      expect(out.error).toBeUndefined();
      expect(out.status).toBe('published');
      const q = (await db3.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id])).rows[0].quality;
      expect(q.facts.zarc.seasons).toEqual({ '2025/2026': 58, '2026/2027': 58, perene: 8 });
      expect(q.facts.zarc.ckan_not_loaded).toEqual([{ name: 'Tábua de risco safra 2024/2025 (compactada)', format: 'ZIP', url: `http://127.0.0.1:${port}/download/safra-2024-2025.zip` }]);
      expect(q.facts.notes.join('\n')).toContain('CKAN resources named like a season but not CSV, not loaded: Tábua de risco safra 2024/2025 (compactada) (ZIP)');
    } finally {
      server.close();
    }
  });
});
