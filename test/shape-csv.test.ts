// The CSV read step of the one shape (src/etl/shape-csv.ts) against the real PostGIS: several
// files into one staging table (name order, src_seq running on, src_file per row, each file
// mapped by its own header), a drifted file failing before anything is staged, a single file
// in another encoding; and the declaration rule for a relation without extra (no raw text
// can be kept).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FetchedFile } from '../src/etl/download.ts';
import type { RunContext } from '../src/etl/pipeline.ts';
import { defineRelation } from '../src/etl/relation.ts';
import { addCsvFacts, csvFiles, stageByContent } from '../src/etl/shape-csv.ts';
import { lineOfRow } from '../src/etl/stage-csv.ts';
import { emptyFacts } from '../src/etl/quality.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let tmp: string;
beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'shape-csv-'));
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const REL = defineRelation({
  name: 'x',
  columns: [
    { name: 'codigo', type: 'text', from: ['codigo', 'cod'], required: true },
    { name: 'nome', type: 'text', from: ['nome', 'nm'] },
    { name: 'valor', type: 'double precision', from: ['valor'] },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  indexes: {},
});

function file(name: string, text: string | Buffer): FetchedFile {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, text);
  return { path: p, name, sha256: '', size: fs.statSync(p).size, sourceUri: p, fromCache: false };
}

async function read(files: FetchedFile[], stage: string) {
  const client = await db.pool.connect();
  try {
    // The run context only keys the per-run source cache here (no zip is read).
    return await stageByContent(client, {} as RunContext, files, stage, REL, { srid: 4674, csv: { delimiter: ';', badRows: 'reject' } });
  } finally {
    client.release();
  }
}

describe('the line each staged row starts on', () => {
  test('records spanning lines, rejected and empty ones shift the lines; each file counts its own; the shifts are kept per change, not per row', async () => {
    const a = file('a-lines.csv', 'codigo;nome;valor\n1;"two\nlines";1\n2;x;2\nbad\n;;\n3;y;3\n4;z;4\n');
    const b = file('b-lines.csv', 'codigo;nome;valor\n5;w;5\n');
    const staged = await read([a, b], 'stage.csv_lines');
    const [fa, fb] = csvFiles(staged);
    const rows = (await db.pool.query(`SELECT src_seq::int AS seq, codigo FROM stage.csv_lines ORDER BY src_seq`)).rows;
    const lineOf = (r: { seq: number }) => (r.seq < fb.firstSeq ? lineOfRow(r.seq, fa.firstSeq, fa) : lineOfRow(r.seq, fb.firstSeq, fb));
    expect(rows.map((r) => [r.codigo, lineOf(r)])).toEqual([['1', 2], ['2', 4], ['3', 7], ['4', 8], ['5', 2]]);
    expect(fa.lineShifts).toEqual([[1, 1], [2, 2], [3, 4]]);
    expect(fb.lineShifts).toEqual([[fb.firstSeq, 1]]);
    // Past the cap, lines are unknown rather than wrong.
    expect(lineOfRow(4, 1, { lineShifts: [[1, 1]], linesUnknownFrom: 3 })).toBeNull();
    expect(lineOfRow(2, 1, { lineShifts: [[1, 1]], linesUnknownFrom: 3 })).toBe(3);
  });
});

