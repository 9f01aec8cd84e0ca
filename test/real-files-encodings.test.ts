// Single-byte DBFs and CSVs as older agency tools write them, each through a real pipeline
// run against PostGIS, every text column compared with the same rows loaded from UTF-8:
// - Windows-1252 punctuation (’ – “ ”: bytes 0x80–0x9F) in a DBF without a .cpg, or under a
//   .cpg saying ISO-8859-1: read as CP1252 (ISO-8859-1 made them invisible C1 controls);
// - a DOS CP850 DBF with no LDID and no .cpg: told from Windows-1252 by its letters;
// - UTF-8 bytes under a DBF LDID that names CP850: the bytes win;
// - a C1 control already in the source text: counted and blocked by the text check;
// - a UTF-8 DBF whose field name has an accent ('Município'): its values reach `extra`;
// - a latin1 CSV (car-titulares) and Receita's record reader with CP1252 punctuation.
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, test } from 'vitest';
import { inCodePage, recordInCodePage } from '../fixtures/code-pages.ts';
import { rowById } from '../fixtures/car-titulares.ts';
import { INCRA_DBF_FIELDS, INCRA_FIXTURE, INCRA_ZIP_NAME } from '../fixtures/incra-quilombos.ts';
import { buildLayerZip, writeLayer, type LayerFormat, type LayerRow } from '../fixtures/readers.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { carTitulares } from '../pipelines/car-titulares/index.ts';
import { incraQuilombos } from '../pipelines/incra-quilombos/index.ts';
import type { Pipeline } from '../src/etl/pipeline.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import { CsvRecordSink, emptySinkStats } from '../src/etl/zip-csv-stream.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;

const run = (p: Pipeline, source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, p, { source });
const report = async (snapshotId: number): Promise<QualityReport> =>
  (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
const LAYER = INCRA_ZIP_NAME.replace(/\.zip$/, '');
/** The published text of every quilombo (the columns read from DBF text fields). */
const published = async () =>
  (await db.pool.query(`SELECT codigo, nome, municipio, uf, fase, esfera, responsavel, observacao, numero_processo FROM serving.incra_quilombos ORDER BY codigo`)).rows;

/** INCRA's fixture rows, the community of 1103 renamed (`name`), every text in `page` or as written. */
function incraRows(name: string, page?: 'cp850' | 'cp1252'): LayerRow[] {
  return INCRA_FIXTURE.map((r) => {
    const attributes = r.attributes.cd_quilomb === 1103 ? { ...r.attributes, nm_comunid: name } : { ...r.attributes };
    return { geometry: r.geometry, attributes: page ? recordInCodePage(attributes, page) : attributes };
  });
}

let n = 0;
async function incraRun(rows: LayerRow[], f: LayerFormat) {
  const dir = path.join(tmp, `incra-${++n}`);
  fs.mkdirSync(dir, { recursive: true });
  await buildLayerZip(path.join(dir, INCRA_ZIP_NAME), LAYER, INCRA_DBF_FIELDS, rows, f);
  return run(incraQuilombos, dir);
}

/** The rows published from the same records written in UTF-8 with a .cpg (the truth). */
async function truth(name: string) {
  const out = await incraRun(incraRows(name), { encoding: 'utf8', cpg: 'UTF-8' });
  expect(out.status).toBe('published');
  return published();
}

/** Loads `rows` in format `f`: published as the same rows in UTF-8, read as `layer` says, with `note` in the report. */
async function readsAsTruth(name: string, rows: LayerRow[], f: LayerFormat, layer: { encoding: string; decided_by: string }, note: RegExp) {
  const want = await truth(name);
  const out = await incraRun(rows, f);
  expect(out.status).toBe('published');
  expect(await published()).toEqual(want);
  const q = await report(out.snapshot_id!);
  expect(q.facts.layers[0]).toMatchObject(layer);
  expect(q.facts.notes.join('\n')).toMatch(note);
}

usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'encodings-test-');

