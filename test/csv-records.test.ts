// The hand-written CSV record reader against csv-parse (the reference) on tricky input,
// including quoted fields with line breaks that straddle the 1 MiB read chunks.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, expect, test } from 'vitest';
import { detectCsvFormat, detectDelimiter, readCsvRecords, type CsvEncoding, type CsvFormat } from '../src/etl/csv-records.ts';

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

test('CR alone ends lines when the first line end is one (Excel for Mac); elsewhere a lone CR is text', async () => {
  expect(await ours('a;b\r1;"x\ry"\r2;3')).toEqual([['a', 'b'], ['1', 'x\ny'], ['2', '3']]);
  expect(await ours('a;b\n1;x\ry\n')).toEqual([['a', 'b'], ['1', 'x\ry']]);
  expect(await ours('a;b\r\n1;x\ry\r\n')).toEqual([['a', 'b'], ['1', 'x\ry']]);
  // CR CR LF (CRLF written again through a text-mode file: Python's csv on Windows) is one line end.
  const f2 = path.join(dir, 'crcrlf.csv');
  fs.writeFileSync(f2, 'nome;valor\r\r\nJosé;"1\r\r\n2"\r\r\nAna;3\r\r\n');
  const recs: { fields: string[]; line: number }[] = [];
  for await (const r of readCsvRecords(f2, ';', 'utf8')) recs.push(r);
  expect(recs).toEqual([{ fields: ['nome', 'valor'], line: 1 }, { fields: ['José', '1\n2'], line: 2 }, { fields: ['Ana', '3'], line: 4 }]);
  // Across read chunks (a chunk may end between the CRs and the LF), every line end counts once.
  const f3 = path.join(dir, 'crcrlf-big.csv');
  fs.writeFileSync(f3, 'ab;b\r\r\n' + 'ção;1\r\r\n'.repeat(200_001));
  let n = 0;
  let lastLine = 0;
  for await (const r of readCsvRecords(f3, ';', 'utf8')) {
    if (n++ > 0) expect(r.fields).toEqual(['ção', '1']);
    lastLine = r.line;
  }
  expect([n, lastLine]).toEqual([200_002, 200_002]);
  // The delimiter is counted in the header line alone, not in the rows after a CR.
  const f = path.join(dir, 'cr.csv');
  fs.writeFileSync(f, 'nome;valor\r1,5,6,7;2\r3,1,4,1;5\r');
  expect(await detectCsvFormat(f, { expectedDelimiter: ',' })).toMatchObject({ delimiter: ';', delimiterRule: 'header' });
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

test('format detection: BOMs, UTF-16 by its NUL pattern, UTF-8 validity against latin1, the delimiter of the header', async () => {
  const write = (name: string, bytes: Buffer) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, bytes);
    return f;
  };
  const text = 'nome|cidade|"a;b"\nJoão|Goiânia|1\n';
  const cases: [string, Buffer, Partial<CsvFormat>][] = [
    ['u8bom', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]), { encoding: 'utf8', encodingRule: 'bom', bom: true }],
    ['u8', Buffer.from(text), { encoding: 'utf8', encodingRule: 'utf8_valid', bom: false }],
    ['l1', Buffer.from(text, 'latin1'), { encoding: 'latin1', encodingRule: 'not_utf8', bom: false }],
    ['ascii', Buffer.from('a;b\n1;2\n'), { encoding: 'utf8', encodingRule: 'ascii', delimiter: ';' }],
    ['u16le', Buffer.from('\uFEFF' + text, 'utf16le'), { encoding: 'utf16le', encodingRule: 'bom', bom: true }],
    ['u16le-nobom', Buffer.from(text, 'utf16le'), { encoding: 'utf16le', encodingRule: 'nul_pattern', bom: false }],
    ['u16be', Buffer.from('\uFEFF' + text, 'utf16le').swap16(), { encoding: 'utf16be', encodingRule: 'bom', bom: true }],
    ['u16be-nobom', Buffer.from(text, 'utf16le').swap16(), { encoding: 'utf16be', encodingRule: 'nul_pattern', bom: false }],
  ];
  for (const [name, bytes, want] of cases) {
    const f = write(`${name}.csv`, bytes);
    const fmt = await detectCsvFormat(f, { expectedDelimiter: ';' });
    expect(fmt, name).toMatchObject({ delimiter: want.delimiter ?? '|', delimiterRule: 'header', ...want });
    const recs: string[][] = [];
    for await (const r of readCsvRecords(f, fmt.delimiter, fmt.encoding)) recs.push(r.fields);
    if (name !== 'ascii') expect(recs, name).toEqual([['nome', 'cidade', 'a;b'], ['João', 'Goiânia', '1']]);
  }
  // A latin1 byte after a megabyte of ASCII still decides the encoding.
  const late = write('late.csv', Buffer.concat([Buffer.from('a,b\n' + 'x,y\n'.repeat(400_000)), Buffer.from('S\xe3o,1\n', 'latin1')]));
  expect(await detectCsvFormat(late, { expectedDelimiter: ';' })).toMatchObject({ encoding: 'latin1', delimiter: ',' });
  // Ties go to the expected delimiter; a header with none keeps it; a given one is not detected.
  expect(detectDelimiter('a;b,c', ',')).toBe(',');
  expect(detectDelimiter('a;b,c', ';')).toBe(';');
  expect(detectDelimiter('"x;y;z",b,c', ';')).toBe(',');
  expect(detectDelimiter('single', ';')).toBeNull();
  expect(await detectCsvFormat(write('one.csv', Buffer.from('single\n1\n')), { expectedDelimiter: ';' })).toMatchObject({ delimiter: ';', delimiterRule: 'expected' });
  expect(await detectCsvFormat(late, { expectedDelimiter: ';', delimiter: ';', encoding: 'utf8' })).toMatchObject({ delimiter: ';', delimiterRule: 'given', encoding: 'utf8', encodingRule: 'given' });
  // A UTF-16BE chunk boundary falling inside a character pair decodes cleanly.
  const big = write('u16be-big.csv', Buffer.from('\uFEFFc1;c2\n' + 'ção;1\n'.repeat(300_001), 'utf16le').swap16());
  let n = 0;
  for await (const r of readCsvRecords(big, ';', 'utf16be')) if (n++ > 0) expect(r.fields).toEqual(['ção', '1']);
  expect(n).toBe(300_002);
});

