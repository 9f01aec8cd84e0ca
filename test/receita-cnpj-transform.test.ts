// The CNPJ record reader (src/etl/zip-csv-stream.ts) and field rules
// (pipelines/receita-cnpj/transform.ts): golden in/out files (test/golden/receita-cnpj/:
// latin1 source records → COPY lines), the same output whatever the chunking, and the
// reader's edge cases against csv-parse (the reference). UPDATE_GOLDEN=1 rewrites the .out files.
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { parse } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { EMPRESAS, ESTABELECIMENTOS, SOCIOS, type CnpjRelation } from '../pipelines/receita-cnpj/relations.ts';
import { cleanName, emptyCounts, lineBuilder, parseDate, parseMoney, partnerKey, stripCpfFromName, type TransformCounts } from '../pipelines/receita-cnpj/transform.ts';
import { CsvRecordSink, emptySinkStats, type CsvSinkStats } from '../src/etl/zip-csv-stream.ts';

const GOLDEN = path.join(import.meta.dirname, 'golden', 'receita-cnpj');

/** Feeds `bytes` to a CsvRecordSink in chunks of `size` and returns what it wrote and its stats. */
async function readAll(bytes: Buffer, fieldCount: number, onRecord: (f: string[]) => string, size = bytes.length): Promise<{ out: string; stats: CsvSinkStats }> {
  let out = '';
  const sinkOut = new Writable({ write: (c, _e, cb) => ((out += String(c)), cb()) });
  const stats = emptySinkStats();
  const sink = new CsvRecordSink('member', fieldCount, onRecord, sinkOut, stats);
  for (let i = 0; i < bytes.length; i += size) {
    const ok = sink.write(bytes.subarray(i, i + size));
    if (!ok) await new Promise((r) => sink.once('drain', r));
  }
  await new Promise<void>((resolve, reject) => sink.end((e?: Error | null) => (e ? reject(e) : resolve())));
  return { out, stats };
}

const fields = (f: string[]) => JSON.stringify(f) + '\n';

describe('golden transforms', () => {
  const cases: [string, CnpjRelation][] = [['estabelecimentos', ESTABELECIMENTOS], ['empresas', EMPRESAS], ['socios', SOCIOS]];
  for (const [name, rel] of cases) {
    it(`${name}: source records → COPY lines`, async () => {
      const input = fs.readFileSync(path.join(GOLDEN, `${name}.in.csv`));
      const counts: TransformCounts = emptyCounts();
      const build = () => lineBuilder(rel, { snapshotId: 7, latestDate: '2026-10-31', counts: emptyCounts() });
      const builder = lineBuilder(rel, { snapshotId: 7, latestDate: '2026-10-31', counts });
      const whole = await readAll(input, rel.fieldCount, builder);
      builder.flush();
      const out = whole.out + `-- counts ${JSON.stringify(counts)}\n`;
      const file = path.join(GOLDEN, `${name}.out.copy`);
      if (process.env.UPDATE_GOLDEN) fs.writeFileSync(file, out);
      expect(out).toBe(fs.readFileSync(file, 'utf8'));
      for (const size of [1, 3, 17, 64]) expect((await readAll(input, rel.fieldCount, build(), size)).out, `chunks of ${size}`).toBe(whole.out);
    });
  }
});

describe('record reader', () => {
  const latin1 = (s: string) => Buffer.from(s, 'latin1');

  it('agrees with csv-parse on quoting, doubled quotes, delimiters and line breaks inside quotes, CRLF', async () => {
    const text = '"a";"b;c";"d""e"\r\n"";"x\ny";"ÇÃÉ"\r\n"1";"2";"3"';
    const ref = parse(text, { delimiter: ';' }) as string[][];
    for (const size of [1, 2, 5, 100]) {
      const { out, stats } = await readAll(latin1(text), 3, fields, size);
      expect(out.trim().split('\n').map((l) => JSON.parse(l))).toEqual(ref);
      expect(stats.records).toBe(3);
    }
  });

  it('counts records with the wrong field count, with their record numbers, and drops them from the output', async () => {
    const { out, stats } = await readAll(latin1('"a";"b"\n"a"\n"a";"b";"c"\n"x";"y"\n'), 2, fields, 4);
    expect(out.trim().split('\n')).toEqual(['["a","b"]', '["x","y"]']);
    expect(stats.malformed).toBe(2);
    expect(stats.malformedSamples).toEqual([{ member: 'member', record: 2, fields: 1 }, { member: 'member', record: 3, fields: 3 }]);
  });

  it('keeps a quote inside a quoted field as text (Receita writes them unescaped) and counts it', async () => {
    const { out, stats } = await readAll(latin1('"1";"BAR "DO ZE" LTDA";"2"\n'), 3, fields, 3);
    expect(JSON.parse(out)).toEqual(['1', 'BAR "DO ZE" LTDA', '2']);
    expect(stats.strayQuotes).toBe(2);
  });

  it('a name ending in an unescaped quoted nickname ("BAR "DO ZE"") is read, not dropped as malformed', async () => {
    // Read as a doubled quote, the closing quote swallowed the next field: the record had one field too few.
    const text = '"1";"BAR "DO ZE"";"2"\r\n"2";"""O BARATEIRO""";"3"\n"3";"LANCHES "DA MARIA"""\n"4";"x";"y"\n';
    for (const size of [1, 3, 7, 100]) {
      const { out, stats } = await readAll(latin1(text), 3, fields, size);
      expect(out.trim().split('\n').map((l) => JSON.parse(l)), `chunks of ${size}`).toEqual([['1', 'BAR "DO ZE"', '2'], ['2', '"O BARATEIRO"', '3'], ['4', 'x', 'y']]);
      // A record that no reading fits is still counted (record 3 has two fields either way).
      expect(stats.malformedSamples).toEqual([{ member: 'member', record: 3, fields: 2 }]);
    }
    // RFC doubled quotes before a delimiter inside a field keep their meaning when the count fits.
    const { out } = await readAll(latin1('"a";"he said ""hi"";bye";"c"\n'), 3, fields);
    expect(JSON.parse(out)).toEqual(['a', 'he said "hi";bye', 'c']);
  });

  it('reads unquoted fields and a last record without a line break', async () => {
    const { out } = await readAll(latin1('1;abc;\n2;"q";x'), 3, fields, 2);
    expect(out.trim().split('\n').map((l) => JSON.parse(l))).toEqual([['1', 'abc', ''], ['2', 'q', 'x']]);
  });
});

