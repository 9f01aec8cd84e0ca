// CPF / CNPJ rules (SOURCES §1.5): the TypeScript functions of src/documents.ts and their
// SQL twins of sql/0013_car_titulares.sql must give the same answer on every input.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cnpjCheckDigits, cpfCheckDigits, displayDocument, documentHmac, documentType, isValidCnpj, isValidCpf,
  normalizeDocument, parseDocument, resolveHmacKey,
} from '../src/documents.ts';
import { DEV_HMAC_KEY, loadConfig } from '../src/config.ts';
import { formatCnpj, formatCpf, prng } from '../fixtures/_shared.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

// Published vectors: SOURCES §1.5 (Receita's Nota Técnica 49/2024 for the alphanumeric
// one) and the textbook example CPF 529.982.247-25.
const CNPJ_VECTORS: [string, string][] = [['112223330001', '81'], ['12ABC34501DE', '35']];
const CPF_VECTORS: [string, string][] = [['529982247', '25'], ['111444777', '35']];

/**
 * 1,000 documents: valid CPFs and CNPJs (numeric and alphanumeric), the same with one
 * character changed, random strings of the right and wrong lengths, lower case, punctuation,
 * blanks, repeated digits.
 */
function randomDocuments(n: number): string[] {
  const rnd = prng(49_2024); // deterministic, so a failure reproduces
  const pick = (s: string) => s[Math.floor(rnd() * s.length)];
  const str = (len: number, alphabet: string) => Array.from({ length: len }, () => pick(alphabet)).join('');
  const D = '0123456789';
  const AN = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const k = i % 10;
    let s: string;
    if (k === 0) s = str(11, D);
    else if (k === 1) { const b = str(9, D); s = b + cpfCheckDigits(b); }
    else if (k === 2) { const b = str(12, D); s = b + cnpjCheckDigits(b); }
    else if (k === 3) { const b = str(12, AN); s = b + cnpjCheckDigits(b); }
    else if (k === 4) { // a valid one with one character changed
      const b = str(12, AN);
      const v = b + cnpjCheckDigits(b);
      const at = Math.floor(rnd() * 14);
      s = v.slice(0, at) + pick(at < 12 ? AN : D) + v.slice(at + 1);
    } else if (k === 5) { const b = str(9, D); s = formatCpf(b + cpfCheckDigits(b)); }
    else if (k === 6) { const b = str(12, AN); s = ` ${formatCnpj((b + cnpjCheckDigits(b)).toLowerCase())}\u00a0`; }
    else if (k === 7) s = str(10 + Math.floor(rnd() * 6), AN);
    else if (k === 8) s = pick(D).repeat(rnd() < 0.5 ? 11 : 14);
    else s = str(14, D);
    out.push(s);
  }
  return out;
}

describe('documents (TypeScript)', () => {
  it('computes the published check digits', () => {
    for (const [body, digits] of CNPJ_VECTORS) expect(cnpjCheckDigits(body)).toBe(digits);
    for (const [body, digits] of CPF_VECTORS) expect(cpfCheckDigits(body)).toBe(digits);
    expect(() => cnpjCheckDigits('12abc34501de')).toThrow(RangeError);
    expect(() => cpfCheckDigits('12345678')).toThrow(RangeError);
  });

  it('validates, normalises and types documents', () => {
    expect(isValidCpf('529.982.247-25')).toBe(true);
    expect(isValidCpf('52998224725')).toBe(true);
    expect(isValidCpf('529.982.247-26')).toBe(false);
    expect(isValidCpf('111.111.111-11')).toBe(false); // passes the arithmetic, but is a placeholder
    expect(isValidCpf('5299822472')).toBe(false);
    expect(isValidCnpj('11.222.333/0001-81')).toBe(true);
    expect(isValidCnpj('12.abc.345/01de-35')).toBe(true);
    expect(isValidCnpj('12ABC34501DE53')).toBe(false);
    expect(isValidCnpj('12ABC34501DEA5')).toBe(false); // check digits are numeric
    expect(isValidCnpj('00000000000000')).toBe(false);
    expect(normalizeDocument(' 12.abc.345/01de-35\u00a0')).toBe('12ABC34501DE35');
    expect(parseDocument('012.345.678-90')).toEqual({ documento: '01234567890', tipo: 'cpf' });
    expect(parseDocument('12.ABC.345/01DE-35')).toEqual({ documento: '12ABC34501DE35', tipo: 'cnpj' });
    expect(parseDocument('12.ABC.345/01DE-36')).toBeNull();
    expect(documentType('11222333000181')).toBe('cnpj');
    expect(documentType('abc')).toBeNull();
  });

  it('displays CPFs masked and CNPJs formatted (contract §3)', () => {
    expect(displayDocument('52998224725')).toBe('***.982.247-**');
    expect(displayDocument('12ABC34501DE35')).toBe('12.ABC.345/01DE-35');
    expect(displayDocument('123')).toBe('***');
  });

  it('hashes documents with HMAC-SHA256 under the configured key (AGRO_HMAC_KEY, else the development key)', () => {
    expect(documentHmac('52998224725', 'k')).toBe(crypto.createHmac('sha256', 'k').update('52998224725').digest('hex'));
    expect(resolveHmacKey(loadConfig({ AGRO_HMAC_KEY: 'from-env' }))).toEqual({ key: 'from-env', source: 'env' });
    expect(resolveHmacKey(loadConfig({}))).toEqual({ key: DEV_HMAC_KEY, source: 'development' });
  });

  it('the random sample covers valid and invalid documents of both kinds', () => {
    const docs = randomDocuments(1000);
    const kinds = docs.map((d) => documentType(d));
    expect(kinds.filter((k) => k === 'cpf').length).toBeGreaterThanOrEqual(200);
    expect(kinds.filter((k) => k === 'cnpj').length).toBeGreaterThanOrEqual(300);
    expect(kinds.filter((k) => k === null).length).toBeGreaterThanOrEqual(300);
  });
});

