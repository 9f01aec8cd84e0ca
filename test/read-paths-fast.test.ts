// The streaming reader's byte-level shortcuts (src/etl/read/): a DBF number copied as its
// bytes when they already are its JavaScript text, the space padding skipped eight bytes at
// a time, Latin-1 transcoded four bytes at a time. Each is checked against the plain rule it
// replaces, on edge cases and many generated values, and whole layers (Latin-1 with accents,
// UTF-8, windows-1252, ISO-8859-15; overflowed numbers, deleted records, NULL geometries,
// numbers with padded decimals) are staged against GDAL's reader, row for row.
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BinaryCopyWriter } from '../src/etl/read/binary-copy.ts';
import { decodeField, FieldValue, textDecoder, type DbfField } from '../src/etl/read/dbf.ts';
import type { FieldSpec } from '../src/etl/stage-vector.ts';
import { openLayer } from '../src/etl/vector-reader.ts';
import { ShapefileWriter, type DbfField as WriterField } from '../fixtures/lib/shapefile-writer.ts';
import type { TestDb } from './helpers/db.ts';
import { closeReaderContext, openReaderContext, rowDifferences, stageWithBothReaders } from './helpers/readers.ts';

/** A seeded generator (the cases are the same on every run). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
}

/** A field's content as the reader's rule says: up to the first NUL, spaces trimmed at both ends. */
function refSpan(b: Buffer): Buffer {
  const nul = b.indexOf(0);
  let s = 0, e = nul < 0 ? b.length : nul;
  while (e > s && b[e - 1] === 0x20) e--;
  while (s < e && b[s] === 0x20) s++;
  return b.subarray(s, e);
}

/** The N/F rule without shortcuts: a plain decimal prints as JavaScript prints its double; big integers (zero decimals or none) keep their digits. */
function refNumber(t: string): { text: string; json: string | number; unparsed: boolean } {
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t) || !Number.isFinite(Number(t))) return { text: t, json: t, unparsed: true };
  const n = Number(t);
  const whole = /^[+-]?\d+(\.0*)?$/.test(t) ? BigInt(t.replace(/\.0*$/, '')).toString() : null;
  if (Math.abs(n) >= 2 ** 53 && whole !== null) return { text: whole, json: whole, unparsed: false };
  return { text: String(n), json: n, unparsed: false };
}

function decodeOne(cell: string, type: string, encoding = 'ISO-8859-1'): FieldValue {
  const f: DbfField = { name: 'x', type, offset: 1, length: cell.length, decimals: 0 };
  const rec = Buffer.concat([Buffer.from(' '), Buffer.from(cell, 'latin1')]);
  const v = new FieldValue(textDecoder(encoding));
  v.unparsed = decodeField(rec, 0, f, v);
  return v;
}

describe('DBF numbers: the bytes copied only when they are the number as JavaScript prints it', () => {
  const edge = [
    '0', '-0', '0.0000', '-0.0000', '00', '007', '-007.50', '+5', '5.', '.5', '-.5', '12.5000', '3.0', '3.', '100', '100.000',
    '0.000001', '0.0000010', '0.0000001', '0.00000012', '-0.000001', '123456789012345', '1234567890123456', '12345678901234567',
    '9007199254740993', '-9007199254740993123', '99999999999999.9', '0.123456789012345', '0.1234567890123456', '1e5', '1.5E-3',
    '12,50', '1-2', '--1', '-', '.', 'abc', '0x10', '1 2', '999999999999999999999', '1e21', '-1e-7', '0.30000000000000004',
  ];
  it('edge cases: the same text, JSON value and unparsed flag as Number then String', () => {
    for (const t of edge) {
      const v = decodeOne(`  ${t}`, 'N');
      const want = refNumber(t);
      expect({ t, text: v.text, json: v.json, unparsed: v.unparsed }).toEqual({ t, ...want });
    }
  });

  it('50,000 generated decimals (lengths, signs, padded decimals, leading zeros): the same as Number then String', () => {
    const r = rng(7);
    const digits = (n: number) => Array.from({ length: n }, () => String(Math.floor(r() * 10))).join('');
    for (let k = 0; k < 50_000; k++) {
      const sign = r() < 0.2 ? '-' : r() < 0.02 ? '+' : '';
      const int = r() < 0.3 ? '0' : r() < 0.05 ? '0' + digits(1 + Math.floor(r() * 3)) : digits(1 + Math.floor(r() * 17));
      const frac = r() < 0.3 ? '' : '.' + (r() < 0.3 ? '0'.repeat(Math.floor(r() * 8)) : '') + digits(Math.floor(r() * 10)) + (r() < 0.4 ? '0'.repeat(1 + Math.floor(r() * 4)) : '');
      const t = sign + int + frac;
      const v = decodeOne(t.padStart(24), 'F');
      const want = refNumber(t);
      if (v.text !== want.text || v.json !== want.json || v.unparsed !== want.unparsed) expect({ t, text: v.text, json: v.json }).toEqual({ t, ...want });
    }
  });

  it('a cell of asterisks is NULL and flagged as overflowed', () => {
    const v = decodeOne('  ******', 'N');
    expect([v.text, v.json, v.overflow, v.unparsed]).toEqual([null, null, true, false]);
  });
});

