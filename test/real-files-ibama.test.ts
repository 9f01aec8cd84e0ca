// IBAMA's CSV with values the loader used to read as something they may not be, through a
// real run against PostGIS: a cancel or lift flag that is neither 'S' nor 'N' (SOURCES §3.4
// "S/…"), a day/month date written in the US order with AM/PM, and an ISO stamp with a
// 12-hour time; a masked document. Each is published as the contract says and counted, its text kept.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { IBAMA_TERMS, ibamaCsv, type IbamaTerm } from '../fixtures/ibama-embargos.ts';
import { ibamaEmbargos, type EmbargoFacts } from '../pipelines/ibama-embargos/index.ts';
import { cnpjCheckDigits, cpfCheckDigits, documentHmac, resolveHmacKey } from '../src/documents.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ibama-variants-');

/** The fixture's terms with some cells rewritten (by term id). */
function withCells(changes: Record<string, Partial<IbamaTerm['row']>>): IbamaTerm[] {
  return IBAMA_TERMS.map((t) => (changes[t.id] ? { ...t, row: { ...t.row, ...changes[t.id] } } : t));
}

test('unknown flags stay active but are listed and kept; US-order and run-on dates are no date; a PM stamp keeps its hour', async () => {
  const ids = IBAMA_TERMS.filter((t) => t.role === 'filler' && t.row.SIT_CANCELADO === 'N' && t.row.SIT_DESEMBARGO !== 'S' && t.row.DES_STATUS_FORMULARIO === 'Lavrado').slice(0, 5).map((t) => t.id);
  expect(ids).toHaveLength(5);
  const [cancel, lift, usDate, pm, runOn] = ids;
  const terms = withCells({
    [cancel]: { SIT_CANCELADO: 'Cancelado' },
    [lift]: { SIT_DESEMBARGO: 'X' },
    [usDate]: { DAT_EMBARGO: '03/10/2019 12:00:00 AM' },
    [pm]: { DAT_ULT_ALTERACAO: '2022-02-10 02:32:05 PM' },
    // A year that runs on into a digit: not 2019-08-21 read from the first ten characters.
    [runOn]: { DAT_EMBARGO: '2019-08-215 00:00:00' },
  });
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('published');
  const row = async (id: string) => {
    const num = terms.find((t) => t.id === id)!.row.NUM_TAD;
    return (await db.pool.query(`SELECT situacao, cancelado, desembargado, data_embargo::text, data_alteracao::text, extra FROM "current".ibama_embargos WHERE numero_tad = $1`, [num])).rows[0];
  };
  // A flag that is neither yes nor no: active (contract §3), its text kept.
  expect(await row(cancel)).toMatchObject({ situacao: 'ativo', cancelado: false, extra: expect.objectContaining({ cancelado: 'Cancelado' }) });
  expect(await row(lift)).toMatchObject({ situacao: 'ativo', desembargado: false, extra: expect.objectContaining({ desembargado: 'X' }) });
  // 03/10/2019 with AM/PM is month first: not 3 October read day first, but no date, its text kept.
  const us = await row(usDate);
  expect(us.data_embargo).toBeNull();
  expect(us.extra).toMatchObject({ data_embargo: '03/10/2019 12:00:00 AM' });
  expect((await row(pm)).data_alteracao).toBe('2022-02-10 14:32:05');
  expect(await row(runOn)).toMatchObject({ data_embargo: null, extra: expect.objectContaining({ data_embargo: '2019-08-215 00:00:00' }) });
  const q: QualityReport & { facts: { embargos: EmbargoFacts } } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.embargos.flag_desconhecido).toEqual({ 'SIT_CANCELADO "Cancelado"': 1, 'SIT_DESEMBARGO "X"': 1 });
  expect(q.facts.notes.join('\n')).toMatch(/cancel\/lift flag is neither yes nor no/);
  expect(q.facts.dates.unparseable).toMatchObject({ data_embargo: 3 }); // the fixture's T16 (year 2925) and these two
});