describe('single-byte DBFs: every name byte-exact', () => {
  const PUNCTUATED = 'Conceição das Crioulas – Olho d’Água “Sítio”';

  test('Windows-1252 punctuation without a .cpg is read as CP1252, not as C1 controls', async () => {
    const want = await truth(PUNCTUATED);
    expect(want.find((r) => r.codigo === '1103').nome).toBe(PUNCTUATED);
    const out = await incraRun(incraRows(PUNCTUATED, 'cp1252'), { encoding: 'latin1', cpg: null });
    expect(out.status).toBe('published');
    expect(await published()).toEqual(want);
    const q = await report(out.snapshot_id!);
    expect(q.facts.layers[0]).toMatchObject({ encoding: 'CP1252', decided_by: 'bytes' });
    expect(q.facts.text?.findings).toEqual([]);
  });

  test('the same bytes under a .cpg saying ISO-8859-1: CP1252 too, and the report says why', async () => {
    await readsAsTruth(PUNCTUATED, incraRows(PUNCTUATED, 'cp1252'), { encoding: 'latin1', cpg: 'ISO-8859-1' }, { encoding: 'CP1252', decided_by: 'cpg' },
      /says ISO-8859-1 and the DBF holds bytes 0x80–0x9F: read as CP1252/);
  });

  test('plain ISO-8859-1 accents (no byte 0x80–0x9F) are still read and reported as ISO-8859-1', async () => {
    const want = await truth('Conceição das Crioulas');
    const out = await incraRun(incraRows('Conceição das Crioulas', 'cp1252'), { encoding: 'latin1', cpg: null });
    expect(await published()).toEqual(want);
    expect((await report(out.snapshot_id!)).facts.layers[0]).toMatchObject({ encoding: 'ISO-8859-1', decided_by: 'bytes' });
  });

  test('a DOS CP850 DBF without LDID or .cpg is told from Windows-1252 by its letters', async () => {
    const name = 'Conceição das Crioulas - Olho d\'Água Ângelo';
    const want = await truth(name);
    const out = await incraRun(incraRows(name, 'cp850'), { encoding: 'latin1', cpg: null });
    expect(out.status).toBe('published');
    expect(await published()).toEqual(want);
    expect((await report(out.snapshot_id!)).facts.layers[0]).toMatchObject({ encoding: 'CP850', decided_by: 'bytes' });
  });

  // Upper-case DOS text: its 'Ç' (0x80), 'Ã' (0xC7) and 'Ó' are letters in Windows-1252 too ('€',
  // 'Ç', 'à'), so no letter votes; it was read as Windows-1252 and published 'CONCEI€ÇO'. A 0x80
  // between two letters is CP850's 'Ç' (never a '€' inside a word).
  test('upper-case DOS CP850 text (ASSOCIAÇÃO … CONCEIÇÃO … POÇO) is told from Windows-1252 by its Ç between letters', async () => {
    const name = 'ASSOCIAÇÃO DAS COMUNIDADES DA CONCEIÇÃO E DO POÇO DO JOÃO';
    const fold = (v: unknown) => (typeof v === 'string' ? v.normalize('NFD').replace(/[\u0300-\u036f]/g, '') : v);
    // every other text without accents, folded before it is written in the code page
    const rows = (page?: 'cp850') => INCRA_FIXTURE.map((r) => {
      const attributes = Object.fromEntries(Object.entries(r.attributes).map(([k, v]) => [k, fold(v)]));
      const named = r.attributes.cd_quilomb === 1103 ? { ...attributes, nm_comunid: name } : attributes;
      return { geometry: r.geometry, attributes: page ? recordInCodePage(named, page) : named };
    });
    const good = await incraRun(rows(), { encoding: 'utf8', cpg: 'UTF-8' });
    expect(good.status).toBe('published');
    const want = await published();
    expect(want.map((r) => r.nome)).toContain(name);
    expect(want.map((r) => r.municipio)).toContain('Aparecida de Goiania');
    const out = await incraRun(rows('cp850'), { encoding: 'latin1', cpg: null });
    expect(out.status).toBe('published');
    expect(await published()).toEqual(want);
    expect((await report(out.snapshot_id!)).facts.layers[0]).toMatchObject({ encoding: 'CP850', decided_by: 'bytes' });
  });

  // A Windows file whose only high bytes are an NBSP, 'é' and curly quotes: 0xA0 and 0x93 are
  // letters in CP850 ('á', 'ô'), and the vote took such a file for DOS ('JosÚ', 'ComunidadeáBoa').
  for (const ldid of [0x00, 0x57]) {
    test(`Windows-1252 text with NBSPs and curly quotes, LDID 0x${ldid.toString(16).padStart(2, '0')}: not taken for CP850`, async () => {
      const name = 'Comunidade\u00a0Boa\u00a0Vista do José “Café”';
      const fold = (v: unknown) => (typeof v === 'string' ? v.normalize('NFD').replace(/[\u0300-\u036f]/g, '') : v);
      const rows = (page?: 'cp1252') => incraRows(name, page).map((r) => ({
        geometry: r.geometry,
        attributes: Object.fromEntries(Object.entries(r.attributes).map(([k, v]) => [k, k === 'nm_comunid' && v === (page ? inCodePage(name, page) : name) ? v : fold(v)])),
      }));
      const good = await incraRun(rows(), { encoding: 'utf8', cpg: 'UTF-8' });
      expect(good.status).toBe('published');
      const want = await published();
      const out = await incraRun(rows('cp1252'), { encoding: 'latin1', cpg: null, ldid });
      expect(out.status).toBe('published');
      expect(await published()).toEqual(want);
      expect((await report(out.snapshot_id!)).facts.layers[0].encoding).not.toBe('CP850');
    });
  }

  test('the same CP850 bytes under LDID 0x02 are read as CP850 by the LDID', async () => {
    const name = 'Conceição das Crioulas - Olho d\'Água Ângelo';
    const want = await truth(name);
    const out = await incraRun(incraRows(name, 'cp850'), { encoding: 'latin1', cpg: null, ldid: 0x02 });
    expect(await published()).toEqual(want);
    expect((await report(out.snapshot_id!)).facts.layers[0]).toMatchObject({ encoding: 'CP850', decided_by: 'ldid' });
  });

  test('UTF-8 bytes under an LDID naming CP850 are read as UTF-8 (not Concei├º├úo)', async () => {
    const want = await truth(PUNCTUATED);
    const out = await incraRun(incraRows(PUNCTUATED), { encoding: 'utf8', cpg: null, ldid: 0x02 });
    expect(out.status).toBe('published');
    expect(await published()).toEqual(want);
    const q = await report(out.snapshot_id!);
    expect(q.facts.layers[0]).toMatchObject({ encoding: 'UTF-8', decided_by: 'bytes' });
    expect(q.facts.notes.join('\n')).toMatch(/LDID 0x02 \(CP850\) ignored: the bytes are valid UTF-8/);
  });

  // The same claim made by a sidecar: a .cpg naming a DOS page over UTF-8 bytes published
  // 'Concei├º├úo' with nothing counted (no U+FFFD, no 'Ã' pattern for the double-encoding
  // check), and one naming a Windows page blocked a file whose every byte was right.
  for (const f of [{ cpg: 'CP850' }, { cpg: 'OEM 437' }, { cpg: 'ISO-8859-1' }, { cpg: null, cst: 'windows-1252' }]) {
    const side = f.cpg ? `.cpg "${f.cpg}"` : `.cst "${f.cst}"`;
    test(`UTF-8 bytes under a ${side} are read as UTF-8, and the report says why`, async () => {
      await readsAsTruth(PUNCTUATED, incraRows(PUNCTUATED), { encoding: 'utf8', ...f }, { encoding: 'UTF-8', decided_by: 'bytes' },
        new RegExp(`\\.${f.cpg ? 'cpg' : 'cst'} says (CP\\d+|ISO-8859-1) but the DBF's bytes are valid UTF-8`));
    });
  }

  // And a DOS label over Windows text, as a DOS LDID already was: read as CP850 it published
  // 'ConceiþÒo' and 'COORDENAÃ├O', nothing counted.
  test('Windows-1252 bytes under a .cpg saying 850 are read as CP1252, and the report says why', async () => {
    await readsAsTruth(PUNCTUATED, incraRows(PUNCTUATED, 'cp1252'), { encoding: 'latin1', cpg: '850' }, { encoding: 'CP1252', decided_by: 'bytes' },
      /\.cpg says CP850 but the bytes are Windows text/);
  });

  test('a C1 control already in the text (U+0092 for ’ upstream) is counted and blocks; the last good snapshot stays', async () => {
    const before = await published();
    const out = await incraRun(incraRows('Olho d\u0092Água'), { encoding: 'utf8', cpg: 'UTF-8' });
    expect(out.status).toBe('blocked');
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['control_characters']);
    const q = await report(out.snapshot_id!);
    expect(q.facts.text!.findings).toEqual([
      expect.objectContaining({ column: 'comunidade', replacement: 0, double_encoded: 0, control: 1, examples: ['Olho d\u0092Água'] }),
    ]);
    expect(await published()).toEqual(before);
  });
});

