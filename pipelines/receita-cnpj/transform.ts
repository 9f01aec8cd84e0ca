// Field-level rules of the CNPJ files (SOURCES §10.2, §10.7), pure functions: a source
// record (strings, latin1 already decoded) becomes the values of one COPY line. What did
// not parse is NULL in its column, its source text kept in `extra.raw`, and counted.
import crypto from 'node:crypto';
import { KNOWN_UFS } from '../../src/config.ts';
import { cnpjCheckDigits } from '../../src/documents.ts';
import { copyField, jsonText } from '../../src/etl/copy.ts';
import type { CellKind as FieldKind, CnpjRelation } from './relations.ts';

/** Counters the transforms fill (per column unless said otherwise). */
export interface TransformCounts {
  datePlaceholders: Record<string, number>;
  dateUnparsed: Record<string, number>;
  dateImplausible: Record<string, number>;
  unparsed: Record<string, number>;
  empty: Record<string, number>;
  cepPadded: number;
  cepInvalid: number;
  capitalSentinel: Record<string, number>;
  cnpjAlphanumeric: number;
  cnpjBadCheckDigits: number;
  cpfInName: number;
  /** CPF-looking runs cut or masked, per name column (razao_social's trailing CPF included). */
  cpfInNames: Record<string, number>;
  partnersMaskedCpf: number;
  /** Codes that lost their leading zeros, left-padded (cells 'code2' and 'tom'), per column. */
  codesPadded: Record<string, number>;
  /** State siglas not written in capitals ('sp', 'Sp'), upper-cased (cell 'uf'). */
  ufLowerCase: number;
}

export const emptyCounts = (): TransformCounts => ({
  datePlaceholders: {}, dateUnparsed: {}, dateImplausible: {}, unparsed: {}, empty: {},
  cepPadded: 0, cepInvalid: 0, capitalSentinel: {}, cnpjAlphanumeric: 0, cnpjBadCheckDigits: 0, cpfInName: 0, cpfInNames: {}, partnersMaskedCpf: 0, codesPadded: {}, ufLowerCase: 0,
});

const bump = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);

/** Values Receita uses as "no value" for a date. */
const DATE_PLACEHOLDERS = new Set(['', '0', '00000000']);
/** Share capitals that are placeholders, not amounts (SOURCES §10.7: 999999999999 seen 124 times). */
export const SENTINEL_CAPITALS = new Set(['0', '0.00', '1', '1.00', '999999999', '999999999.99', '999999999999', '999999999999.00', '99999999999', '9999999999999']);

/** An establishment's uf: the 27 states, or EX abroad (SOURCES §10.2). */
const UF_OR_EX = new Set([...KNOWN_UFS, 'EX']);

/** A state sigla; 'sp' (or 'Sp') is SP (upper-cased, counted); anything else NULL with its text kept, counted. */
export function parseUf(s: string, column: string, c: TransformCounts): Cell {
  const t = s.trim();
  if (t === '' || UF_OR_EX.has(t)) return { value: t === '' ? null : t };
  const up = t.toUpperCase();
  if (UF_OR_EX.has(up)) {
    c.ufLowerCase++;
    return { value: up };
  }
  bump(c.unparsed, column);
  return { value: null, raw: s };
}

/** A TOM code: 4 digits; 1–3 digits lost their leading zeros ('643' is 0643: left-padded, counted); anything else NULL with its text kept, counted. */
export function parseTom(s: string, column: string, c: TransformCounts): Cell {
  const t = s.trim();
  if (t === '') return { value: null };
  if (/^\d{4}$/.test(t)) return { value: t };
  if (/^\d{1,3}$/.test(t)) {
    bump(c.codesPadded, column);
    return { value: t.padStart(4, '0') };
  }
  bump(c.unparsed, column);
  return { value: null, raw: s };
}

