// The hand-written CSV record reader against csv-parse (the reference) on tricky input,
// including quoted fields with line breaks that straddle the 1 MiB read chunks.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, expect, test } from 'vitest';
import { readCsvRecords, type CsvEncoding } from '../src/etl/csv-records.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csv-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

async function ours(text: string | Buffer, encoding: CsvEncoding = 'utf8', delim = ';') {
  const f = path.join(dir, `f${Math.random()}.csv`);
  fs.writeFileSync(f, text);
  const out: string[][] = [];
  for await (const r of readCsvRecords(f, delim, encoding)) out.push(r.fields);
  return out;
}

const reference = (text: string, delim = ';') =>
  parse(text, { delimiter: delim, bom: true, relax_column_count: true, relax_quotes: true, skip_empty_lines: true }) as string[][];

test('plain, quoted, doubled quotes, delimiters and line breaks inside quotes, BOM, empty fields', async () => {
  const text = '\uFEFFa;b;c\n1;"x;y";"he said ""oi"""\n2;"line\nbreak";\n;;\n"";"";""\n3;plain "quote" inside;z\n\n4;last;no newline';
  expect(await ours(text)).toEqual(reference(text));
  expect((await ours(text))[0]).toEqual(['a', 'b', 'c']);
  expect(await ours(text)).toHaveLength(7);
});

test('CRLF line ends, also inside a quoted field', async () => {
  const text = 'a;b\r\n1;"x\r\ny"\r\n2;3\r\n';
  expect(await ours(text)).toEqual(reference(text));
  expect(await ours(text)).toEqual([['a', 'b'], ['1', 'x\r\ny'], ['2', '3']]);
});

test('records spanning read chunks, with a huge quoted WKT cell (> 1 MiB)', async () => {
  const big = 'POLYGON((' + Array.from({ length: 60_000 }, (_, i) => `-50.${i} -10.${i}`).join(', ') + '))';
  const rows: string[] = ['id;geom;note'];
  for (let i = 0; i < 3000; i++) rows.push(`${i};"${i % 500 === 7 ? big : 'POINT(1 2)'}";"multi\nline ${i}; with ""quotes"""`);
  const text = rows.join('\n') + '\n';
  const got = await ours(text);
  expect(got).toEqual(reference(text));
  expect(got).toHaveLength(3001);
  expect(got[8][1]).toBe(big);
});

test('latin1 bytes decode, and line numbers count physical lines', async () => {
  const buf = Buffer.from('"São";"Ação"\n"x\ny";2\n3;4\n', 'latin1');
  const f = path.join(dir, 'l1.csv');
  fs.writeFileSync(f, buf);
  const recs: { fields: string[]; line: number }[] = [];
  for await (const r of readCsvRecords(f, ';', 'latin1')) recs.push(r);
  expect(recs).toEqual([
    { fields: ['São', 'Ação'], line: 1 },
    { fields: ['x\ny', '2'], line: 2 },
    { fields: ['3', '4'], line: 4 },
  ]);
});

test('an unclosed quote at the end of the file is an error', async () => {
  await expect(ours('a;b\n1;"never closed\n2;3\n')).rejects.toThrow(/unclosed quoted field/);
});