describe('csvRead', () => {
  test('several files go into one table in name order: src_seq runs on, src_file says which, each header maps by its own spelling', async () => {
    const b = file('b-2025.csv', '\uFEFFnm;COD;extra_col\nBeta;2;x\nGama;3;\n');
    const a = file('a-2024.csv', 'codigo;nome;valor\n1;Alfa;10,5\nbad;row\n4;Delta;\n');
    const staged = await read([b, a], 'stage.csv_two');
    const rows = (await db.pool.query(`SELECT src_seq::int, src_file, codigo, nome, valor, extra FROM stage.csv_two ORDER BY src_seq`)).rows;
    expect(rows).toEqual([
      { src_seq: 1, src_file: 0, codigo: '1', nome: 'Alfa', valor: '10,5', extra: null },
      { src_seq: 2, src_file: 0, codigo: '4', nome: 'Delta', valor: '', extra: null },
      { src_seq: 3, src_file: 1, codigo: '2', nome: 'Beta', valor: null, extra: { extra_col: 'x' } },
      { src_seq: 4, src_file: 1, codigo: '3', nome: 'Gama', valor: null, extra: null },
    ]);
    // four rows staged, the malformed one counted; what is missing or unknown in any file is reported
    expect(staged.rows).toBe(4);
    expect(staged.csv?.badRows).toBe(1);
    expect(staged.missingOptional).toEqual(['valor']);
    expect(staged.unknown).toEqual(['extra_col']);
    expect(staged.layers).toEqual([]);
    const files = csvFiles(staged);
    expect(files.map((f) => [f.name, f.fileNo, f.firstSeq, f.rows, f.badRows, f.badRowSamples, f.format.bom])).toEqual([
      ['a-2024.csv', 0, 1, 2, 1, [3], false],
      ['b-2025.csv', 1, 3, 2, 0, [], true],
    ]);
    expect(staged.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(staged.fingerprint).not.toBe(files[0].fingerprint);
    const facts = emptyFacts();
    addCsvFacts(facts, staged.csv!);
    expect(facts.rejected).toEqual({ bad_field_count: 1 });
    expect(facts.encoding.name).toBe('UTF-8');
    expect(facts.geometry.srid).toBeNull();
    expect(facts.notes).toEqual(['1 CSV rows with the wrong field count rejected (a-2024.csv lines 3)']);
  });

  test('rows with a wrong field count in several files: the note names each file with its lines (only the first file was named)', async () => {
    const a = file('a-2024.csv', 'codigo;nome\n1;Alfa\nbad\n2;Beta\n');
    const b = file('b-2025.csv', 'codigo;nome\n3;Gama\n4;Delta;x\nruim\n');
    const staged = await read([a, b], 'stage.csv_bad_two');
    const facts = emptyFacts();
    addCsvFacts(facts, staged.csv!);
    expect(facts.rejected).toEqual({ bad_field_count: 3 });
    expect(facts.notes).toEqual(['3 CSV rows with the wrong field count rejected (a-2024.csv lines 3; b-2025.csv lines 3, 4)']);
  });

  test('a file without a required column fails the read before any file is staged, naming the file and the columns', async () => {
    const good = file('a-ok.csv', 'codigo;nome\n1;Alfa\n');
    const drifted = file('b-drifted.csv', 'code;nome\n2;Beta\n');
    await expect(read([good, drifted], 'stage.csv_drift')).rejects.toMatchObject({
      code: 'required_field_missing',
      message: expect.stringContaining('b-drifted.csv: required columns missing: codigo; b-drifted.csv read as'),
      // what the run's gate rule is made of (quality.ts missingFieldFailure)
      details: { file: 'b-drifted.csv', fields: ['codigo'], looked_for: { codigo: expect.arrayContaining(['codigo']) }, delimiter: ';' },
    });
    expect((await db.pool.query(`SELECT to_regclass('stage.csv_drift') AS t`)).rows[0].t).toBeNull();
  });

  test('a header naming an unknown column twice, or a column not at all: every value is kept in extra', async () => {
    // Exports that join two tables repeat a name; a sheet column someone filled without a header has none.
    const f = file('dups.csv', 'codigo;obs;nome;OBS;;\n1;primeira;Alfa;segunda;solta;\n2;;Beta;;;\n');
    const staged = await read([f], 'stage.csv_dups');
    const rows = (await db.pool.query(`SELECT codigo, nome, extra FROM stage.csv_dups ORDER BY src_seq`)).rows;
    expect(rows).toEqual([
      { codigo: '1', nome: 'Alfa', extra: { obs: 'primeira', 'obs#2': 'segunda', '#5': 'solta' } },
      { codigo: '2', nome: 'Beta', extra: null },
    ]);
    // the repeated name is reported under the key its values have; an unnamed column is not (a trailing delimiter makes one)
    expect(staged.unknown).toEqual(['obs', 'obs#2']);
  });

  test('one file in latin1 with commas: encoding and delimiter detected', async () => {
    const f = file('latin1.csv', Buffer.from('codigo,nome\n7,São João\n', 'latin1'));
    const staged = await read([f], 'stage.csv_latin1');
    expect((await db.pool.query(`SELECT codigo, nome FROM stage.csv_latin1`)).rows).toEqual([{ codigo: '7', nome: 'São João' }]);
    const facts = emptyFacts();
    addCsvFacts(facts, staged.csv!);
    expect(facts.encoding.name).toBe('ISO-8859-1');
    expect(facts.rejected).toEqual({});
  });
});

describe('a relation without extra', () => {
  const base = [
    { name: 'codigo', type: 'text', from: ['codigo'], sql: 'c.codigo' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' as const },
  ];

  test('says why, and refuses a conversion whose raw text would have to be kept', () => {
    expect(() => defineRelation({ name: 'x', withoutExtra: 'personal data', columns: [...base, { name: 'n', type: 'integer', from: ['n'] }], indexes: {} })).toThrow(/needs an extra column/);
    expect(() => defineRelation({ name: 'x', columns: base, indexes: {} })).toThrow(/declare its extra and snapshot_id/);
    expect(defineRelation({ name: 'x', withoutExtra: 'personal data', columns: base, indexes: {} }).columns).toHaveLength(2);
  });
});