export interface Cell {
  value: string | null;
  /** The source text when it did not parse (kept in extra.raw). */
  raw?: string;
  /** A name's trailing CPF, masked (never kept in clear, so never in `raw`). */
  cut?: string | null;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** The number of 8 ASCII digits (YYYYMMDD), or -1 (a loop: called three times per establishment). */
function eightDigits(t: string): number {
  if (t.length !== 8) return -1;
  let n = 0;
  for (let i = 0; i < 8; i++) {
    const c = t.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    n = n * 10 + c;
  }
  return n;
}

/** YYYYMMDD → yyyy-mm-dd; placeholders → NULL; not a date or outside [1800-01-01, latest] → NULL with raw kept. */
export function parseDate(s: string, latest: string, column: string, c: TransformCounts): Cell {
  const t = s.trim();
  if (DATE_PLACEHOLDERS.has(t)) {
    if (t !== '') bump(c.datePlaceholders, column);
    return { value: null };
  }
  const n = eightDigits(t);
  if (n < 0) {
    bump(c.dateUnparsed, column);
    return { value: null, raw: s };
  }
  const y = Math.floor(n / 10000);
  const m = Math.floor(n / 100) % 100;
  const d = n % 100;
  if (m < 1 || m > 12 || d < 1 || d > (m === 2 && isLeap(y) ? 29 : DAYS_IN_MONTH[m - 1])) {
    bump(c.dateUnparsed, column);
    return { value: null, raw: s };
  }
  const iso = `${t.slice(0, 4)}-${t.slice(4, 6)}-${t.slice(6, 8)}`;
  if (y < 1800 || iso > latest) {
    bump(c.dateImplausible, column);
    return { value: null, raw: s };
  }
  return { value: iso };
}

/**
 * "10.000,50" → "10000.50" (decimal comma, dots are thousands separators). A dot anywhere else
 * ('1000.50') is no thousands separator: unparsed, not read as 100050.
 */
export function parseMoney(s: string, column: string, c: TransformCounts): Cell {
  const t = s.trim();
  if (t === '') return { value: null };
  const v = t.replace(/\./g, '').replace(',', '.');
  if (!/^-?\d+(\.\d+)?$/.test(v) || (t.includes('.') && !/^-?\d{1,3}(\.\d{3})+(,\d*)?$/.test(t))) {
    bump(c.unparsed, column);
    return { value: null, raw: s };
  }
  const norm = v.replace(/^(-?)0+(?=\d)/, '$1');
  if (SENTINEL_CAPITALS.has(norm) || /^9{9,}(\.0+)?$/.test(norm)) bump(c.capitalSentinel, norm);
  return { value: norm };
}

/** CEP as 8 digits; 7 digits lost their leading zero (left-padded, counted); anything else kept raw. */
export function parseCep(s: string, c: TransformCounts): Cell {
  const t = s.trim();
  if (t === '') return { value: null };
  if (/^\d{8}$/.test(t)) return { value: t };
  if (/^\d{7}$/.test(t)) {
    c.cepPadded++;
    return { value: '0' + t, raw: s };
  }
  c.cepInvalid++;
  bump(c.unparsed, 'cep');
  return { value: null, raw: s };
}

/** "7711000,8541400" → COPY text of a text[] ({7711000,8541400}); codes are text. */
export function listLiteral(s: string): string | null {
  const items = s.split(',').map((x) => x.trim()).filter(Boolean);
  if (!items.length) return null;
  return `{${items.map((x) => (/^[0-9A-Za-z]+$/.test(x) ? x : `"${x.replace(/[\\"]/g, (m) => '\\' + m)}"`)).join(',')}}`;
}

/** The full 14-character CNPJ of an establishment; alphanumeric bodies and bad check digits counted. */
export function establishmentCnpj(basico: string, ordem: string, dv: string, c: TransformCounts): string {
  const body = basico + ordem;
  const cnpj = body + dv;
  if (/[A-Z]/.test(body)) c.cnpjAlphanumeric++;
  if (!/^[0-9A-Z]{12}$/.test(body) || !/^\d{2}$/.test(dv) || cnpjCheckDigits(body) !== dv) c.cnpjBadCheckDigits++;
  return cnpj;
}

// A legal name ending with an 11-digit CPF (with or without punctuation), as MEI/EI names do.
const CPF_AT_END = /^(.*?)[\s\-–]*(\d{3})\.?(\d{3})\.?(\d{3})-?(\d{2})$/;

/** Cuts a trailing CPF off a legal name: the name without it and the CPF masked as Receita masks it (`***NNNNNN**`). */
export function stripCpfFromName(name: string): { name: string; cpfMasked: string | null } {
  const m = CPF_AT_END.exec(name);
  if (!m || !m[1] || /\d$/.test(m[1])) return { name, cpfMasked: null };
  return { name: m[1].trim(), cpfMasked: `***${m[3]}${m[4]}**` };
}

