// CPF and CNPJ: normalisation, check digits, display and the HMAC lookup key
// (SOURCES §1.5, §1.6; contract §3). The SQL twins live in sql/0013_car_titulares.sql
// (etl.documento_normalizado, etl.cpf_dv, etl.cnpj_dv, etl.cpf_ok, etl.cnpj_ok,
// etl.documento_tipo, etl.documento_hmac); test/documents.test.ts checks that both agree.
//
// Stored form: punctuation ('.', '/', '-') and blanks removed, ASCII letters upper-cased.
// CPF = 11 digits. CNPJ = 12 characters [0-9A-Z] (alphanumeric root and branch from July
// 2026) + 2 numeric check digits. Check digits: mod 11 over each character's value
// (ASCII code − 48: '0'..'9' → 0..9, 'A' → 17 … 'Z' → 42), digit = 0 when the remainder
// is below 2, else 11 − remainder. Strings of one repeated character ('00000000000',
// '11111111111111') satisfy the arithmetic but are placeholders, not documents: rejected.
import crypto from 'node:crypto';
import type { Config } from './config.ts';
import { formatCnpj, maskCpf } from './privacy.ts';

export type DocumentType = 'cpf' | 'cnpj';

/** Characters removed by normalisation: '.', '/', '-', ASCII blanks and the no-break space. */
const STRIP = /[ \t\n\r\f\v\u00a0./-]/g;

/** The stored form of a CPF or CNPJ as written ('123.456.789-09' → '12345678909'; 'ab.c…' upper-cased). */
export function normalizeDocument(text: string): string {
  // ASCII-only upper-casing: the SQL twin (translate) does exactly the same.
  return text.replace(STRIP, '').replace(/[a-z]/g, (c) => c.toUpperCase());
}

const charValue = (c: string) => c.charCodeAt(0) - 48;

function mod11(s: string, weights: readonly number[]): number {
  let total = 0;
  for (let i = 0; i < s.length; i++) total += charValue(s[i]) * weights[i];
  const r = total % 11;
  return r < 2 ? 0 : 11 - r;
}

const CPF_W1 = [10, 9, 8, 7, 6, 5, 4, 3, 2] as const;
const CPF_W2 = [11, 10, 9, 8, 7, 6, 5, 4, 3, 2] as const;
const CNPJ_W1 = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2] as const;
const CNPJ_W2 = [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2] as const;

/** The two check digits of a CPF body of 9 digits ('529982247' → '25'). */
export function cpfCheckDigits(body9: string): string {
  if (!/^[0-9]{9}$/.test(body9)) throw new RangeError('a CPF body is 9 digits');
  const d1 = mod11(body9, CPF_W1);
  return `${d1}${mod11(body9 + d1, CPF_W2)}`;
}

/** The two check digits of a CNPJ body of 12 characters [0-9A-Z] ('112223330001' → '81', '12ABC34501DE' → '35'). */
export function cnpjCheckDigits(body12: string): string {
  if (!/^[0-9A-Z]{12}$/.test(body12)) throw new RangeError('a CNPJ body is 12 characters [0-9A-Z]');
  const d1 = mod11(body12, CNPJ_W1);
  return `${d1}${mod11(body12 + d1, CNPJ_W2)}`;
}

const oneRepeatedChar = (s: string) => /^(.)\1*$/.test(s);

/** A valid CPF, written with or without punctuation. */
export function isValidCpf(text: string): boolean {
  const d = normalizeDocument(text);
  return /^[0-9]{11}$/.test(d) && !oneRepeatedChar(d) && d.slice(9) === cpfCheckDigits(d.slice(0, 9));
}

/** A valid CNPJ (numeric or alphanumeric), written with or without punctuation. */
export function isValidCnpj(text: string): boolean {
  const d = normalizeDocument(text);
  return /^[0-9A-Z]{12}[0-9]{2}$/.test(d) && !oneRepeatedChar(d) && d.slice(12) === cnpjCheckDigits(d.slice(0, 12));
}

/** 'cpf' or 'cnpj' for a valid document, null otherwise. */
export function documentType(text: string): DocumentType | null {
  return isValidCpf(text) ? 'cpf' : isValidCnpj(text) ? 'cnpj' : null;
}

export interface ParsedDocument {
  documento: string;
  tipo: DocumentType;
}

/** The stored form and type of a valid CPF or CNPJ, or null (wrong shape or check digits). */
export function parseDocument(text: string): ParsedDocument | null {
  const documento = normalizeDocument(text);
  const tipo = documentType(documento);
  return tipo ? { documento, tipo } : null;
}

/** How the API shows a document: CPFs masked (`***.456.789-**`), CNPJs formatted (`12.345.678/0001-90`). */
export function displayDocument(documento: string, tipo: DocumentType | null = documentType(documento)): string {
  if (tipo === 'cpf') return maskCpf(documento);
  if (tipo === 'cnpj') return formatCnpj(documento);
  return '***';
}

/** HMAC-SHA256 (hex) of a document in its stored form: the equality lookup key (documento_hmac). */
export function documentHmac(documento: string, key: string): string {
  return crypto.createHmac('sha256', key).update(documento).digest('hex');
}

export interface HmacKey {
  key: string;
  source: 'env' | 'development';
}

/** The key of documento_hmac: one for every dataset, so documents match across sources. */
export function resolveHmacKey(cfg: Config): HmacKey {
  return { key: cfg.hmacKey, source: cfg.hmacKeySource };
}