test('a WKT cell that names its CRS (EWKT SRID=4618, SAD69) is read in it and transformed, not taken as EPSG:4326', async () => {
  const term = IBAMA_TERMS.find((t) => t.row.GEOM_AREA_EMBARGADA.startsWith('POLYGON') && t.row.DES_STATUS_FORMULARIO === 'Lavrado' && t.row.SIT_CANCELADO === 'N')!;
  const wkt = term.row.GEOM_AREA_EMBARGADA;
  const file = path.join(tmp, 'ewkt', 'termo_embargo.csv');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, ibamaCsv({ terms: withCells({ [term.id]: { GEOM_AREA_EMBARGADA: `SRID=4618;${wkt}` } }) }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('published');
  const r = (await db.pool.query(
    `SELECT geom_origem,
            ST_HausdorffDistance(geom, ST_Transform(ST_SetSRID(ST_GeomFromText($2), 4618), 4326)) AS from_sad69,
            ST_HausdorffDistance(geom::geography::geometry, ST_SetSRID(ST_GeomFromText($2), 4326)) AS as_4326
       FROM "current".ibama_embargos WHERE numero_tad = $1`,
    [term.row.NUM_TAD, wkt],
  )).rows[0];
  expect(r.geom_origem).toBe('poligono');
  expect(r.from_sad69).toBeLessThan(1e-9);
  expect(r.as_4326).toBeGreaterThan(1e-4); // SAD69 → WGS 84 moves it some 60 m (≈ 5e-4°)
});

test('a quote that opens a cell and never closes there joins rows: each joined row is counted, none vanishes', async () => {
  const counted = (o: { rows_loaded: number; rows_rejected: number }, dropped: Record<string, number>) => o.rows_loaded + o.rows_rejected + Object.values(dropped).reduce((a, b) => a + b, 0);
  const load = async (label: string, text: string) => {
    const file = path.join(tmp, label, 'termo_embargo.csv');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text, 'utf8');
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file, force: true });
    const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
    return { out, q };
  };
  const clean = ibamaCsv();
  const want = await load('quote-clean', clean);
  // A property name typed with an opening quote only, in a row with no other quote: the reader takes
  // everything up to the next quote (a later term's WKT) as its cell, joining the rows between.
  const term = IBAMA_TERMS.find((t) => t.row.NOME_IMOVEL && t.row.GEOM_AREA_EMBARGADA === '' && !Object.values(t.row).some((v) => /["\n;]/.test(v)))!;
  const damaged = clean.replace(`;${term.row.NOME_IMOVEL};`, `;"${term.row.NOME_IMOVEL};`);
  expect(damaged).not.toBe(clean);
  const got = await load('quote-open', damaged);
  expect(got.out.rows_read).toBe(want.out.rows_read);
  expect(counted(got.out, got.q.facts.dropped)).toBe(got.out.rows_read);
  // The joined record and every row it swallowed are rejected (at least two rows).
  expect(got.out.rows_rejected).toBeGreaterThanOrEqual(want.out.rows_rejected + 2);
  expect(got.q.facts.notes.join('\n')).toMatch(/rows joined into one record by a quote that does not close, each line counted as a rejected row: lines \d+–\d+/);
});

/** Loads `terms` as the CSV of a folder of their own; `row(id)` is a term's published document columns. */
async function loadDocuments(label: string, terms: IbamaTerm[]) {
  const file = path.join(tmp, label, 'termo_embargo.csv');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('published');
  const row = async (id: string) => {
    const num = terms.find((t) => t.id === id)!.row.NUM_TAD;
    return (await db.pool.query(`SELECT documento, documento_tipo, documento_hmac FROM "current".ibama_embargos WHERE numero_tad = $1`, [num])).rows[0];
  };
  return { out, row };
}

// IBAMA's documents (SOURCES §1.6: "apparently unmasked", UNVERIFIED). A document the source
// publishes masked ('***.456.789-**' as Receita masks CPFs, or '123.***.***-00') is not its
// visible digits: read as digits it was published as a 5- or 6-digit "document" ('456789')
// with an HMAC that any other person with the same visible digits shares. It is kept as
// written without punctuation, asterisks included, has no type and no HMAC, and is counted.
test('a masked document is kept as written (asterisks and all), without type or HMAC, and counted', async () => {
  const loaded = IBAMA_TERMS.filter((t) => t.role === 'filler' && /\d/.test(t.row.CPF_CNPJ_EMBARGADO ?? ''));
  const [cpf, cnpj, plain, alnum] = loaded.map((t) => t.id);
  // And a CNPJ of the alphanumeric kind (registrations from July 2026, SOURCES §1.5), in lower case.
  const terms = withCells({ [cpf]: { CPF_CNPJ_EMBARGADO: '***.456.789-**' }, [cnpj]: { CPF_CNPJ_EMBARGADO: '123.***.***-00' }, [alnum]: { CPF_CNPJ_EMBARGADO: '12.abc.345/01de-35' } });
  const { out, row } = await loadDocuments('masked', terms);
  expect(await row(cpf)).toEqual({ documento: '***456789**', documento_tipo: null, documento_hmac: null });
  expect(await row(cnpj)).toEqual({ documento: '123******00', documento_tipo: null, documento_hmac: null });
  // An unmasked document is read as before.
  const p = await row(plain);
  expect(p.documento).toMatch(/^\d{11}$|^\d{14}$/);
  expect(p.documento_hmac).toMatch(/^[0-9a-f]{64}$/);
  const a = await row(alnum);
  expect(a).toMatchObject({ documento: '12ABC34501DE35', documento_tipo: 'cnpj' });
  expect(a.documento_hmac).toMatch(/^[0-9a-f]{64}$/);

  const q: QualityReport & { facts: { embargos: EmbargoFacts } } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.embargos.documentos.mascarado).toBe(2);
  expect(q.facts.notes.join('\n')).toMatch(/2 documents are masked in the source/);
  // Masked documents never reach the report's text in clear either.
  expect(JSON.stringify(q)).not.toMatch(/456\.?789/);
});

