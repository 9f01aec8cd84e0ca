// A zero date followed by an all-zero time ('0000-00-00 00:00:00.000', '00/00/0000 00:00:00', as a
// database export writes its "no date") is a placeholder like the bare '0000-00-00': NULL,
// counted as a placeholder, its text not kept. It counted as an unparseable date. Through real
// runs of both date classifiers: IBAMA's (etl.date_kind: date and timestamp columns) and INCRA's
// (etl.date_dmy_iso_kind).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { writeIbamaCsv, type CsvRow } from '../fixtures/ibama-embargos.ts';
import { INCRA_FIXTURE, buildIncraZip, type IncraRow } from '../fixtures/incra-quilombos.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import { incraQuilombos } from '../pipelines/incra-quilombos/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let tmp: string;

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zero-stamps-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

type Counts = Record<string, number>;
const datesFacts = async (snapshotId: number | null): Promise<{ unparseable: Counts; placeholders: Counts }> =>
  (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality.facts.dates;
/** What a run counted more than the run of the unchanged fixture, per column. */
const added = (after: Counts, before: Counts) =>
  Object.fromEntries(Object.entries(after).map(([k, n]) => [k, n - (before[k] ?? 0)]).filter(([, n]) => n !== 0));

test('IBAMA: zero dates with a zero time (and maybe its offset) are placeholders in date and timestamp columns; a zero date with a time that is not zero is still unparseable', async () => {
  const base: Partial<CsvRow> = { DES_STATUS_FORMULARIO: 'Lavrado', SIT_CANCELADO: 'N', SER_TAD: 'E', COD_MUNICIPIO: '5208707', MUNICIPIO: 'Goiânia', UF: 'GO', QTD_AREA_EMBARGADA: '1,0000', DAT_EMBARGO: '2025-05-05 00:00:00', NUM_LONGITUDE_TAD: '-49.5', NUM_LATITUDE_TAD: '-16.9', ULTIMA_ATUALIZACAO_RELATORIO: '2026-10-28 18:56:39' };
  const extraRows: Partial<CsvRow>[] = [
    { ...base, SEQ_TAD: '1400001', NUM_TAD: '900001', DAT_DESEMBARGO: '0000-00-00 00:00:00.000', DAT_ULT_ALTERACAO: '0000-00-00T00:00:00.000Z' },
    { ...base, SEQ_TAD: '1400002', NUM_TAD: '900002', DAT_DESEMBARGO: '00/00/0000 00:00:00', DAT_ULT_ALTERACAO: '00/00/0000 00:00' },
    { ...base, SEQ_TAD: '1400003', NUM_TAD: '900003', DAT_DESEMBARGO: '0000-00-00 00:00:01' },
    // the zero instant with its offset, as a timestamptz export writes it
    { ...base, SEQ_TAD: '1400004', NUM_TAD: '900004', DAT_DESEMBARGO: '0000-00-00T00:00:00-03:00', DAT_ULT_ALTERACAO: '0000-00-00 00:00:00+00' },
  ];
  const ibama = async (name: string, rows: Partial<CsvRow>[]) => {
    const dir = path.join(tmp, name);
    await writeIbamaCsv(path.join(dir, 'termo_embargo.csv'), { extraRows: rows });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: dir, force: true });
    expect(out.status).toBe('published');
    return out;
  };
  const before = await datesFacts((await ibama('ibama-fixture', [])).snapshot_id);
  const out = await ibama('ibama-zeros', extraRows);
  const r = await db.pool.query(`SELECT id_tad, data_desembargo, data_alteracao, extra FROM serving.ibama_embargos WHERE id_tad LIKE '14000%' ORDER BY id_tad`);
  expect(r.rows).toEqual([
    { id_tad: '1400001', data_desembargo: null, data_alteracao: null, extra: null },
    { id_tad: '1400002', data_desembargo: null, data_alteracao: null, extra: null },
    { id_tad: '1400003', data_desembargo: null, data_alteracao: null, extra: { data_desembargo: '0000-00-00 00:00:01' } },
    { id_tad: '1400004', data_desembargo: null, data_alteracao: null, extra: null },
  ]);
  const dates = await datesFacts(out.snapshot_id);
  expect(added(dates.unparseable, before.unparseable)).toEqual({ data_desembargo: 1 });
  expect(added(dates.placeholders, before.placeholders)).toEqual({ data_desembargo: 3, data_alteracao: 3 });
});

test('INCRA: zero dates with a zero time and a fraction are placeholders', async () => {
  const DATES: Record<string, Record<string, string>> = {
    Q2: { dt_titulac: '0000-00-00 00:00:00.000' },
    Q3: { dt_titulac: '00/00/0000 00:00:00.0', dt_decreto: '0000-00-00T00:00:00.000' },
  };
  const incra = async (name: string, dates: Record<string, Record<string, string>>) => {
    const rows: IncraRow[] = INCRA_FIXTURE.map((r) => ({ ...r, attributes: { ...r.attributes, ...(dates[r.id] ?? {}) } }));
    const dir = path.join(tmp, name);
    await buildIncraZip(dir, { rows, dateWidth: 30 });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, incraQuilombos, { source: dir });
    expect(out.status).toBe('published');
    return out;
  };
  const before = await datesFacts((await incra('incra-fixture', {})).snapshot_id);
  const out = await incra('incra-zeros', DATES);
  const served = (await db.pool.query(`SELECT codigo, data_decreto, data_titulacao, extra FROM serving.incra_quilombos WHERE codigo IN ('1102', '1103') ORDER BY codigo`)).rows;
  expect(served.map((r) => [r.codigo, r.data_decreto, r.data_titulacao, r.extra?.data_decreto ?? null, r.extra?.data_titulacao ?? null])).toEqual([
    ['1102', expect.anything(), null, null, null],
    ['1103', null, null, null, null],
  ]);
  const dates = await datesFacts(out.snapshot_id);
  expect(added(dates.unparseable, before.unparseable)).toEqual({});
  // Q3's dt_titulac was '00/00/0000', a placeholder already.
  expect(added(dates.placeholders, before.placeholders)).toEqual({ data_titulacao: 1, data_decreto: 1 });
});
