// dBase (.dbf) header and field decoding with an explicit encoding, giving the same text
// values the GDAL reader hands to the staging table today (checked against it in
// test/read-paths.test.ts):
// - bytes up to the first NUL, spaces trimmed at both ends (shapelib's TRIM_DBF_WHITESPACE);
//   a NUL with text after it cuts that text off (as GDAL reads it), counted (`cutAtNul`);
// - C/L/M and unknown types: text in the layer's encoding, blank = null (L keeps '?');
// - N/F: blank or '*…' = null; a number prints as JavaScript prints it (what the GDAL
//   reader's String(double) gave); integers beyond 2^53 keep every digit (also written with
//   zero decimals); text that is
//   not a number is kept as it is and counted (`unparsed`), never guessed;
// - D: YYYYMMDD → YYYY-MM-DD, '00000000'/blank = null, anything else kept and counted.
import { AgroError } from '../../errors.ts';
import { dataView } from './data-view.ts';
import { decodeWindows1252 } from './windows-1252.ts';

export interface DbfField {
  /** Lower-cased, as the staging layer names them. */
  name: string;
  type: string;
  offset: number;
  length: number;
  decimals: number;
}

export interface DbfHeader {
  records: number;
  headerLength: number;
  recordLength: number;
  fields: DbfField[];
  /** C fields read wider than 254 bytes (their length's high byte in the decimal count). */
  widened: string[];
}

/**
 * Parses the header (the first `headerLength` bytes, which `buf` must hold). Field names are
 * decoded in the layer's encoding, as GDAL names them ('Município' in a UTF-8 DBF; read as
 * Latin-1 it was 'municã\u00adpio', a name GDAL's view of the layer did not know, and its
 * values left `extra` unseen).
 */
export function parseDbfHeader(buf: Buffer, file: string, decode: TextDecode = (b, s, t) => b.toString('latin1', s, t)): DbfHeader {
  if (buf.length < 32) throw new AgroError('malformed_source', `${file}: DBF header cut short`);
  const records = buf.readUInt32LE(4);
  const headerLength = buf.readUInt16LE(8);
  const recordLength = buf.readUInt16LE(10);
  if (buf.length < headerLength) throw new AgroError('malformed_source', `${file}: DBF header cut short`);
  const fields: DbfField[] = [];
  let offset = 1; // byte 0 of a record is the deletion flag
  for (let p = 32; p + 32 <= headerLength && buf[p] !== 0x0d; p += 32) {
    const raw = buf.subarray(p, p + 11);
    const end = raw.indexOf(0);
    const name = decode(raw, 0, end < 0 ? 11 : end).trim().toLowerCase();
    const length = buf[p + 16];
    fields.push({ name, type: String.fromCharCode(buf[p + 11]).toUpperCase(), offset, length, decimals: buf[p + 17] });
    offset += length;
  }
  if (offset > recordLength) throw new AgroError('malformed_source', `${file}: DBF fields (${offset} bytes) overrun the record length ${recordLength}`);
  uniqueFieldNames(fields.map((f) => f.name)).forEach((name, i) => (fields[i].name = name));
  return { records, headerLength, recordLength, fields, widened: widenCharFields(fields, offset, recordLength) };
}

/**
 * Clipper and FoxPro write a C field wider than 254 bytes with its length's high byte in the
 * decimal count. When the fields fall short of the record length by exactly those high bytes,
 * the fields are widened and the offsets after them moved (read at 44 of its 300 bytes, a field
 * was cut and every field after it read from the wrong bytes: GDAL's reading). Returns their names.
 */
function widenCharFields(fields: DbfField[], end: number, recordLength: number): string[] {
  const wide = fields.filter((f) => f.type === 'C' && f.decimals > 0);
  if (end === recordLength || end + wide.reduce((s, f) => s + 256 * f.decimals, 0) !== recordLength) return [];
  let offset = 1;
  for (const f of fields) {
    if (f.type === 'C' && f.decimals > 0) {
      f.length += 256 * f.decimals;
      f.decimals = 0;
    }
    f.offset = offset;
    offset += f.length;
  }
  return wide.map((f) => f.name);
}

/**
 * Lower-cased field names made unique, as both readers name a layer's fields: a name already
 * taken gets _2, _3… ('nome', 'NOME' → 'nome', 'nome_2'). A DBF may repeat a name (a writer
 * that cut two long names to the same 10 bytes, or kept both cases); keyed by name, the later
 * field's value took the earlier one's place and the earlier value was lost.
 */
export function uniqueFieldNames(names: string[]): string[] {
  const taken = new Set(names);
  const seen = new Set<string>();
  return names.map((name) => {
    if (!seen.has(name)) {
      seen.add(name);
      return name;
    }
    let k = 2;
    while (taken.has(`${name}_${k}`)) k++;
    taken.add(`${name}_${k}`);
    return `${name}_${k}`;
  });
}

export type TextDecode = (buf: Buffer, start: number, end: number) => string;