test("a quote inside a quoted field, written unescaped as Receita-style exporters do, is text: the name keeps its quotes", async () => {
  // Every field quoted, inner quotes not doubled: the field ends at the quote before the delimiter.
  const text = 'a;b;c\n"1";"AGROPECUÁRIA "BOA VISTA" LTDA";"x"\n"2";"BAR DO ZE"S";"y"\n"3";"SÍTIO 5" E 6"\r\n';
  expect(await ours(text)).toEqual([['a', 'b', 'c'], ['1', 'AGROPECUÁRIA "BOA VISTA" LTDA', 'x'], ['2', 'BAR DO ZE"S', 'y'], ['3', 'SÍTIO 5" E 6']]);
  // A quoted start followed by text that does not end in a quote keeps the relaxed reading; a
  // delimiter inside the stray quotes still splits (the wrong field count is rejected and counted).
  expect(await ours('a;b\n"Fazenda" Boa Vista;1\n"x" ;2\n"BAR "DO;ZE" LTDA";3\n')).toEqual([['a', 'b'], ['Fazenda Boa Vista', '1'], ['x ', '2'], ['BAR DO', 'ZE" LTDA"', '3']]);
});

test('a latin1 file whose first non-ASCII byte ends the first 1 MiB read is latin1, not UTF-8', async () => {
  const head = 'nome;n\n';
  const filler = 'x;1\n'.repeat(((1 << 20) - head.length) / 4); // exactly 1 MiB with the header
  const bytes = Buffer.concat([Buffer.from(head + filler).subarray(0, (1 << 20) - 1), Buffer.from('\xc9;2\nConceição;3\n', 'latin1')]);
  const f = path.join(dir, 'edge.csv');
  fs.writeFileSync(f, bytes);
  const fmt = await detectCsvFormat(f, { expectedDelimiter: ';' });
  expect(fmt).toMatchObject({ encoding: 'latin1', encodingRule: 'not_utf8' });
  const recs: string[][] = [];
  for await (const r of readCsvRecords(f, fmt.delimiter, fmt.encoding)) recs.push(r.fields);
  expect(recs.slice(-2)).toEqual([['É', '2'], ['Conceição', '3']]);
  // The same byte as the very last of a file is latin1 too (an incomplete UTF-8 sequence at the end).
  const last = path.join(dir, 'last.csv');
  fs.writeFileSync(last, Buffer.from('nome;n\nJOS\xc9', 'latin1'));
  expect(await detectCsvFormat(last, { expectedDelimiter: ';' })).toMatchObject({ encoding: 'latin1' });
});
