// An operator's holder extract saved by a spreadsheet, through a real car-titulares run
// against PostGIS: the sheet's empty rows come out as records of delimiters only (';;;'),
// which are no rows (skipped and noted), not rows rejected for a bad CAR number (which
// tripped the 1 % gate on an extract with a few hundred formatted empty rows).
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { TITULARES_ROWS, titularesCsv } from '../fixtures/car-titulares.ts';
import { headerKey, matchHeader } from '../src/etl/header-match.ts';
import { carTitulares } from '../pipelines/car-titulares/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'csv-variants-');

async function load(label: string, text: string) {
  const file = path.join(tmp, label, 'titulares.csv');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text, 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: file });
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  const rows = (await db.pool.query(`SELECT car, documento, nome, vinculo FROM serving.car_titulares WHERE origem = 'declarado' ORDER BY 1, 2, 4`)).rows;
  return { out, q, rows };
}

test("a spreadsheet's empty rows (';;;', '; ; ;') are skipped and noted, the extract publishes as without them", async () => {
  const clean = titularesCsv();
  const want = await load('clean', clean);
  expect(want.out.status).toBe('published');
  const empty = Array.from({ length: 10 }, (_, i) => (i % 2 ? '; ; ;' : ';;;')).join('\r\n');
  const got = await load('empty-rows', `${clean}${empty}\r\n`);
  expect(got.out.status).toBe('published');
  expect(got.out).toMatchObject({ rows_read: want.out.rows_read, rows_loaded: want.out.rows_loaded, rows_rejected: want.out.rows_rejected });
  expect(got.q.facts.rejected).toEqual(want.q.facts.rejected);
  expect(got.rows).toEqual(want.rows);
  expect(got.q.facts.notes.join('\n')).toMatch(/10 CSV records of empty cells only .* skipped/);
});

test("a header re-spelled with accents, capitals and punctuation ('NÚMERO CAR', 'CPF/CNPJ', 'Vínculo') maps as the declared one", async () => {
  const want = await load('plain-header', titularesCsv());
  const got = await load('respelled-header', titularesCsv({ header: ['NÚMERO CAR', 'CPF/CNPJ', 'Nome', ' Vínculo '] }));
  expect(got.out.error ?? null).toBeNull();
  expect(got.out.status).toBe('published');
  expect(got.out).toMatchObject({ rows_read: want.out.rows_read, rows_loaded: want.out.rows_loaded, rows_rejected: want.out.rows_rejected });
  expect(got.rows).toEqual(want.rows);
});

test('header matching: an exact spelling wins over a re-spelled one, a column maps to one field at most', () => {
  expect(headerKey('\uFEFF Município - UF ')).toBe('municipio_uf');
  expect(headerKey('CPF/CNPJ')).toBe('cpf_cnpj');
  const specs = [{ aliases: ['municipio'] }, { aliases: ['município', 'cidade'] }, { aliases: ['cpf_cnpj'] }];
  // each of the first two takes the column spelled exactly as its alias; 'cpf/cnpj' maps by its key.
  expect(matchHeader(['município', 'municipio ', 'cpf/cnpj'].map((h) => h.trim().toLowerCase()), specs)).toEqual([1, 0, 2]);
  expect(matchHeader(['MUNICÍPIO'.toLowerCase()], [{ aliases: ['municipio'] }, { aliases: ['municipio'] }])).toEqual([0, null]);
});

test('an extract quoting every field, with quotes inside a name left undoubled, publishes the name as written', async () => {
  // Exporters that quote every field (Receita's convention) do not double inner quotes.
  const names: Record<string, string> = { S01: 'AGROPECUÁRIA "BOA VISTA" LTDA', S02: 'BAR DO ZE"S' };
  const rows = TITULARES_ROWS.map((r) => (names[r.id] ? { ...r, nome: names[r.id] } : r));
  const want = await load('rfc-quoting', titularesCsv({ rows }));
  const all = ['car;documento;nome;vinculo', ...rows.map((r) => [r.car, r.documento, r.nome, r.vinculo].map((v) => `"${v}"`).join(';'))];
  const got = await load('undoubled-quotes', all.join('\r\n') + '\r\n');
  expect(got.out.status).toBe('published');
  expect(got.out).toMatchObject({ rows_read: want.out.rows_read, rows_loaded: want.out.rows_loaded, rows_rejected: want.out.rows_rejected });
  expect(got.rows).toEqual(want.rows);
  expect(got.rows.map((r) => r.nome)).toEqual(expect.arrayContaining(Object.values(names)));
});

test("an extract saved with classic Mac line ends (CR only: Excel's 'CSV (Macintosh)') or CR CR LF publishes as the CRLF one", async () => {
  const want = await load('crlf-lines', titularesCsv());
  // CR CR LF: CRLF written through a text-mode file (Python's csv on Windows without newline='').
  for (const [label, end] of [['cr-lines', '\r'], ['crcrlf-lines', '\r\r\n']]) {
    const got = await load(label, titularesCsv().replace(/\r\n/g, end));
    expect(got.out.error ?? null, label).toBeNull();
    expect(got.out.status, label).toBe('published');
    expect(got.out, label).toMatchObject({ rows_read: want.out.rows_read, rows_loaded: want.out.rows_loaded, rows_rejected: want.out.rows_rejected });
    expect(got.q.facts.rejected, label).toEqual(want.q.facts.rejected);
    expect(got.rows, label).toEqual(want.rows);
  }
});
