// INCRA's dates written with a time of day ('15/03/2018 00:00:00', '2018-03-15 00:00:00',
// '2018-03-15T00:00:00'): a release exported that way published every date NULL (counted
// unparseable, text kept). Through a real incra-quilombos run: the two layouts followed by a
// time parse as the shared parser reads them (the day as written, an offset read as
// Brasília's wall time), a placeholder with a time is a placeholder, and what is not a date
// (no such day or hour, US order, a 'T' after a day/month date) is still NULL, kept, counted.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { INCRA_FIXTURE, buildIncraZip, type IncraRow } from '../fixtures/incra-quilombos.ts';
import { incraQuilombos } from '../pipelines/incra-quilombos/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let tmp: string;

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'incra-time-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** The committed fixture's rows with their dates rewritten. */
const DATES: Record<string, Record<string, string | null>> = {
  Q1b: { dt_publica: '01/02/2024 00:00:00' },
  Q2: { dt_publica: '20/01/2004 00:00:00', dt_public1: '2009-01-20 00:00:00', dt_decreto: '2009-01-20T00:00:00', dt_titulac: '14/11/2023 14:30:00' },
  Q3: { dt_publica: '2016-05-12T09:15:30.250', dt_decreto: '3/12/2018 23:59', dt_titulac: '00/00/0000 00:00:00' },
  Q4: { dt_publica: '31/02/2010 00:00:00', dt_public1: '2010-05-14 25:00:00', dt_decreto: '05/14/2010 01:15 PM', dt_titulac: '14/05/2010T00:00:00' },
  // 02:30 in UTC is 23:30 of the day before in Brasília
  Q5: { dt_publica: '2004-05-11T02:30:00Z', dt_decreto: '2010-05-14 00:00:00 hs' },
};

test('dates with a time of day publish their day; what is not a date stays NULL, kept and counted', async () => {
  const rows: IncraRow[] = INCRA_FIXTURE.map((r) => ({ ...r, attributes: { ...r.attributes, ...(DATES[r.id] ?? {}) } }));
  const dir = path.join(tmp, 'drop');
  await buildIncraZip(dir, { rows, dateWidth: 30 });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, incraQuilombos, { source: dir });
  expect(out).toMatchObject({ status: 'published', rows_read: 6, rows_loaded: 5, rows_rejected: 0 });
  const served = (await db.pool.query('SELECT * FROM serving.incra_quilombos ORDER BY codigo')).rows;
  const dates = Object.fromEntries(served.map((r) => [r.codigo, [r.data_portaria, r.data_publicacao_decreto, r.data_decreto, r.data_titulacao]]));
  expect(dates).toEqual({
    1101: ['2024-02-01', null, null, null],
    1102: ['2004-01-20', '2009-01-20', '2009-01-20', '2023-11-14'],
    1103: ['2016-05-12', null, '2018-12-03', null],
    1104: [null, null, null, null],
    1105: ['2004-05-10', null, null, null],
  });
  const extra = Object.fromEntries(served.map((r) => [r.codigo, r.extra]));
  expect(extra).toEqual({
    1101: null, 1102: null, 1103: null,
    1104: { data_portaria: '31/02/2010 00:00:00', data_publicacao_decreto: '2010-05-14 25:00:00', data_decreto: '05/14/2010 01:15 PM', data_titulacao: '14/05/2010T00:00:00' },
    1105: { nr_escalao: '1:25.000', data_decreto: '2010-05-14 00:00:00 hs' },
  });
  const q = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.dates).toEqual({
    unparseable: { data_portaria: 1, data_publicacao_decreto: 1, data_decreto: 2, data_titulacao: 1 },
    placeholders: { data_titulacao: 1 },
  });
  expect(q.gate).toMatchObject({ passed: true, failures: [] });
});
