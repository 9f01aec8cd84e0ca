// The one reader of delimited text (every CSV of every pipeline goes through here).
//
// Format detection (detectCsvFormat), from the bytes, never from the file name:
//   encoding   a BOM first (UTF-8, UTF-16LE, UTF-16BE); without one, UTF-16 by its NUL
//              pattern (ASCII text in UTF-16 has a NUL in every other byte); otherwise the
//              first stretch holding a non-ASCII byte decides: valid UTF-8 → UTF-8, else
//              latin1 (ISO-8859-1). A file of pure ASCII is UTF-8.
//   delimiter  the most frequent of `;`, `,`, tab and `|` outside quotes in the header line
//              (ties go to the expected one, then in that order).
//
// Records are split by hand because the general parser (csv-parse) cost 7x a plain split on
// ZARC's 3.3 M-row files: lines without a quote take a plain split; lines with quotes get an
// RFC 4180 scan (quoted fields may hold delimiters, doubled quotes and line breaks, and may
// span read chunks; a quote inside an unquoted field is kept as text). A leading BOM is dropped.
// Lines end in LF or CRLF, or in CR alone when the file's first line end is one (old Mac saves).
import fs from 'node:fs';
import { isAscii, isUtf8 } from 'node:buffer';
import { StringDecoder } from 'node:string_decoder';
import { readHead } from './archive.ts';
import { c1ToWindows1252 } from './read/windows-1252.ts';

export interface CsvRecord {
  fields: string[];
  /** 1-based line number where the record starts. */
  line: number;
  /** Physical lines the record spans (given when asked: readCsvRecords' `spans`). */
  lines?: number;
}

export type CsvEncoding = 'utf8' | 'latin1' | 'utf16le' | 'utf16be';

export interface CsvFormat {
  encoding: CsvEncoding;
  /** How the encoding was decided: 'bom', 'nul_pattern', 'utf8_valid', 'not_utf8', 'ascii' or 'given'. */
  encodingRule: 'bom' | 'nul_pattern' | 'utf8_valid' | 'not_utf8' | 'ascii' | 'given';
  bom: boolean;
  delimiter: string;
  /** How the delimiter was decided: 'header' (counted in the header line), 'expected' (no candidate in it) or 'given'. */
  delimiterRule: 'header' | 'expected' | 'given';
}

export class CsvSyntaxError extends Error {}

/** Delimiters looked for in a header line. */
export const CSV_DELIMITERS = [';', ',', '\t', '|'] as const;

const ENCODING_NAMES: Record<CsvEncoding, string> = { utf8: 'UTF-8', latin1: 'ISO-8859-1', utf16le: 'UTF-16LE', utf16be: 'UTF-16BE' };
const DELIMITER_NAMES: Record<string, string> = { ';': "';'", ',': "','", '\t': 'tab', '|': "'|'" };

/** 'UTF-16LE (BOM), delimiter ','' — what a message says about a detected format. */
export function describeCsvFormat(f: CsvFormat): string {
  const how = { bom: 'BOM', nul_pattern: 'no BOM, NUL byte pattern', utf8_valid: 'valid UTF-8', not_utf8: 'not valid UTF-8', ascii: 'ASCII only', given: 'given' }[f.encodingRule];
  return `${ENCODING_NAMES[f.encoding]} (${how}), delimiter ${DELIMITER_NAMES[f.delimiter] ?? JSON.stringify(f.delimiter)}`;
}

/** The encoding's usual name (UTF-8, ISO-8859-1, UTF-16LE, UTF-16BE) for reports. */
export const csvEncodingName = (e: CsvEncoding) => ENCODING_NAMES[e];