describe('field names', () => {
  test("a UTF-8 DBF's accented field name ('Município', not in the mapping) keeps its values in extra, under that name", async () => {
    const work = path.join(tmp, 'accented-name');
    fs.mkdirSync(work);
    const rows = incraRows('Conceição das Crioulas').map((r) => ({ ...r, attributes: { ...r.attributes, municipix: `${r.attributes.nm_municip}` } }));
    const files = await writeLayer(work, LAYER, [...INCRA_DBF_FIELDS, { name: 'municipix', type: 'C', length: 100 }], rows, { encoding: 'utf8', cpg: 'UTF-8' });
    // The writer takes ASCII names only: the name's bytes become 'Município' in UTF-8 (10 bytes, as QGIS writes it).
    const dbfPath = path.join(work, `${LAYER}.dbf`);
    const dbf = fs.readFileSync(dbfPath);
    const at = dbf.indexOf(Buffer.from('municipix'));
    expect(at).toBeGreaterThan(31);
    Buffer.from('Município', 'utf8').copy(dbf, at);
    fs.writeFileSync(dbfPath, dbf);
    const dir = path.join(tmp, 'accented-name-zip');
    await zipFiles(path.join(dir, INCRA_ZIP_NAME), files.map((p) => ({ path: p, name: path.basename(p) })));
    const out = await run(incraQuilombos, dir);
    expect(out.status).toBe('published');
    const got = (await db.pool.query(`SELECT codigo, municipio, extra->>'município' AS extra_municipio FROM "current".incra_quilombos ORDER BY codigo`)).rows;
    expect(got.length).toBeGreaterThan(2);
    for (const r of got) expect(r.extra_municipio, r.codigo).toBe(r.municipio);
    expect((await report(out.snapshot_id!)).facts.fields.unknown).toContain('município');
  });
});

