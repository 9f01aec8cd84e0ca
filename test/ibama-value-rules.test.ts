// Values of an IBAMA export that were published as written and counted nowhere (a fuzz audit of
// the fixtures): a municipality code that lost a digit ('520870') or holds a letter O ('52O8707'),
// and a negative area ('-5' ha: no land measures less than nothing). The municipality code is an
// IBGE code now (seven digits; a spreadsheet's '5208707.0' is 5208707) and a source's hectares
// an `area` (also FUNAI, CNUC, INCRA): anything else is NULL, its text kept in extra, counted.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { IBAMA_TERMS, ibamaCsv, type IbamaTerm } from '../fixtures/ibama-embargos.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ibama-value-rules-');

const FILLERS = IBAMA_TERMS.filter((t) => t.role === 'filler' && t.row.SEQ_TAD && t.row.COD_MUNICIPIO);

/** Loads the fixture with `column` set to each value on a filler term of its own; the terms, the snapshot's rows and report. */
async function loadWith(name: string, column: string, values: string[]) {
  const picked = new Map(values.map((v, i): [IbamaTerm, string] => [FILLERS[i], v]));
  const terms = IBAMA_TERMS.map((t) => (picked.has(t) ? { ...t, row: { ...t.row, [column]: picked.get(t)! } } : t));
  const file = path.join(tmp, name, 'termo_embargo.csv');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  const row = async (i: number, col: string) =>
    (await db.pool.query(`SELECT ${col} AS value, extra->>'${col}' AS raw FROM "current".ibama_embargos WHERE seq_tad = $1`, [FILLERS[i].row.SEQ_TAD])).rows[0];
  return { q, row };
}

test("a municipality code that is not seven digits is NULL, its text kept in extra and counted; a spreadsheet's 5208707.0 is 5208707", async () => {
  const { q, row } = await loadWith('codes', 'COD_MUNICIPIO', ['520870', '52O8707', ' 5208707.0 ']);
  expect(await row(0, 'cod_municipio_ibge')).toEqual({ value: null, raw: '520870' });
  expect(await row(1, 'cod_municipio_ibge')).toEqual({ value: null, raw: '52O8707' });
  expect(await row(2, 'cod_municipio_ibge')).toEqual({ value: '5208707', raw: null });
  expect(q.facts.fields.unparsed).toMatchObject({ cod_municipio_ibge: 2 });
  expect(q.facts.notes.join('\n')).toMatch(/cod_municipio_ibge: 2 value\(s\) are not 7-digit IBGE municipality codes/);
}, 120_000);

test('a negative embargoed area is NULL, its text kept in extra and counted; zero and Brazilian decimals load', async () => {
  const { q, row } = await loadWith('areas', 'QTD_AREA_EMBARGADA', ['-5', '0', '12,5']);
  expect(await row(0, 'area_embargada_ha')).toEqual({ value: null, raw: '-5' });
  expect(await row(1, 'area_embargada_ha')).toEqual({ value: 0, raw: null });
  expect(await row(2, 'area_embargada_ha')).toEqual({ value: 12.5, raw: null });
  expect(q.facts.fields.unparsed).toMatchObject({ area_embargada_ha: 1 });
  expect(q.facts.notes.join('\n')).toMatch(/area_embargada_ha: 1 value\(s\) are not numbers, or negative areas/);
}, 120_000);

test("a document with no digit at all ('abc', 'n/d') is counted as neither a CPF nor a CNPJ (outro), not as absent; a blank one is absent", async () => {
  const { q, row } = await loadWith('documents', 'CPF_CNPJ_EMBARGADO', ['abc', 'n/d', '  ']);
  for (const i of [0, 1, 2]) expect(await row(i, 'documento')).toEqual({ value: null, raw: null }); // personal data: the text is kept nowhere, extra included
  const docs = (q.facts as unknown as { embargos: { documentos: Record<string, number> } }).embargos.documentos;
  expect({ outro: docs.outro, ausente: docs.ausente }).toEqual({ outro: 2, ausente: 1 });
}, 120_000);

test("a document cell of spaces of any kind (a no-break space, a tab) or of marks only ('-', '--', '.') is blank: absent, not outro", async () => {
  const { q } = await loadWith('blank-documents', 'CPF_CNPJ_EMBARGADO', ['\u00a0', ' \t\u00a0 ', 'n/d', '-', ' -- ', '.']);
  const docs = (q.facts as unknown as { embargos: { documentos: Record<string, number> } }).embargos.documentos;
  const { q: base } = await loadWith('blank-documents-base', 'CPF_CNPJ_EMBARGADO', ['', '', 'n/d', '', '', '']);
  const before = (base.facts as unknown as { embargos: { documentos: Record<string, number> } }).embargos.documentos;
  expect({ outro: docs.outro, ausente: docs.ausente }).toEqual({ outro: before.outro, ausente: before.ausente });
}, 120_000);