/** Bytes → text in any of the supported encodings, across chunk boundaries. */
class ChunkDecoder {
  private dec: StringDecoder;
  private carry: Buffer | null = null;
  constructor(private enc: CsvEncoding) {
    this.dec = new StringDecoder(enc === 'utf16be' ? 'utf16le' : enc);
  }
  write(chunk: Buffer): string {
    // latin1 bytes 0x80–0x9F are Windows-1252 punctuation, not C1 controls (read/windows-1252.ts).
    if (this.enc === 'latin1') return c1ToWindows1252(this.dec.write(chunk));
    if (this.enc !== 'utf16be') return this.dec.write(chunk);
    // UTF-16BE: swap each byte pair and decode as little-endian; an odd byte waits for the next chunk.
    let buf = this.carry ? Buffer.concat([this.carry, chunk]) : chunk;
    this.carry = null;
    if (buf.length % 2) {
      this.carry = buf.subarray(buf.length - 1);
      buf = buf.subarray(0, buf.length - 1);
    }
    return this.dec.write(Buffer.from(buf).swap16());
  }
  end(): string {
    return this.dec.end();
  }
}

/** The length of `buf` without a UTF-8 sequence cut at its end (so a chunk can be validated alone). */
function completeUtf8Length(buf: Buffer): number {
  for (let back = 1; back <= Math.min(3, buf.length); back++) {
    const b = buf[buf.length - back];
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for the lead
    if (b < 0x80) return buf.length;
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
    return need > back ? buf.length - back : buf.length;
  }
  return buf.length;
}

/** Encoding of a file without a BOM, from its bytes. */
async function sniffEncoding(file: string, head: Buffer): Promise<{ encoding: CsvEncoding; rule: CsvFormat['encodingRule'] }> {
  // UTF-16 without a BOM: most ASCII characters leave a NUL in one byte of each pair.
  const n = Math.min(head.length, 4096) & ~1;
  let evenNul = 0;
  let oddNul = 0;
  for (let i = 0; i < n; i += 2) {
    if (head[i] === 0) evenNul++;
    if (head[i + 1] === 0) oddNul++;
  }
  const pairs = n / 2;
  if (pairs >= 2 && oddNul > pairs * 0.3 && evenNul < pairs * 0.05) return { encoding: 'utf16le', rule: 'nul_pattern' };
  if (pairs >= 2 && evenNul > pairs * 0.3 && oddNul < pairs * 0.05) return { encoding: 'utf16be', rule: 'nul_pattern' };
  // The first chunk holding a non-ASCII byte decides between UTF-8 and latin1.
  // (Chunks before it are pure ASCII, so it starts on a character boundary.) A sequence cut at
  // the chunk's end waits for the next chunk: alone, the ASCII before it proved nothing (a
  // latin1 'É' ending the first MiB read as UTF-8 turned every accent of the file into U+FFFD).
  let carry: Buffer | null = null;
  for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 20 })) {
    const buf: Buffer = carry ? Buffer.concat([carry, chunk as Buffer]) : (chunk as Buffer);
    carry = null;
    if (isAscii(buf)) continue;
    const whole = completeUtf8Length(buf);
    if (whole < buf.length && isAscii(buf.subarray(0, whole))) {
      carry = buf.subarray(whole);
      continue;
    }
    return isUtf8(buf.subarray(0, whole)) ? { encoding: 'utf8', rule: 'utf8_valid' } : { encoding: 'latin1', rule: 'not_utf8' };
  }
  // A UTF-8 sequence cut by the end of the file is no UTF-8.
  if (carry) return { encoding: 'latin1', rule: 'not_utf8' };
  return { encoding: 'utf8', rule: 'ascii' };
}

/** The first line of a text (a quoted field may hold line breaks: they do not end it). */
function firstLine(text: string): string {
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    else if (c === '\n' && !quoted) return text.slice(0, i).replace(/\r$/, '');
    else if (c === '\r' && !quoted && text[i + 1] !== '\n' && i + 1 < text.length) return text.slice(0, i); // classic Mac line end
  }
  return text;
}

/** Counts each candidate delimiter outside quotes; the most frequent wins (ties: `expected`, then CSV_DELIMITERS order). */
export function detectDelimiter(header: string, expected: string): string | null {
  const counts = new Map<string, number>(CSV_DELIMITERS.map((d) => [d, 0]));
  let quoted = false;
  for (const c of header) {
    if (c === '"') quoted = !quoted;
    else if (!quoted && counts.has(c)) counts.set(c, counts.get(c)! + 1);
  }
  const order = [expected, ...CSV_DELIMITERS.filter((d) => d !== expected)].filter((d) => counts.has(d));
  let best: string | null = null;
  for (const d of order) if (counts.get(d)! > 0 && (best === null || counts.get(d)! > counts.get(best)!)) best = d;
  return best;
}

