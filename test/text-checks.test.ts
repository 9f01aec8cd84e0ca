// The engine's text check on tables of its own: rows per text column holding U+FFFD or
// double-encoded text (Latin-1 and CP1252 readings of UTF-8), jsonb included, examples
// capped and CPF-masked, clean text (Portuguese accents, symbols) never flagged.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkSnapshotText, measureText, mergeTextFailures } from '../src/etl/text-checks.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`CREATE TABLE snap.texto__s1 (id int, nome text, sigla varchar(4), extra jsonb, n double precision)`);
});
afterAll(() => db.drop());

/** `s` as UTF-8 bytes read as Latin-1 (or as CP1252 for the 0x80–0x9F bytes). */
const latin1Reading = (s: string) => Buffer.from(s, 'utf8').toString('latin1');
const CP1252: Record<number, string> = { 0x80: '€', 0x83: 'ƒ', 0x87: '‡', 0x89: '‰', 0x93: '“', 0x94: '”', 0x99: '™', 0x9a: 'š' };
const cp1252Reading = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => CP1252[b] ?? String.fromCharCode(b)).join('');

describe('checkSnapshotText', () => {
  test('clean Portuguese text, symbols and empty tables pass', async () => {
    const clean = ['Plácido de Castro', 'FAMÍLIA Conceição', 'São João d’Aliança', 'Nº 12 — 3ª gleba', 'Área: 12,5 m² (±1%)', 'AÇÃO', 'Ônibus à noite'];
    for (const [i, nome] of clean.entries()) await db.pool.query(`INSERT INTO snap.texto__s1 (id, nome) VALUES ($1, $2)`, [i, nome]);
    const r = await checkSnapshotText(db.pool, ['snap.texto__s1', 'snap.nao_existe__s1']);
    expect(r).toEqual({ scanned: { 'snap.texto__s1': 3 }, findings: [], failures: [], notes: [] });
  });

  test('counts rows per column, jsonb included, and keeps up to 5 masked examples', async () => {
    const bad = [
      latin1Reading('Plácido de Castro'), // PlÃ¡cido
      latin1Reading('FAMÍLIA'), // FAMÃ\u008dLIA
      cp1252Reading('AÇÃO'), // AÃ‡ÃƒO
      cp1252Reading('“Fazenda”'), // â€œFazendaâ€\u009d
      latin1Reading('à venda'), // Ã\u00a0 venda
      latin1Reading('Goiânia 529.982.247-25'),
    ];
    for (const [i, nome] of bad.entries()) await db.pool.query(`INSERT INTO snap.texto__s1 (id, nome) VALUES ($1, $2)`, [100 + i, nome]);
    await db.pool.query(`INSERT INTO snap.texto__s1 (id, sigla, extra) VALUES (200, 'S\uFFFDo', '{"obs": "Crian\uFFFDa"}'), (201, 'S\uFFFDo', null)`);

    const r = await checkSnapshotText(db.pool, ['snap.texto__s1']);
    expect(r.findings.map(({ column, replacement, double_encoded }) => ({ column, replacement, double_encoded }))).toEqual([
      { column: 'nome', replacement: 0, double_encoded: bad.length },
      { column: 'sigla', replacement: 2, double_encoded: 0 },
      { column: 'extra', replacement: 1, double_encoded: 0 },
    ]);
    const nome = r.findings[0];
    expect(nome.examples).toHaveLength(5);
    expect(nome.examples.every((e) => bad.map((b) => b.replace('529.982.247-25', '***.982.247-**')).includes(e))).toBe(true);
    expect(JSON.stringify(r)).not.toContain('529.982.247-25');
    expect(r.findings[1].examples).toEqual(['S\uFFFDo']);
    expect(r.failures.map((f) => [f.rule, f.value])).toEqual([['replacement_characters', 3], ['double_encoding', bad.length]]);
    expect(r.failures[1].message).toMatch(/^6 values look double-encoded .*: snap\.texto__s1\.nome 6 \(e\.g\. "/);
  });

  test('C1 controls: a few stray bytes are kept and noted, more than 0.1 % of a table blocks', async () => {
    await db.pool.query(`CREATE TABLE snap.texto__s2 AS SELECT i AS id, 'Fazenda Água ' || i AS nome FROM generate_series(1, 3000) i`);
    // CP1252 leaves 0x81 undefined: read as Windows-1252 it stays U+0081 (stray bytes in the source).
    await db.pool.query(`UPDATE snap.texto__s2 SET nome = 'Fazenda' || chr(129) || ' Água ' || id WHERE id IN (7, 8, 9)`);
    const few = await checkSnapshotText(db.pool, ['snap.texto__s2']);
    expect(few.findings.map(({ column, control, rows }) => ({ column, control, rows }))).toEqual([{ column: 'nome', control: 3, rows: 3000 }]);
    expect(few.failures).toEqual([]);
    expect(few.notes).toHaveLength(1);
    expect(few.notes[0]).toMatch(/C1 control characters .*kept as the source wrote them.*snap\.texto__s2\.nome 3/);

    await db.pool.query(`UPDATE snap.texto__s2 SET nome = 'Olho d' || chr(146) || 'Água ' || id WHERE id <= 40`);
    const many = await checkSnapshotText(db.pool, ['snap.texto__s2']);
    // The value is what the threshold holds: the share of the table's rows (was the count, 40, against a share).
    expect(many.failures.map((f) => [f.rule, f.value, f.threshold])).toEqual([['control_characters', 40 / 3000, 0.001]]);
    expect(many.failures[0].message).toMatch(/snap\.texto__s2\.nome 40 /);
    expect(measureText(many).find((r) => r.rule === 'control_characters')).toEqual({ rule: 'control_characters', value: 40 / 3000, threshold: 0.001, compare: 'at_most', passed: false });
    expect(measureText(few).find((r) => r.rule === 'control_characters')).toEqual({ rule: 'control_characters', value: 3 / 3000, threshold: 0.001, compare: 'at_most', passed: true });
    expect(many.notes).toEqual([]);
  });

  test('NULs (loaded as U+2400 by both COPY encoders) count with the C1 controls: a few are a note, more than 0.1 % of a table blocks; never U+FFFD', async () => {
    await db.pool.query(`CREATE TABLE snap.texto__s3 AS SELECT i AS id, 'Fazenda ' || i AS nome, NULL::jsonb AS extra FROM generate_series(1, 3000) i`);
    await db.pool.query(`UPDATE snap.texto__s3 SET nome = '57' || U&'\\2400' || '48' WHERE id = 5`);
    await db.pool.query(`UPDATE snap.texto__s3 SET extra = jsonb_build_object('obs', 'Por' || U&'\\2400' || 'correio') WHERE id = 6`);
    const few = await checkSnapshotText(db.pool, ['snap.texto__s3']);
    expect(few.findings.map(({ column, control, replacement }) => ({ column, control, replacement }))).toEqual([
      { column: 'nome', control: 1, replacement: 0 },
      { column: 'extra', control: 1, replacement: 0 },
    ]);
    expect(few.failures).toEqual([]);
    expect(few.notes[0]).toMatch(/or NULs \(as ␀\), kept as the source wrote them.*snap\.texto__s3\.nome 1 \(e\.g\. "57␀48"\)/);
    await db.pool.query(`UPDATE snap.texto__s3 SET nome = 'x' || U&'\\2400' WHERE id <= 10`);
    const many = await checkSnapshotText(db.pool, ['snap.texto__s3']);
    expect(many.failures.map((f) => f.rule)).toEqual(['control_characters']);
    expect(many.failures[0].message).toMatch(/or NULs .*snap\.texto__s3\.nome 10 /);
  });

  test("a rule the pipeline already reported keeps the pipeline's message", () => {
    const pipeline = [{ rule: 'replacement_characters', message: '21 U+FFFD in the source text', value: 21 }];
    const text = { scanned: {}, findings: [], notes: [], failures: [{ rule: 'replacement_characters', message: 'x', value: 3 }, { rule: 'double_encoding', message: 'y', value: 1 }] };
    expect(mergeTextFailures(pipeline, text)).toEqual([pipeline[0], text.failures[1]]);
  });
});