// A CPF-looking run anywhere in a name: 11 digits, CPF punctuation optional, not part of a
// longer digit run (a 14-digit CNPJ, an 8-digit CNPJ root are left alone). Letters may touch
// it: names are typed by hand ("JOSE SILVA12345678901").
const CPF_RUN = /(?<!\d)(\d{3})\.?(\d{3})\.?(\d{3})-?(\d{2})(?!\d)/g;

/**
 * The served form of a name field (razao_social, nome_fantasia, partner names): a trailing
 * CPF is cut (the MEI/EI convention "NAME 12345678901", which owners repeat in the trade
 * name), any other CPF-looking run is masked as `***.NNN.NNN-**` (a number in the middle of a
 * name is not told apart from a CPF by its check digits: an owner's typo still identifies
 * them). `cut` is the trailing CPF masked as Receita masks partners (`***NNNNNN**`), `found`
 * how many runs were cut or masked. Never the digits in clear.
 */
export function cleanName(name: string): { name: string; cut: string | null; found: number } {
  const s = stripCpfFromName(name);
  let found = s.cpfMasked ? 1 : 0;
  const masked = s.name.replace(CPF_RUN, (_m, _a, b, c) => (found++, `***.${b}.${c}-**`));
  return { name: masked, cut: s.cpfMasked, found };
}

/** The six visible digits of a masked CPF (`***123456**` → `123456`), or null. */
export function cpfMiolo(doc: string): string | null {
  const m = /^\*{3}(\d{6})\*{2}$/.exec(doc);
  return m ? m[1] : null;
}

/** Name key: accents stripped, upper case, blanks collapsed (as etl.normalize_nome). */
export const normaliseName = (s: string): string =>
  s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toUpperCase().replace(/\s+/g, ' ').trim();

/**
 * A partner's stable key inside a company: masked CPFs repeat (two partners may share the
 * six visible digits), so it hashes everything that tells partners apart.
 */
export function partnerKey(p: { cnpj_basico: string; identificador_de_socio: string; documento: string; nome: string; qualificacao: string; data_entrada: string }): string {
  return crypto
    .createHash('sha256')
    .update([p.cnpj_basico, p.identificador_de_socio, p.documento, normaliseName(p.nome), p.qualificacao, p.data_entrada].join('\u001f'))
    .digest('hex')
    .slice(0, 32);
}

/** The columns the line builder derives (cell 'derived'), in template order: between the record's fields and extra. */
const derivedColumns = (rel: CnpjRelation): string[] => rel.columns.filter((c) => c.cell === 'derived').map((c) => c.name);

/** Converts one record of a relation to its COPY line (the columns of streamColumns(rel), src/etl/shape-stream.ts: the record's fields, the derived columns, extra, snapshot_id). */
export type LineBuilder = (fields: string[]) => string;

export interface BuildContext {
  snapshotId: number;
  /** Latest plausible date (yyyy-mm-dd): the last day of the month being loaded. */
  latestDate: string;
  counts: TransformCounts;
  /** Called for each establishment's (uf, municipio). */
  onPlace?: (uf: string, municipio: string) => void;
}

function cell(kind: FieldKind, s: string, column: string, ctx: BuildContext): Cell {
  switch (kind) {
    case 'date':
      return parseDate(s, ctx.latestDate, column, ctx.counts);
    case 'money':
      return parseMoney(s, column, ctx.counts);
    case 'cep':
      return parseCep(s, ctx.counts);
    case 'list':
      return { value: listLiteral(s) };
    case 'int': {
      const t = s.trim();
      if (t === '') return { value: null };
      if (/^\d{1,4}$/.test(t)) return { value: String(Number(t)) };
      bump(ctx.counts.unparsed, column);
      return { value: null, raw: s };
    }
    case 'name': {
      const t = s.trim();
      if (t === '') return { value: null };
      const n = cleanName(t);
      if (!n.found) return { value: t };
      ctx.counts.cpfInNames[column] = (ctx.counts.cpfInNames[column] ?? 0) + n.found;
      return { value: n.name, cut: n.cut };
    }
    case 'uf':
      return parseUf(s, column, ctx.counts);
    case 'tom':
      return parseTom(s, column, ctx.counts);
    case 'code2': {
      const t = s.trim();
      if (t.length !== 1 || t < '0' || t > '9') return { value: t === '' ? null : t };
      bump(ctx.counts.codesPadded, column);
      return { value: '0' + t };
    }
    case 'doc': {
      const t = s.trim().toUpperCase();
      return { value: t === '' ? null : t };
    }
    default: {
      const t = s.trim();
      return { value: t === '' ? null : t };
    }
  }
}