describe('DBF text: padding skipped eight bytes at a time', () => {
  it('20,000 generated cells (spaces, NULs, content at any place): the same span as the plain rule', () => {
    const r = rng(11);
    for (let k = 0; k < 20_000; k++) {
      const len = 1 + Math.floor(r() * 80);
      const cell = Buffer.alloc(len, 0x20);
      const from = Math.floor(r() * len), to = from + Math.floor(r() * (len - from));
      for (let i = from; i < to; i++) cell[i] = r() < 0.15 ? 0x20 : r() < 0.03 ? 0 : 0x41 + Math.floor(r() * 26);
      if (r() < 0.1) cell[Math.floor(r() * len)] = 0;
      const f: DbfField = { name: 'x', type: 'C', offset: 3, length: len, decimals: 0 };
      const rec = Buffer.concat([Buffer.from('*ab'), cell, Buffer.from('zz')]);
      const v = new FieldValue(textDecoder('ISO-8859-1'));
      decodeField(rec, 0, f, v);
      const want = refSpan(cell).toString('latin1');
      const got = v.text;
      if ((got ?? '') !== want || (got === null) !== (want === '')) expect({ cell: cell.toString('latin1'), got }).toEqual({ cell: cell.toString('latin1'), got: want || null });
    }
  });
});

describe('binary COPY text from Latin-1 bytes, four bytes at a time', () => {
  it('20,000 generated values (ASCII runs, accents, bytes 0x80-0xFF, NULs): UTF-8 of the Latin-1 text, its NULs as U+2400', () => {
    const r = rng(13);
    const w = new BinaryCopyWriter(1 << 16);
    for (let k = 0; k < 20_000; k++) {
      const len = Math.floor(r() * 40);
      const src = Buffer.alloc(len + 5);
      for (let i = 0; i < src.length; i++) src[i] = r() < 0.9 ? 0x20 + Math.floor(r() * 95) : r() < 0.1 ? 0 : 0x80 + Math.floor(r() * 128);
      const start = Math.floor(r() * 3);
      w.take();
      const at = w.off;
      w.latin1(src, start, start + len);
      const got = w.buf.subarray(at + 4, w.off);
      const want = Buffer.from(src.subarray(start, start + len).toString('latin1').replace(/\0/g, '\u2400'), 'utf8');
      expect(w.buf.readInt32BE(at)).toBe(want.length);
      if (!got.equals(want)) expect(got.toString('hex')).toBe(want.toString('hex'));
    }
  });
});

describe('binary COPY text from UTF-8 bytes, ASCII copied four bytes at a time', () => {
  it('20,000 generated values (ASCII runs, multibyte characters, broken sequences, NULs): valid text copied, the rest decoded with U+FFFD and counted', () => {
    const r = rng(17);
    const w = new BinaryCopyWriter(1 << 16);
    const pieces = ['a', 'Z', ' ', '7', 'ç', 'ã', 'É', '€', '𝄞', '\0'];
    for (let k = 0; k < 20_000; k++) {
      const parts: Buffer[] = [];
      const len = Math.floor(r() * 30);
      for (let i = 0; i < len; i++) {
        const p = r() < 0.85 ? pieces[Math.floor(r() * 4)] : pieces[4 + Math.floor(r() * 6)];
        parts.push(r() < 0.02 ? Buffer.from([0xc3]) : r() < 0.01 ? Buffer.from([0xff]) : Buffer.from(p, 'utf8'));
      }
      const body = Buffer.concat(parts);
      const src = Buffer.concat([Buffer.from('xy'), body, Buffer.from('z')]);
      w.take();
      const at = w.off;
      const counted = w.utf8(src, 2, 2 + body.length);
      const text = body.toString('utf8').replace(/\0/g, '\u2400');
      const want = Buffer.from(text, 'utf8');
      expect(w.buf.readInt32BE(at)).toBe(want.length);
      const got = w.buf.subarray(at + 4, w.off);
      if (!got.equals(want)) expect(got.toString('hex')).toBe(want.toString('hex'));
      expect(counted).toBe(text.includes('\uFFFD'));
    }
  });
});