// A document column of bare digits that passed through a number (a numeric DBF field for the
// shapefile's cpf_cnpj_s, a spreadsheet re-save of the CSV) loses its leading zeros: a CPF
// starting with 0 arrives with 10 digits, such a CNPJ with 13. Read as written it was published
// garbled, typed nothing, and its HMAC (the lookup key) matched no one: an embargo a search by
// document missed. Zeros are put back only when the padded value passes its check digits.
test('bare digits that lost their leading zeros are completed when the check digits agree, and counted', async () => {
  const cpf = `012345678${cpfCheckDigits('012345678')}`;
  const cnpj = `012345670001${cnpjCheckDigits('012345670001')}`;
  const loaded = IBAMA_TERMS.filter((t) => t.role === 'filler' && /\d/.test(t.row.CPF_CNPJ_EMBARGADO ?? ''));
  // CNPJs whose root starts with 000 (old registrations, federal banks and bodies among them)
  // lose three zeros or more: 11 and 10 digits that are no CPF, padded to a valid CNPJ.
  const cnpj000 = `000360300001${cnpjCheckDigits('000360300001')}`;
  const cnpj0000 = `000045670001${cnpjCheckDigits('000045670001')}`;
  const [a, b, c, d, e, f] = loaded.map((t) => t.id);
  const terms = withCells({
    [a]: { CPF_CNPJ_EMBARGADO: cpf.slice(1) },
    [b]: { CPF_CNPJ_EMBARGADO: cnpj.slice(1) },
    // Ten digits that are no CPF and no CNPJ however padded: kept as written (no type).
    [c]: { CPF_CNPJ_EMBARGADO: '1234567899' },
    [d]: { CPF_CNPJ_EMBARGADO: cnpj000.slice(3) },
    [e]: { CPF_CNPJ_EMBARGADO: cnpj0000.slice(4) },
    // The same 11 digits formatted as a CPF never went through a number: kept, no type.
    [f]: { CPF_CNPJ_EMBARGADO: cnpj000.slice(3).replace(/^(\d{3})(\d{3})(\d{3})(\d{2})$/, '$1.$2.$3-$4') },
  });
  // The premises: neither value is a CPF, padded or as written.
  expect(cpfCheckDigits(cnpj000.slice(3, 12))).not.toBe(cnpj000.slice(12));
  expect(cpfCheckDigits(cnpj0000.slice(3, 12))).not.toBe(cnpj0000.slice(12));
  const { out, row } = await loadDocuments('zeros', terms);
  const key = resolveHmacKey(db.cfg).key;
  expect(await row(a)).toMatchObject({ documento: cpf, documento_tipo: 'cpf', documento_hmac: documentHmac(cpf, key) });
  expect(await row(b)).toMatchObject({ documento: cnpj, documento_tipo: 'cnpj', documento_hmac: documentHmac(cnpj, key) });
  expect(await row(c)).toMatchObject({ documento: '1234567899', documento_tipo: null });
  expect(await row(d)).toMatchObject({ documento: cnpj000, documento_tipo: 'cnpj', documento_hmac: documentHmac(cnpj000, key) });
  expect(await row(e)).toMatchObject({ documento: cnpj0000, documento_tipo: 'cnpj', documento_hmac: documentHmac(cnpj0000, key) });
  expect(await row(f)).toMatchObject({ documento: cnpj000.slice(3), documento_tipo: null });
  const q: QualityReport & { facts: { embargos: EmbargoFacts } } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.embargos.documentos.zeros_completados).toBe(4);
  expect(q.facts.notes.join('\n')).toMatch(/4 documents had lost their leading zeros/);
});

// A header in transition holding two spellings of one field, the legacy column first and empty
// (IBAMA renamed NOME_PESSOA_EMBARGADA to NOME_EMBARGADO around 2024): the field took the first
// column in file order, so every name was published NULL (counted only as empty) and the
// current column went to `extra` as an 'unknown column nome_embargado'. The declaration's
// first spelling the header holds wins (its current one), whatever the order of the columns.
test('a header with the legacy spelling of a column before the current one reads the current one', async () => {
  const terms = IBAMA_TERMS.map((t) => ({ ...t, row: { ...t.row, COD_SUBSTITUICAO: '' } }));
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms, renameColumns: { COD_SUBSTITUICAO: 'NOME_PESSOA_EMBARGADA' } }), 'utf8');
  expect(fs.readFileSync(file, 'utf8').split('\r\n')[0].indexOf('NOME_PESSOA_EMBARGADA')).toBeLessThan(fs.readFileSync(file, 'utf8').split('\r\n')[0].indexOf('NOME_EMBARGADO'));
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('published');
  const names = (await db.pool.query(`SELECT numero_tad, nome_embargado FROM "current".ibama_embargos`)).rows;
  expect(names.length).toBeGreaterThan(100);
  const want = new Map(terms.map((t) => [t.row.NUM_TAD, t.row.NOME_EMBARGADO]));
  for (const r of names) expect(r.nome_embargado, r.numero_tad).toBe(want.get(r.numero_tad) || null);
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.unknown).toEqual(['nome_pessoa_embargada']);
});
