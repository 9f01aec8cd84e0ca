// Streams a delimited text file into an unlogged staging table through COPY, read by the
// one CSV reader (csv-records.ts), which detects the encoding (BOM, UTF-16, UTF-8 or
// latin1) and, for header-driven files, the delimiter. Header-driven files map columns by
// name through the pipeline's alias map (sources reorder and rename columns between
// releases); a required column that is missing throws required_field_missing (the run makes
// it a gate rule: blocked) with what was detected (encoding, delimiter, the header found,
// CPFs masked). Headerless files (Receita) are positional with a strict field count. Every
// value stays text here; typing happens in SQL. Cells may be huge (IBAMA's WKT polygons
// exceed 128 KB): no record size cap.
import crypto from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { ident } from '../db/pool.ts';
import { BUILD_TABLE } from '../sql.ts';
import { copyLine, copyLines, jsonText, type CopyValue } from './copy.ts';
import { describeCsvFormat, detectCsvFormat, readCsvRecords, type CsvEncoding, type CsvFormat } from './csv-records.ts';
import { maskCpfsInText } from '../privacy.ts';
import type { FieldSpec } from './stage-vector.ts';
import { requiredFieldMissing } from './read/staging.ts';
import { matchHeader, normaliseHeader } from './header-match.ts';

export interface CsvOptions {
  /** The publisher's delimiter: header-driven files are checked for another one (`;`, `,`, tab, `|`). */
  delimiter: string;
  /** Forces an encoding (e.g. Receita's latin1); detected from the bytes when absent. */
  encoding?: CsvEncoding;
  /** 'header': map by the first row; otherwise the positional column names. */
  columns: 'header' | string[];
  /** What to do with a row whose field count is wrong: reject (count it) or fail the file. */
  badRows: 'reject' | 'fail';
  /** Appends to a table the caller created (several files into one staging table); default: creates it. */
  append?: boolean;
  /** src_seq of the first row (default 1): numbering runs on across the files of one table. */
  firstSeq?: number;
}

export interface CsvStageResult {
  rows: number;
  /**
   * Rows with a wrong field count, by line number (first 20 kept for the report). A record
   * spanning several lines counts each: a quote that does not close joins rows into it.
   */
  badRows: number;
  badRowSamples: number[];
  /** Rejected records that span several lines (first 20): where rows were joined. */
  joinedRows?: { line: number; lines: number }[];
  /** Records of delimiters only (';;;': a spreadsheet's empty rows), skipped like blank lines. */
  emptyRecords?: number;
  missingOptional: string[];
  unknown: string[];
  fingerprint: string | null;
  header: string[] | null;
  /** Encoding and delimiter the file was read with, and how each was decided. */
  format: CsvFormat;
  /**
   * Where staged rows stop being on the line their count says: [src_seq, line − row number]
   * from that row on (a record spanning lines, a rejected or empty one before it). One pair per
   * change, so a regular file keeps one; at most LINE_BREAKS (lines unknown past the last).
   */
  lineShifts: [number, number][];
  /** Rows from this src_seq on have no known line (LINE_BREAKS reached); null when all are known. */
  linesUnknownFrom: number | null;
}

/** The most line shifts a file keeps: memory stays bounded however irregular the file. */
export const LINE_BREAKS = 50_000;