describe('field rules', () => {
  it('dates: placeholders NULL, impossible and implausible dates NULL with the raw text', () => {
    const c = emptyCounts();
    expect(parseDate('20260131', '2026-10-31', 'd', c)).toEqual({ value: '2026-01-31' });
    expect(parseDate('00000000', '2026-10-31', 'd', c)).toEqual({ value: null });
    expect(parseDate('0', '2026-10-31', 'd', c)).toEqual({ value: null });
    expect(parseDate('20260230', '2026-10-31', 'd', c)).toEqual({ value: null, raw: '20260230' });
    expect(parseDate('02020101', '2026-10-31', 'd', c)).toEqual({ value: null, raw: '02020101' });
    expect(parseDate('41000101', '2026-10-31', 'd', c)).toEqual({ value: null, raw: '41000101' });
    expect(c.datePlaceholders.d).toBe(2);
    expect(c.dateUnparsed.d).toBe(1);
    expect(c.dateImplausible.d).toBe(2);
  });

  it('capital social: dots only as thousands separators; a decimal point (1000.50) is unparsed, not 100050', () => {
    const c = emptyCounts();
    expect(parseMoney('1.000,00', 'capital_social', c)).toEqual({ value: '1000.00' });
    expect(parseMoney('1000,00', 'capital_social', c)).toEqual({ value: '1000.00' });
    expect(parseMoney('1.234.567,8', 'capital_social', c)).toEqual({ value: '1234567.8' });
    expect(parseMoney('1.000', 'capital_social', c)).toEqual({ value: '1000' });
    expect(c.unparsed.capital_social).toBeUndefined();
    for (const s of ['1000.50', '10.00', '1.5', '12.3456,00', '1.00.000,00']) expect(parseMoney(s, 'capital_social', c), s).toEqual({ value: null, raw: s });
    expect(c.unparsed.capital_social).toBe(5);
  });

  it('cuts a trailing CPF off a legal name only when it is a separate 11-digit run', () => {
    expect(stripCpfFromName('RAMIRO ROBERTO PERES DA SILVA 34749473898')).toEqual({ name: 'RAMIRO ROBERTO PERES DA SILVA', cpfMasked: '***494738**' });
    expect(stripCpfFromName('JOSE SILVA 347.494.738-98')).toEqual({ name: 'JOSE SILVA', cpfMasked: '***494738**' });
    expect(stripCpfFromName('41.330.504 DAIANE LONARA')).toEqual({ name: '41.330.504 DAIANE LONARA', cpfMasked: null });
    expect(stripCpfFromName('EMPRESA 123456789012')).toEqual({ name: 'EMPRESA 123456789012', cpfMasked: null });
    expect(stripCpfFromName('34749473898')).toEqual({ name: '34749473898', cpfMasked: null });
  });

  it('name fields: a trailing CPF is cut, any other CPF-looking run masked; CNPJs, roots and phone-length runs of other sizes kept', () => {
    expect(cleanName('RAMIRO ROBERTO PERES DA SILVA 34749473898')).toEqual({ name: 'RAMIRO ROBERTO PERES DA SILVA', cut: '***494738**', found: 1 });
    expect(cleanName('JOSE SILVA12345678909')).toEqual({ name: 'JOSE SILVA', cut: '***456789**', found: 1 });
    expect(cleanName('12345678909 JOSE SILVA')).toEqual({ name: '***.456.789-** JOSE SILVA', cut: null, found: 1 });
    expect(cleanName('JOSE 123.456.789-09 SILVA')).toEqual({ name: 'JOSE ***.456.789-** SILVA', cut: null, found: 1 });
    expect(cleanName('34749473898')).toEqual({ name: '***.494.738-**', cut: null, found: 1 });
    expect(cleanName('A 11111111111 B 22222222222')).toEqual({ name: 'A ***.111.111-** B', cut: '***222222**', found: 2 });
    for (const kept of ['41.330.504 DAIANE LONARA', 'EMPRESA 123456789012', 'FILIAL 13.810.056/0001-53', 'LOJA 2', 'TEL 3054-4064', 'EMPRESA 12345678901234']) {
      expect(cleanName(kept), kept).toEqual({ name: kept, cut: null, found: 0 });
    }
  });

  it('partner keys tell apart partners sharing a masked CPF and ignore accents, case and blanks of the name', () => {
    const base = { cnpj_basico: '12ABC345', identificador_de_socio: '2', documento: '***123456**', nome: 'MARIA DA SILVA', qualificacao: '49', data_entrada: '20260715' };
    expect(partnerKey(base)).not.toBe(partnerKey({ ...base, nome: 'MARIO DA SILVA' }));
    expect(partnerKey(base)).not.toBe(partnerKey({ ...base, qualificacao: '22' }));
    expect(partnerKey(base)).toBe(partnerKey({ ...base, nome: ' Maria  da Sílva ' }));
    expect(partnerKey(base)).toMatch(/^[0-9a-f]{32}$/);
  });
});