/**
 * Detects a file's encoding and delimiter (see the header of this module). `given` fixes
 * either (e.g. Receita's headerless latin1 files): then it is not detected.
 */
export async function detectCsvFormat(file: string, o: { expectedDelimiter: string; encoding?: CsvEncoding; delimiter?: string }): Promise<CsvFormat> {
  const head = await readHead(file, 1 << 16);
  let encoding: CsvEncoding;
  let encodingRule: CsvFormat['encodingRule'];
  let bom = false;
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) [encoding, encodingRule, bom] = ['utf8', 'bom', true];
  else if (head[0] === 0xff && head[1] === 0xfe) [encoding, encodingRule, bom] = ['utf16le', 'bom', true];
  else if (head[0] === 0xfe && head[1] === 0xff) [encoding, encodingRule, bom] = ['utf16be', 'bom', true];
  else ({ encoding, rule: encodingRule } = await sniffEncoding(file, head));
  if (o.encoding) [encoding, encodingRule] = [o.encoding, 'given'];
  if (o.delimiter) return { encoding, encodingRule, bom, delimiter: o.delimiter, delimiterRule: 'given' };
  const dec = new ChunkDecoder(encoding);
  const text = (dec.write(head) + dec.end()).replace(/^\uFEFF/, '');
  const found = detectDelimiter(firstLine(text), o.expectedDelimiter);
  return { encoding, encodingRule, bom, delimiter: found ?? o.expectedDelimiter, delimiterRule: found ? 'header' : 'expected' };
}

/** Parses one record starting at `pos`; returns null when the buffer ends inside it. */
function scanQuoted(buf: string, pos: number, delim: string, eof: boolean): { fields: string[]; next: number; lines: number } | null {
  const fields: string[] = [];
  let lines = 1;
  let i = pos;
  for (;;) {
    if (buf[i] === '"') {
      let value = '';
      let j = i + 1;
      for (;;) {
        const q = buf.indexOf('"', j);
        if (q < 0) {
          if (eof) throw new CsvSyntaxError('unclosed quoted field');
          return null;
        }
        value += buf.slice(j, q);
        if (buf[q + 1] === '"') {
          value += '"';
          j = q + 2;
          continue;
        }
        if (q + 1 >= buf.length && !eof) return null; // cannot tell yet whether a quote follows
        j = q + 1;
        // A quote followed by text, in a field whose text ends with a quote right before the
        // delimiter or the line end, is text: exporters that quote every field write inner
        // quotes undoubled ("BAR "DO ZE" LTDA"), which read as BAR DO ZE" LTDA" before.
        const c = buf[j];
        if (c !== undefined && c !== delim && c !== '\n' && c !== '\r') {
          let end = j;
          while (end < buf.length && buf[end] !== delim && buf[end] !== '\n') end++;
          if (end >= buf.length && !eof) return null;
          const last = buf[end - 1] === '\r' ? end - 2 : end - 1;
          if (last > q && buf[last] === '"') {
            value += buf.slice(q, last);
            j = last + 1;
          }
        }
        break;
      }
      for (let k = i; k < j; k++) if (buf.charCodeAt(k) === 10) lines++;
      // Text between the closing quote and the next delimiter is kept (relaxed quoting).
      let end = j;
      while (end < buf.length && buf[end] !== delim && buf[end] !== '\n') end++;
      if (end >= buf.length && !eof) return null;
      value += buf.slice(j, end).replace(/\r$/, '');
      fields.push(value);
      i = end;
    } else {
      let end = i;
      while (end < buf.length && buf[end] !== delim && buf[end] !== '\n') end++;
      if (end >= buf.length && !eof) return null;
      fields.push(buf.slice(i, end).replace(/\r$/, ''));
      i = end;
    }
    if (i >= buf.length) return { fields, next: i, lines };
    if (buf[i] === '\n') return { fields, next: i + 1, lines };
    i++; // delimiter
    if (i >= buf.length && !eof) return null;
    if (i >= buf.length) {
      fields.push('');
      return { fields, next: i, lines };
    }
  }
}