/** Kinds whose value is built here from digits or a known sigla (dates, amounts, CEPs, small integers, states, TOM codes): nothing to escape for COPY. */
const SAFE_KINDS = new Set<FieldKind>(['date', 'money', 'cep', 'int', 'uf', 'tom']);

/** A relation's line builder; `flush()` adds its per-column counts (empty values) to ctx.counts. */
export type RelationLineBuilder = LineBuilder & { flush: () => void };

/** The line builder of a relation: generic cells from the declaration, then the relation's own derived columns. */
export function lineBuilder(rel: CnpjRelation, ctx: BuildContext): RelationLineBuilder {
  const kinds = rel.positional.map((f) => f.cell as FieldKind);
  const names = rel.positional.map((f) => f.name);
  const counted = rel.positional.map((f) => f.counted);
  const derivedCount = derivedColumns(rel).length;
  const safe = kinds.map((k) => SAFE_KINDS.has(k));
  // Empty values per column, counted in an array (a keyed counter per empty cell cost ~10 % of the transform).
  const empties = new Float64Array(kinds.length);
  const sid = String(ctx.snapshotId);
  const idx = (n: string) => names.indexOf(n);
  const iRazao = idx('razao_social');
  const iSocioDoc = idx('cnpj_cpf_do_socio');
  const iUf = idx('uf');
  const iMun = idx('municipio');
  const iNomeSocio = idx('nome_socio');
  const build: LineBuilder = (fields) => {
    const values: (string | null)[] = new Array(kinds.length);
    let raw: Record<string, string> | null = null;
    let cuts: (string | null | undefined)[] | null = null;
    for (let i = 0; i < kinds.length; i++) {
      const c = cell(kinds[i], fields[i], names[i], ctx);
      values[i] = c.value;
      if (c.cut) (cuts ??= [])[i] = c.cut;
      if (c.raw !== undefined) (raw ??= {})[names[i]] = c.raw;
      if (c.value === null) empties[i]++;
    }
    const derived: (string | null)[] = [];
    switch (rel.name) {
      case 'cnpj_empresas': {
        // The owner's CPF cut off the legal name (cell kind 'name'), kept masked.
        const cut = cuts?.[iRazao] ?? null;
        if (cut) ctx.counts.cpfInName++;
        derived.push(cut);
        break;
      }
      case 'cnpj_estabelecimentos': {
        derived.push(establishmentCnpj(values[0] ?? '', values[1] ?? '', values[2] ?? '', ctx.counts));
        if (ctx.onPlace && values[iMun]) ctx.onPlace(values[iUf] ?? '', values[iMun]!);
        break;
      }
      case 'cnpj_socios': {
        const doc = values[iSocioDoc] ?? '';
        // Only a person's (type 2) document is a CPF: a foreign partner's `***999999**` is a
        // placeholder, and would link every foreigner to whoever's CPF has 999999 in the middle.
        const miolo = values[1] === '2' ? cpfMiolo(doc) : null;
        if (miolo) ctx.counts.partnersMaskedCpf++;
        derived.push(
          partnerKey({
            cnpj_basico: values[0] ?? '', identificador_de_socio: values[1] ?? '', documento: doc,
            nome: fields[iNomeSocio].trim(), qualificacao: values[4] ?? '', data_entrada: fields[5].trim(),
          }),
          miolo,
        );
        break;
      }
      default:
        for (let i = 0; i < derivedCount; i++) derived.push(null);
    }
    let line = '';
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      line += (i ? '\t' : '') + (v === null ? '\\N' : safe[i] ? v : kinds[i] === 'list' ? v.replace(/\\/g, '\\\\') : copyField(v));
    }
    for (const d of derived) line += '\t' + copyField(d);
    line += '\t' + (raw ? copyField(jsonText({ raw })) : '\\N') + '\t' + sid + '\n';
    return line;
  };
  return Object.assign(build, {
    flush() {
      for (let i = 0; i < names.length; i++) {
        if (empties[i] && counted[i]) ctx.counts.empty[names[i]] = (ctx.counts.empty[names[i]] ?? 0) + empties[i];
        empties[i] = 0;
      }
    },
  });
}