/** The line a staged row's record starts on in its file, from the file's shifts; null when unknown. */
export function lineOfRow(seq: number, firstSeq: number, r: Pick<CsvStageResult, 'lineShifts' | 'linesUnknownFrom'>): number | null {
  if (r.linesUnknownFrom !== null && seq >= r.linesUnknownFrom) return null;
  let lo = 0;
  let hi = r.lineShifts.length - 1;
  let shift: number | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (r.lineShifts[mid][0] <= seq) {
      shift = r.lineShifts[mid][1];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return shift === null ? null : seq - firstSeq + 1 + shift;
}

/** Header cells as an error message shows them: at most 30, each cut at 40 characters, CPFs masked. */
function shownHeader(header: string[]): string {
  const cells = header.slice(0, 30).map((h) => JSON.stringify(h.length > 40 ? `${h.slice(0, 40)}…` : h));
  return maskCpfsInText(`[${cells.join(', ')}${header.length > 30 ? `, … (${header.length} in all)` : ''}]`);
}

/** Why a header does not map: the detected format and what the header holds. */
export function headerMismatch(file: string, format: CsvFormat, header: string[]): string {
  return `${file} read as ${describeCsvFormat(format)}; its header has ${header.length} column(s): ${shownHeader(header)}`;
}

export async function stageCsv(client: pg.ClientBase, table: string, file: string, specs: FieldSpec[], o: CsvOptions): Promise<CsvStageResult> {
  const cols = specs.map((s) => `${ident(s.name)} text`).join(', ');
  if (!o.append) await client.query(`CREATE UNLOGGED TABLE ${table} (src_seq bigint NOT NULL, ${cols}, extra jsonb) ${BUILD_TABLE}`);
  const format = await detectCsvFormat(file, { expectedDelimiter: o.delimiter, encoding: o.encoding, delimiter: o.columns === 'header' ? undefined : o.delimiter });
  const result: CsvStageResult = { rows: 0, badRows: 0, badRowSamples: [], missingOptional: [], unknown: [], fingerprint: null, header: null, format, lineShifts: [], linesUnknownFrom: null };
  let width = 0;
  let slot: (number | null)[] = []; // canonical index → source column index
  let unknownIdx: number[] = [];
  let unknownNames: string[] = [];
  let line = 0;
  let seq = (o.firstSeq ?? 1) - 1;

  const setup = (header: string[]) => {
    const names = header.map(normaliseHeader);
    width = names.length;
    const found = matchHeader(names, specs);
    const absent = specs.filter((s, k) => s.required && found[k] === null);
    if (absent.length) {
      const name = path.basename(file);
      const each = absent.map((s) => `column ${s.name} not found (looked for ${s.aliases.join(', ')})`).join(', ');
      throw requiredFieldMissing(`${each}; ${headerMismatch(name, format, header)}`, absent, { file: name, encoding: format.encoding, delimiter: format.delimiter });
    }
    slot = specs.map((_, k) => found[k] ?? null);
    result.missingOptional = specs.filter((_, k) => slot[k] === null).map((s) => s.name);
    const used = new Set(slot.filter((x): x is number => x !== null));
    unknownIdx = names.map((_, i) => i).filter((i) => !used.has(i));
    // Each value its own key in extra: a repeated name numbered ('obs#2'), an unnamed column by
    // its position ('#5'); one key for both overwrote the first value, an unnamed one was dropped.
    const seen = new Map<string, number>();
    unknownNames = unknownIdx.map((i) => {
      if (names[i] === '') return `#${i + 1}`;
      const n = (seen.get(names[i]) ?? 0) + 1;
      seen.set(names[i], n);
      return n > 1 ? `${names[i]}#${n}` : names[i];
    });
    result.unknown = unknownNames.filter((_, k) => names[unknownIdx[k]] !== '');
    result.header = names;
    result.fingerprint = crypto.createHash('sha256').update([...names].sort().join(',')).digest('hex').slice(0, 16);
  };
  if (o.columns !== 'header') setup(o.columns);

  async function* lines(): AsyncGenerator<string> {
    try {
      let headerSeen = o.columns !== 'header';
      for await (const { fields: rec, line: at, lines: spanned = 1 } of readCsvRecords(file, format.delimiter, format.encoding, { spans: true })) {
        line = at;
        if (!headerSeen) {
          headerSeen = true;
          setup(rec);
          continue;
        }
        // A record of empty cells only (a spreadsheet saves its empty rows as ';;;') is no row.
        if (rec.every((f) => f.trim() === '')) {
          result.emptyRecords = (result.emptyRecords ?? 0) + 1;
          continue;
        }
        if (rec.length !== width) {
          if (o.badRows === 'fail') throw new AgroError('malformed_source', `line ${line} has ${rec.length} fields, expected ${width}`, { line });
          result.badRows += spanned;
          if (result.badRowSamples.length < 20) result.badRowSamples.push(line);
          if (spanned > 1 && (result.joinedRows ??= []).length < 20) result.joinedRows.push({ line, lines: spanned });
          continue;
        }
        const row: CopyValue[] = [++seq];
        // The report's examples name the line a record starts on: kept as shifts, not per row.
        const shift = line - (seq - (o.firstSeq ?? 1) + 1);
        if (result.linesUnknownFrom === null && result.lineShifts.at(-1)?.[1] !== shift) {
          if (result.lineShifts.length < LINE_BREAKS) result.lineShifts.push([seq, shift]);
          else result.linesUnknownFrom = seq;
        }
        for (const i of slot) row.push(i === null ? null : rec[i]);
        let extra: Record<string, string> | null = null;
        for (let k = 0; k < unknownIdx.length; k++) {
          const v = rec[unknownIdx[k]];
          if (v !== '') (extra ??= {})[unknownNames[k]] = v;
        }
        row.push(extra ? jsonText(extra) : null);
        yield copyLine(row);
      }
    } catch (e) {
      if (e instanceof AgroError) throw e;
      throw new AgroError('malformed_source', (e as Error).message);
    }
  }
  result.rows = await copyLines(client, `${table} (src_seq, ${specs.map((s) => ident(s.name)).join(', ')}, extra)`, lines());
  return result;
}