/** 'latin1' / 'utf8' when the bytes can go to PostgreSQL (UTF-8) without a JS string; else 'other'. */
export function encodingKind(encoding: string): 'latin1' | 'utf8' | 'other' {
  const e = encoding.trim().toLowerCase().replace(/[\s_]/g, '-');
  if (UTF8_NAMES.includes(e)) return 'utf8';
  if (LATIN1_NAMES.includes(e)) return 'latin1';
  return 'other';
}

const UTF8_NAMES = ['utf-8', 'utf8', '65001'];
const LATIN1_NAMES = ['iso-8859-1', 'iso8859-1', 'latin1', 'latin-1', '88591', '8859-1', 'iso-88591'];

/**
 * A decoder for a .cpg / GDAL encoding name. Latin-1 is real ISO-8859-1 (Buffer
 * 'latin1'; WHATWG's TextDecoder('latin1') is windows-1252, which GDAL's ISO-8859-1 is not).
 */
export function textDecoder(encoding: string): TextDecode {
  const e = encoding.trim().toLowerCase().replace(/[\s_]/g, '-');
  if (UTF8_NAMES.includes(e)) return (b, s, t) => b.toString('utf8', s, t);
  if (LATIN1_NAMES.includes(e)) return (b, s, t) => b.toString('latin1', s, t);
  const label = /^\d{3,4}$/.test(e) ? `windows-${e}` : e.replace(/^cp-?/, 'windows-');
  if (['windows-1252', 'ansi-1252'].includes(label)) return windows1252;
  let dec: TextDecoder;
  try {
    dec = new TextDecoder(label);
  } catch {
    throw new AgroError('malformed_source', `unknown DBF encoding '${encoding}'`);
  }
  return (b, s, t) => dec.decode(b.subarray(s, t));
}

/** Whether the streaming reader can decode this encoding (Node's TextDecoder lacks the DOS code pages, e.g. CP850). */
export function canDecode(encoding: string): boolean {
  try {
    textDecoder(encoding);
    return true;
  } catch {
    return false;
  }
}

// windows-1252 = Latin-1 except 0x80–0x9F (Node 20's TextDecoder decodes that label as Latin-1).
const windows1252: TextDecode = decodeWindows1252;

// [start, end) of the last span() (module scratch: no array per field), and whether it cut text off at a NUL.
let spanStart = 0, spanEnd = 0, spanCut = false;

// Eight spaces read as one little-endian float64 (not NaN, not zero: equal only to the same bytes).
const SPACES8 = new DataView(Buffer.alloc(8, 0x20).buffer).getFloat64(0, true);

/**
 * Sets [spanStart, spanEnd) to a field's content: up to the first NUL, spaces trimmed.
 * The space padding is skipped from the end first, eight bytes at a time, so the NUL
 * search covers the content only.
 */
/**
 * Whether a text field holds text (neither NUL nor space) after its NUL at `nul`, before `end`:
 * GDAL reads up to the NUL, so that text is lost (counted, fields.cutAtNul); NULs that only pad
 * the field are no loss. Both readers' rule (this one's span, dbf-overflow.ts for GDAL's).
 */
export function textAfterNul(b: Buffer, nul: number, end: number): boolean {
  for (let i = nul + 1; i < end; i++) if (b[i] !== 0 && b[i] !== 0x20) return true;
  return false;
}

function span(rec: Buffer, at: number, len: number): void {
  let end = at + len;
  if (len >= 16) {
    const v = dataView(rec);
    while (end - 8 >= at && v.getFloat64(end - 8, true) === SPACES8) end -= 8;
  }
  while (end > at && rec[end - 1] === 0x20) end--;
  let nul = at;
  while (nul < end && rec[nul] !== 0) nul++;
  spanCut = false;
  if (nul < end) {
    spanCut = textAfterNul(rec, nul, end);
    end = nul;
    while (end > at && rec[end - 1] === 0x20) end--;
  }
  let start = at;
  while (start < end && rec[start] === 0x20) start++;
  spanStart = start;
  spanEnd = end;
}

const TWO_53 = 2 ** 53;
/** An integer, in an N field with or without decimals ('12345678901234567.00' is a code too). */
const WHOLE = /^[+-]?\d+(\.0*)?$/;

/**
 * One field's value, reused from record to record. A text field keeps its bytes (`rec`,
 * `start`, `end`) and is decoded only when `text`/`json` is read, so a writer can copy
 * Latin-1/UTF-8 bytes straight into the COPY stream; so does a number whose bytes are
 * already its text (`plain`). Read it before the next record.
 */
export class FieldValue {
  /** Pending bytes (null when the value is already a string, a number or NULL). */
  rec: Buffer | null = null;
  start = 0;
  end = 0;
  /** The pending bytes are ASCII and are the value's text: a number as JavaScript prints it. */
  plain = false;
  unparsed = false;
  /** A numeric cell of asterisks (a writer's overflow): NULL, counted apart. */
  overflow = false;
  /** Text after a NUL in the field, cut off (GDAL reads only up to the NUL): counted. */
  cutAtNul = false;
  private str: string | null = null;
  private num: number | null = null;

  constructor(private readonly decode: TextDecode) {}

  setNull(): void {
    this.rec = this.str = this.num = null;
    this.plain = false;
  }