describe('single-byte CSVs', () => {
  test('car-titulares: a latin1 extract with CP1252 punctuation publishes the name as written', async () => {
    const row = rowById('S02');
    const nome = 'Agropecuária Olho d’Água – Ltda';
    const csv = `car;documento;nome;vinculo\r\n${row.car};${row.documento};${nome};${row.vinculo}\r\n`;
    const file = path.join(tmp, 'titulares.csv');
    fs.writeFileSync(file, Buffer.from(inCodePage(csv, 'cp1252'), 'latin1'));
    const out = await run(carTitulares, file);
    expect(out.status).toBe('published');
    const got = (await db.pool.query(`SELECT nome FROM serving.car_titulares WHERE origem = 'declarado'`)).rows;
    expect(got).toEqual([{ nome }]);
  });

  test("Receita's record reader: CP1252 punctuation in a latin1 record, whatever the chunking", async () => {
    const bytes = Buffer.from(inCodePage('"12345678";"AÇÃO D’OESTE – COMÉRCIO";"2062"\n', 'cp1252'), 'latin1');
    for (const size of [1, 5, bytes.length]) {
      let out = '';
      const sink = new CsvRecordSink('member', 3, (f) => JSON.stringify(f) + '\n', new Writable({ write: (c, _e, cb) => ((out += String(c)), cb()) }), emptySinkStats());
      for (let i = 0; i < bytes.length; i += size) sink.write(bytes.subarray(i, i + size));
      await new Promise<void>((resolve, reject) => sink.end((e?: Error | null) => (e ? reject(e) : resolve())));
      expect(out, `chunks of ${size}`).toBe('["12345678","AÇÃO D’OESTE – COMÉRCIO","2062"]\n');
    }
  });
});
