// The CSV read step of the one shape (src/etl/shape-csv.ts) against the real PostGIS: several
// files into one staging table (name order, src_seq running on, src_file per row, each file
// mapped by its own header), a drifted file failing before anything is staged; and the
// declaration rules it relies on (a typed build reads no staged text; no extra column means
// no raw text can be kept).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { FetchedFile } from '../src/etl/download.ts';
import { defineRelation, selectList } from '../src/etl/relation.ts';
import { csvFiles, csvRead } from '../src/etl/shape-csv.ts';
import type { LoadStep, ShapeTables } from '../src/etl/shape.ts';
import { emptyFacts } from '../src/etl/quality.ts';
import { tableName } from '../src/sql.ts';
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

const FIELDS = [
  { name: 'codigo', aliases: ['codigo', 'cod'], required: true },
  { name: 'nome', aliases: ['nome', 'nm'] },
  { name: 'valor', aliases: ['valor'] },
];

function file(name: string, text: string | Buffer): FetchedFile {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, text);
  return { path: p, name, sha256: '', size: fs.statSync(p).size, sourceUri: p, fromCache: false };
}

async function read(files: FetchedFile[], stage: string) {
  const client = await db.pool.connect();
  try {
    const t: ShapeTables = { stage: tableName(stage), fix: tableName('stage.unused_fix'), classified: tableName('stage.unused_cls'), aux: () => tableName('stage.unused') };
    const step = { client, t, file: files[0], asOf: '2025-01-01' } as unknown as LoadStep;
    return await csvRead({ delimiter: ';' }).stage(step, files, FIELDS);
  } finally {
    client.release();
  }
}

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
    // rows read counts the malformed row too; what is missing or unknown in any file is reported
    expect(staged.rows).toBe(5);
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
    csvRead({ delimiter: ';' }).facts(facts, staged);
    expect(facts.rejected).toEqual({ bad_field_count: 1 });
    expect(facts.encoding.name).toBe('UTF-8');
  });

  test('a file without a required column fails the read before any file is staged, naming the file and the columns', async () => {
    const good = file('a-ok.csv', 'codigo;nome\n1;Alfa\n');
    const drifted = file('b-drifted.csv', 'code;nome\n2;Beta\n');
    await expect(read([good, drifted], 'stage.csv_drift')).rejects.toMatchObject({
      code: 'required_field_missing',
      message: expect.stringContaining('b-drifted.csv: required columns missing: codigo; b-drifted.csv read as'),
    });
    expect((await db.pool.query(`SELECT to_regclass('stage.csv_drift') AS t`)).rows[0].t).toBeNull();
  });

  test('one file in latin1 with commas: encoding and delimiter detected', async () => {
    const f = file('latin1.csv', Buffer.from('codigo,nome\n7,São João\n', 'latin1'));
    const staged = await read([f], 'stage.csv_latin1');
    expect((await db.pool.query(`SELECT codigo, nome FROM stage.csv_latin1`)).rows).toEqual([{ codigo: '7', nome: 'São João' }]);
    const facts = emptyFacts();
    csvRead({ delimiter: ';' }).facts(facts, staged);
    expect(facts.encoding.name).toBe('ISO-8859-1');
    expect(facts.rejected).toEqual({});
  });
});

describe('declarations for a typed build', () => {
  const base = [
    { name: 'codigo', type: 'text', from: ['codigo'], sql: 'c.codigo' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' as const },
  ];

  test('a typed build reads every column from the typed rows, extra included', () => {
    const rel = defineRelation({ name: 'x', reads: 'typed', columns: [...base, { name: 'extra', type: 'jsonb', role: 'extra' }], indexes: {} });
    const list = selectList(rel, "'2025-01-01'::date", 7);
    expect(list).toContain('(c.extra)::jsonb AS "extra"');
    expect(list).not.toContain('s.');
  });

  test('a typed build refuses a column converted from staged text', () => {
    expect(() =>
      defineRelation({ name: 'x', reads: 'typed', columns: [...base, { name: 'n', type: 'integer', from: ['n'] }, { name: 'extra', type: 'jsonb', role: 'extra' }], indexes: {} }),
    ).toThrow(/typed build reads no staged text: give n its sql/);
  });

  test('without an extra column, a conversion whose raw text must be kept is refused', () => {
    expect(() => defineRelation({ name: 'x', withoutExtra: 'personal data', columns: [...base, { name: 'n', type: 'integer', from: ['n'] }], indexes: {} })).toThrow(/needs an extra column/);
    expect(() => defineRelation({ name: 'x', columns: base, indexes: {} })).toThrow(/declare its extra and snapshot_id/);
    expect(defineRelation({ name: 'x', withoutExtra: 'personal data', columns: base, indexes: {} }).columns).toHaveLength(2);
  });
});