/**
 * Streams the records of a file in a known delimiter and encoding (detectCsvFormat finds both);
 * with `spans`, each record says how many physical lines it spans (a quote that does not close
 * where it should joins the rows up to the next quote into one record).
 */
export async function* readCsvRecords(file: string, delimiter: string, encoding: CsvEncoding, o: { spans?: boolean } = {}): AsyncGenerator<CsvRecord> {
  const stream = fs.createReadStream(file, { highWaterMark: 1 << 20 });
  const decoder = new ChunkDecoder(encoding);
  let buf = '';
  let line = 1;
  let first = true;
  const drain = function* (eof: boolean): Generator<CsvRecord> {
    let pos = 0;
    // Position of the next quote in the buffer, searched again only once passed
    // (searching per line would rescan the rest of the chunk on every line).
    let q = buf.indexOf('"');
    while (pos < buf.length) {
      const nl = buf.indexOf('\n', pos);
      if (nl < 0 && !eof) break;
      const lineEnd = nl < 0 ? buf.length : nl;
      if (q >= 0 && q < pos) q = buf.indexOf('"', pos);
      if (q < 0 || q > lineEnd) {
        let text = buf.slice(pos, lineEnd);
        if (text.endsWith('\r')) text = text.slice(0, -1);
        if (text !== '') yield o.spans ? { fields: text.split(delimiter), line, lines: 1 } : { fields: text.split(delimiter), line };
        line++;
        pos = lineEnd + 1;
        continue;
      }
      const rec = scanQuoted(buf, pos, delimiter, eof);
      if (!rec) break;
      yield o.spans ? { fields: rec.fields, line, lines: rec.lines } : { fields: rec.fields, line };
      line += rec.lines;
      pos = rec.next;
    }
    buf = buf.slice(pos);
  };
  // Classic Mac line ends (CR alone: Excel's 'CSV (Macintosh)'), told by the first line end:
  // read as LF they made the whole file one record, the header taking the rows as columns.
  // CR CR LF (CRLF written again by a text-mode file) is one line end in that mode.
  let crLines: boolean | null = null;
  let crTail = ''; // CRs ending a chunk: the next chunk may start with their LF
  const toLf = (t: string, eof: boolean): string => {
    t = crTail + t;
    let keep = t.length;
    while (!eof && keep > 0 && t.charCodeAt(keep - 1) === 13) keep--;
    crTail = t.slice(keep);
    return t.slice(0, keep).replace(/\r+\n|\r/g, '\n');
  };
  const add = (text: string, eof = false) => {
    if (crLines) text = toLf(text, eof);
    buf += first ? text.replace(/^\uFEFF/, '') : text;
    if (text !== '') first = false;
    if (crLines === null) {
      const cr = buf.indexOf('\r');
      const lf = buf.indexOf('\n');
      if (lf >= 0 && (cr < 0 || lf < cr)) crLines = false;
      else if (cr >= 0 && (cr + 1 < buf.length || eof)) crLines = buf[cr + 1] !== '\n';
      if (crLines) buf = toLf(buf, eof);
    }
  };
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      add(decoder.write(chunk));
      yield* drain(false);
    }
    add(decoder.end(), true);
    yield* drain(true);
  } catch (e) {
    if (e instanceof CsvSyntaxError) throw new CsvSyntaxError(`${e.message} (record starting at line ${line})`);
    throw e;
  } finally {
    stream.destroy();
  }
}

/** The header row and the first data row of a file, in its detected format (nothing else is read). */
export async function readCsvHead(file: string, expectedDelimiter: string): Promise<{ format: CsvFormat; header: string[]; first: string[] | null }> {
  const format = await detectCsvFormat(file, { expectedDelimiter });
  let header: string[] = [];
  let first: string[] | null = null;
  for await (const r of readCsvRecords(file, format.delimiter, format.encoding)) {
    if (!header.length) header = r.fields;
    else {
      first = r.fields;
      break;
    }
  }
  return { format, header, first };
}