  setString(t: string): void {
    this.rec = this.num = null;
    this.plain = false;
    this.str = t;
  }

  setNumber(n: number): void {
    this.rec = null;
    this.plain = false;
    this.num = n;
    this.str = String(n);
  }

  setBytes(rec: Buffer, start: number, end: number, plain: boolean): void {
    this.rec = rec;
    this.start = start;
    this.end = end;
    this.plain = plain;
    this.num = null;
  }

  get text(): string | null {
    if (this.rec) {
      this.str = this.plain ? this.rec.toString('latin1', this.start, this.end) : this.decode(this.rec, this.start, this.end);
      this.rec = null;
    }
    return this.str;
  }

  /** A JSON-ready value for `extra` (numbers as numbers). */
  get json(): string | number | null {
    if (this.plain) return (this.num ??= Number(this.text));
    return this.num ?? this.text;
  }
}

/**
 * Where the text of the decimal s..e of `b` ends when JavaScript prints its number as those
 * same bytes, fraction zeros (and a bare point) dropped: '12.5000' → '12.5', '3.0' → '3';
 * -1 when that is not sure, and the number goes the slow way (Number, then String). Sure
 * for at most 15 digits (a decimal of 15 significant digits or fewer comes back from its
 * double unchanged: DBL_DIG), without '+', a leading zero, an exponent, -0, or a value
 * below 1e-6 (printed as 1e-7).
 */
function plainNumberEnd(b: Buffer, s: number, e: number): number {
  let i = s;
  if (b[i] === 0x2d) i++;
  const intStart = i;
  while (i < e && b[i] >= 0x30 && b[i] <= 0x39) i++;
  const intDigits = i - intStart;
  if (intDigits === 0 || (intDigits > 1 && b[intStart] === 0x30)) return -1;
  const zeroInt = b[intStart] === 0x30; // the integer part is "0"
  let cut = i, digits = intDigits;
  if (i < e) {
    if (b[i] !== 0x2e) return -1;
    const fracStart = ++i;
    while (i < e && b[i] >= 0x30 && b[i] <= 0x39) i++;
    if (i !== e) return -1;
    let f = e;
    while (f > fracStart && b[f - 1] === 0x30) f--;
    if (f > fracStart) {
      cut = f;
      digits += f - fracStart;
      if (zeroInt) {
        let z = fracStart;
        while (b[z] === 0x30) z++;
        if (z - fracStart >= 6) return -1;
      }
    }
  }
  if (digits > 15) return -1;
  if (zeroInt && cut === intStart + 1 && intStart > s) return -1; // -0
  return cut;
}

/** Whether s..e of `b` is a plain decimal number (what DBF N/F fields hold). */
function isDecimal(b: Buffer, s: number, e: number): boolean {
  let i = s;
  if (b[i] === 0x2b || b[i] === 0x2d) i++;
  let digits = 0;
  while (i < e && b[i] >= 0x30 && b[i] <= 0x39) i++, digits++;
  if (i < e && b[i] === 0x2e) {
    i++;
    while (i < e && b[i] >= 0x30 && b[i] <= 0x39) i++, digits++;
  }
  if (digits === 0) return false;
  if (i < e && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < e && (b[i] === 0x2b || b[i] === 0x2d)) i++;
    const e0 = i;
    while (i < e && b[i] >= 0x30 && b[i] <= 0x39) i++;
    if (i === e0) return false;
  }
  return i === e;
}

/** Decodes field `f` of the record starting at `at` in `rec` into `out`; returns whether it was unparsed. */
export function decodeField(rec: Buffer, at: number, f: DbfField, out: FieldValue): boolean {
  span(rec, at + f.offset, f.length);
  const s = spanStart, e = spanEnd;
  out.unparsed = false;
  out.overflow = false;
  out.cutAtNul = spanCut;
  if (s === e) {
    out.setNull();
    return false;
  }
  switch (f.type) {
    case 'N':
    case 'F': {
      if (rec[s] === 0x2a) { // '*': overflow marker, null for shapelib
        out.setNull();
        out.overflow = true;
        return false;
      }
      const cut = plainNumberEnd(rec, s, e);
      if (cut >= 0) {
        out.setBytes(rec, s, cut, true);
        return false;
      }
      const t = rec.toString('latin1', s, e);
      const n = isDecimal(rec, s, e) ? Number(t) : NaN;
      if (!Number.isFinite(n)) {
        out.setString(t);
        out.unparsed = true;
      } else if (Math.abs(n) >= TWO_53 && WHOLE.test(t)) out.setString(BigInt(t.replace(/\.0*$/, '')).toString());
      else out.setNumber(n);
      return out.unparsed;
    }
    case 'D': {
      const t = rec.toString('latin1', s, e);
      if (/^0+$/.test(t)) out.setNull();
      else if (/^\d{8}$/.test(t)) out.setString(`${t.slice(0, 4)}-${t.slice(4, 6)}-${t.slice(6, 8)}`);
      else {
        out.setString(t);
        out.unparsed = true;
      }
      return out.unparsed;
    }
    default:
      out.setBytes(rec, s, e, false);
      return false;
  }
}