describe('whole layers against GDAL', () => {
  let db: TestDb;
  let client: pg.PoolClient;
  let tmp: string;
  let n = 0;

  beforeAll(async () => void ({ db, client, tmp } = await openReaderContext('agro-read-fast-')));
  afterAll(() => closeReaderContext({ db, client, tmp }));

  const fields: WriterField[] = [
    { name: 'nome', type: 'C', length: 254 },
    { name: 'cod', type: 'C', length: 43 },
    { name: 'area', type: 'N', length: 20, decimals: 4 },
    { name: 'qtd', type: 'N', length: 10, decimals: 0 },
    { name: 'taxa', type: 'F', length: 19, decimals: 11 },
    { name: 'desc', type: 'C', length: 254 },
  ];
  const names = ['Área de Preservação Permanente', 'São Félix do Araguaia', 'plain ascii name', 'Ç', '', 'Ñandú – “aspas”'];
  const sq = (x: number, y: number, s: number) => [[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]];

  /** Writes a 40-feature layer, then patches the DBF: overflowed cells, a deleted record, a NUL inside a name. */
  async function layerFile(encoding: 'latin1' | 'utf8', cpg: string | null, textOf = (k: number) => names[k % names.length]): Promise<string> {
    const base = path.join(tmp, `layer_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding, cpg, fields });
    for (let k = 0; k < 40; k++) {
      const geom = k % 7 === 3 ? null : k % 5 === 0 ? { type: 'MultiPolygon' as const, coordinates: [[sq(k, 0, 1)], [sq(k + 2, 0, 4), sq(k + 3, 1, 1)]] } : { type: 'Polygon' as const, coordinates: [sq(k, k, 1 + k / 10)] };
      await w.write(geom, { nome: textOf(k), cod: `MT-${5100000 + k}-ABC`, area: k % 6 === 0 ? null : (k - 20) * 12.345678 / 7, qtd: k % 4 ? k * 1000 - 5000 : null, taxa: k / 3 - 4, desc: k % 3 ? `  ${textOf(k + 1)}  ` : null });
    }
    await w.close();
    const dbf = fs.readFileSync(`${base}.dbf`);
    const header = dbf.readUInt16LE(8), rec = dbf.readUInt16LE(10);
    const at = (r: number, f: number) => header + r * rec + 1 + fields.slice(0, f).reduce((s, x) => s + x.length, 0);
    dbf.write('*'.repeat(20), at(2, 2), 'latin1'); // area overflowed
    dbf.write('*'.repeat(10), at(5, 3), 'latin1'); // qtd overflowed
    dbf.write('     0.0000', at(8, 2) + 9, 'latin1'); // zero with padded decimals
    dbf[header + 9 * rec] = 0x2a; // record 10 deleted
    dbf[at(11, 0) + 3] = 0; // a NUL inside a name: the text ends there
    fs.writeFileSync(`${base}.dbf`, dbf);
    return `${base}.shp`;
  }

  async function sameAsGdal(shp: string, specs: FieldSpec[]) {
    const layer = openLayer(shp, { srid: 4674 });
    const { b, rb, a } = await stageWithBothReaders(client, [layer], specs);
    const rows = (await client.query(`SELECT * FROM ${b} ORDER BY src_seq`)).rows;
    return { rb, diff: await rowDifferences(client, a, b), rows, layer };
  }

  const all: FieldSpec[] = fields.map((f) => ({ name: `c_${f.name}`, aliases: [f.name] }));
  const some: FieldSpec[] = all.filter((_, i) => i % 2 === 0); // the rest in `extra`

  for (const [label, encoding, cpg] of [['Latin-1 without .cpg', 'latin1', null], ['UTF-8 with .cpg', 'utf8', 'UTF-8']] as const) {
    it(`${label}: accents, padded decimals, overflowed cells, a deleted record, NULL geometries: the same rows as GDAL's`, async () => {
      const shp = await layerFile(encoding, cpg);
      for (const specs of [all, some]) {
        const { rb, diff, rows } = await sameAsGdal(shp, specs);
        expect(diff).toEqual([]);
        expect(rb).toMatchObject({ rows: 39, deleted: 1, unparsed: 0, replacementChars: 0 });
        if (specs === all) {
          expect(rb.overflowed).toEqual({ [path.basename(shp, '.shp')]: { area: 1, qtd: 1 } });
          expect(rb.cutAtNul).toEqual({ [path.basename(shp, '.shp')]: { nome: 1 } }); // the name with a NUL in it, below
          expect(rows.filter((r) => r.geom === null).length).toBe(6);
          expect(rows.map((r) => r.c_nome)).toContain('São Félix do Araguaia');
          expect(rows[8].c_area).toBe('0');
          // record 12 (k = 11; record 10 was deleted): its name cut at the NUL written in its 4th byte (as GDAL reads it), counted above
          expect(rows[10].c_nome).toBe(Buffer.from(names[11 % names.length], encoding).subarray(0, 3).toString(encoding));
        }
      }
    });
  }

  it('windows-1252 and ISO-8859-15 (.cpg): decoded through their tables, the same rows as GDAL', async () => {
    for (const cpg of ['1252', 'ISO-8859-15']) {
      const shp = await layerFile('latin1', cpg);
      const dbf = fs.readFileSync(shp.replace(/\.shp$/, '.dbf'));
      const header = dbf.readUInt16LE(8), rec = dbf.readUInt16LE(10);
      dbf[header + 3 * rec + 1] = 0x80; // € in windows-1252, a C1 control in Latin-1
      dbf[header + 4 * rec + 1] = 0xa4; // € in ISO-8859-15, ¤ in Latin-1
      fs.writeFileSync(shp.replace(/\.shp$/, '.dbf'), dbf);
      const { diff, rows, rb } = await sameAsGdal(shp, all);
      expect(diff).toEqual([]);
      expect(rb.rows).toBe(39);
      expect(rows[cpg === '1252' ? 3 : 4].c_nome.startsWith('€')).toBe(true);
    }
  });

  it('18- and 20-digit codes in N(18,0)/N(20,0) fields: every digit kept by GDAL\'s reader too, in columns and in extra', async () => {
    const big: WriterField[] = [{ name: 'cod', type: 'N', length: 18 }, { name: 'cod20', type: 'N', length: 20 }, { name: 'qtd', type: 'N', length: 10 }];
    const base = path.join(tmp, `big_${++n}`);
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'polygon', encoding: 'latin1', fields: big });
    for (let k = 0; k < 4; k++) await w.write({ type: 'Polygon', coordinates: [sq(k, 0, 1)] }, { cod: 1, cod20: 1, qtd: k });
    await w.close();
    // The writer goes through a double: the exact digits are written into the cells afterwards.
    const codes = ['123456789012345678', '-12345678901234567', '9007199254740993', '42'];
    const codes20 = ['12345678901234567890', '-1234567890123456789', '900719925474099301', '7'];
    const dbf = fs.readFileSync(`${base}.dbf`);
    const header = dbf.readUInt16LE(8), rec = dbf.readUInt16LE(10);
    for (let r = 0; r < 4; r++) {
      dbf.write(codes[r].padStart(18), header + r * rec + 1, 'latin1');
      dbf.write(codes20[r].padStart(20), header + r * rec + 1 + 18, 'latin1');
    }
    fs.writeFileSync(`${base}.dbf`, dbf);
    const specs: FieldSpec[] = [{ name: 'c_cod', aliases: ['cod'] }, { name: 'c_qtd', aliases: ['qtd'] }]; // cod20 in extra
    const layer = openLayer(`${base}.shp`, { srid: 4674 });
    const { a, b } = await stageWithBothReaders(client, [layer], specs);
    const gdalRows = (await client.query(`SELECT c_cod, c_qtd, extra FROM ${a} ORDER BY src_seq`)).rows;
    expect(gdalRows.map((r) => r.c_cod)).toEqual(codes);
    expect(gdalRows.map((r) => r.extra.cod20)).toEqual(codes20.map((c, i) => (i === 3 ? 7 : c)));
    expect(gdalRows.map((r) => r.c_qtd)).toEqual(['0', '1', '2', '3']);
    expect(await rowDifferences(client, a, b)).toEqual([]);
  });
});