describe('documents (SQL agrees with TypeScript)', () => {
  let db: TestDb;
  beforeAll(async () => {
    db = await testDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('computes the published check digits', async () => {
    const r = await db.pool.query(
      `SELECT etl.cnpj_dv($1) AS a, etl.cnpj_dv($2) AS b, etl.cpf_dv($3) AS c, etl.cpf_dv($4) AS d, etl.cnpj_dv('12abc34501de') AS e, etl.cpf_dv('12345678') AS f`,
      [CNPJ_VECTORS[0][0], CNPJ_VECTORS[1][0], CPF_VECTORS[0][0], CPF_VECTORS[1][0]],
    );
    expect(r.rows[0]).toEqual({ a: '81', b: '35', c: '25', d: '35', e: null, f: null });
  });

  it('agrees on 1,000 random documents: normalisation, check digits, validity, type and HMAC', async () => {
    const docs = randomDocuments(1000);
    const r = await db.pool.query(
      `SELECT d.i, etl.documento_normalizado(d.doc) AS norm, etl.cpf_ok(d.doc) AS cpf_ok, etl.cnpj_ok(d.doc) AS cnpj_ok,
              etl.documento_tipo(d.doc) AS tipo, etl.documento_hmac(etl.documento_normalizado(d.doc), 'chave') AS hmac,
              etl.cpf_dv(left(etl.documento_normalizado(d.doc), 9)) AS cpf_dv, etl.cnpj_dv(left(etl.documento_normalizado(d.doc), 12)) AS cnpj_dv
         FROM unnest($1::text[]) WITH ORDINALITY AS d(doc, i) ORDER BY d.i`,
      [docs],
    );
    expect(r.rows.length).toBe(1000);
    const fromSql = r.rows.map((x) => ({ norm: x.norm, cpf_ok: x.cpf_ok, cnpj_ok: x.cnpj_ok, tipo: x.tipo, hmac: x.hmac, cpf_dv: x.cpf_dv, cnpj_dv: x.cnpj_dv }));
    const fromTs = docs.map((d) => {
      const norm = normalizeDocument(d);
      const b9 = norm.slice(0, 9);
      const b12 = norm.slice(0, 12);
      return {
        norm,
        cpf_ok: isValidCpf(d),
        cnpj_ok: isValidCnpj(d),
        tipo: documentType(d),
        hmac: documentHmac(norm, 'chave'),
        cpf_dv: /^[0-9]{9}$/.test(b9) ? cpfCheckDigits(b9) : null,
        cnpj_dv: /^[0-9A-Z]{12}$/.test(b12) ? cnpjCheckDigits(b12) : null,
      };
    });
    for (let i = 0; i < docs.length; i++) expect({ doc: docs[i], ...fromSql[i] }).toEqual({ doc: docs[i], ...fromTs[i] });
  });

  it('SQL validity helpers treat NULL and junk as invalid', async () => {
    const r = await db.pool.query(`SELECT etl.cpf_ok(NULL) a, etl.cnpj_ok(NULL) b, etl.documento_tipo('') c, etl.cpf_ok('000.000.000-00') d, etl.cnpj_ok('ÇÇ.ABC.345/01DE-35') e`);
    expect(r.rows[0]).toEqual({ a: false, b: false, c: null, d: false, e: false });
  });
});
