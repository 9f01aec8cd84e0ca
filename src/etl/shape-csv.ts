// CSV sources on the one shape (src/etl/shape.ts): the download of one or several CSV files
// (the one folder picker, src/etl/source-files.ts) and the read step that stages them into
// the run's one staging table through the one CSV reader (stage-csv.ts over csv-records.ts:
// encoding and delimiter detected, columns mapped by header through the relation's
// spellings). Several files (ZARC's seasons) go into one table in name order: src_seq runs on
// across them and src_file says which file a row came from, so that the classify, the build
// and the facts read one table. Every header is checked before any file is staged: a drifted
// file fails the run before anything is loaded.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { ident } from '../db/pool.ts';
import { AgroError, ERRORS, isAgroError } from '../errors.ts';
import { maskCpfsInText } from '../privacy.ts';
import { csvEncodingName, readCsvHead, type CsvFormat } from './csv-records.ts';
import { isHttp, localPath, type FetchedFile } from './download.ts';
import type { RunContext } from './pipeline.ts';
import type { QualityFacts } from './quality.ts';
import type { SourceRead, StagedSource } from './shape.ts';
import { fetchOneFile, resolveSource, sourceFolderFiles, type SourceLayout } from './source-files.ts';
import { headerMismatch, normaliseHeader, stageCsv } from './stage-csv.ts';
import type { FieldSpec } from './stage-vector.ts';

/** One staged file of a CSV read. */
export interface CsvStagedFile {
  name: string;
  /** Its number in read order (t.stage.src_file), from 0. */
  fileNo: number;
  /** src_seq of its first staged row: a row's record number in its file is src_seq - firstSeq + 1. */
  firstSeq: number;
  /** Well-formed rows staged. */
  rows: number;
  /** Rows with a wrong field count (not staged), and the line numbers of the first 20. */
  badRows: number;
  badRowSamples: number[];
  format: CsvFormat;
  /** Header cells as matched (lower case, BOM stripped). */
  header: string[] | null;
  unknown: string[];
  missingOptional: string[];
  fingerprint: string | null;
}

export interface CsvReadOptions {
  /** The publisher's delimiter (another one in the header line is detected). */
  delimiter: string;
  /** Personal data: CPFs in the reader's error messages are masked before they reach the ledger or a log. */
  personalData?: boolean;
}

const CSV_FILES = Symbol('csv files');
type CsvStaged = StagedSource & { [CSV_FILES]: CsvStagedFile[] };

/** The files a CSV read staged, in read order (for a pipeline's own facts). */
export function csvFiles(staged: StagedSource | undefined): CsvStagedFile[] {
  const files = (staged as CsvStaged | undefined)?.[CSV_FILES];
  if (!files) throw new Error('not staged by csvRead');
  return files;
}

const union = (lists: string[][]) => [...new Set(lists.flat())];

/** Fails (before anything is staged) when a file lacks a required column; names every missing one. */
async function checkHeaders(files: FetchedFile[], fields: FieldSpec[], delimiter: string): Promise<void> {
  const heads = await Promise.all(files.map((f) => readCsvHead(f.path, delimiter)));
  files.forEach((f, i) => {
    const { header, format } = heads[i];
    const present = new Set(header.map(normaliseHeader));
    const missing = fields.filter((s) => s.required && !s.aliases.some((a) => present.has(a))).map((s) => s.name);
    if (!missing.length) return;
    const shown = missing.length > 8 ? `${missing.slice(0, 8).join(', ')} … (${missing.length} in all)` : missing.join(', ');
    throw new AgroError('required_field_missing', `${f.name}: required columns missing: ${shown}; ${headerMismatch(f.name, format, header)}`, { file: f.name, fields: missing });
  });
}

/** Errors of the CSV reader may quote a cell: CPFs masked. */
function scrubbed(e: unknown): unknown {
  if (!isAgroError(e)) return e instanceof Error ? new Error(maskCpfsInText(e.message)) : e;
  const prefix = `${ERRORS[e.code].message}: `;
  const detail = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  return new AgroError(e.code, maskCpfsInText(detail), e.details);
}

/** The read step of a CSV source: every fetched file, in name order, into t.stage. */
export function csvRead(o: CsvReadOptions): SourceRead {
  return {
    async stage({ client, t }, fetched, fields) {
      const files = [...fetched].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      try {
        // One file fails in its own read, at its header, before any row is staged.
        if (files.length > 1) await checkHeaders(files, fields, o.delimiter);
        await client.query(`CREATE UNLOGGED TABLE ${t.stage} (src_seq bigint NOT NULL, src_file smallint NOT NULL DEFAULT 0, ${fields.map((f) => `${ident(f.name)} text`).join(', ')}, extra jsonb)`);
        const out: CsvStagedFile[] = [];
        let next = 1;
        for (const [fileNo, f] of files.entries()) {
          if (fileNo) await client.query(`ALTER TABLE ${t.stage} ALTER COLUMN src_file SET DEFAULT ${fileNo}`);
          const r = await stageCsv(client, t.stage, f.path, fields, { delimiter: o.delimiter, columns: 'header', badRows: 'reject', append: true, firstSeq: next });
          out.push({ name: f.name, fileNo, firstSeq: next, ...r });
          next += r.rows;
        }
        const fps = [...new Set(out.map((f) => f.fingerprint ?? ''))].sort();
        const staged: CsvStaged = {
          rows: out.reduce((a, f) => a + f.rows + f.badRows, 0),
          missingOptional: union(out.map((f) => f.missingOptional)),
          unknown: union(out.map((f) => f.unknown)),
          replacementChars: 0,
          fingerprint: fps.length === 1 ? fps[0] : createHash('sha256').update(fps.join(',')).digest('hex').slice(0, 16),
          layers: [],
          [CSV_FILES]: out,
        };
        return staged;
      } catch (e) {
        throw o.personalData ? scrubbed(e) : e;
      }
    },
    detail: (staged) => ({
      files: csvFiles(staged).map((f) => ({ name: f.name, rows: f.rows, bad_rows: f.badRows, bad_row_lines: f.badRowSamples, fingerprint: f.fingerprint })),
      unknown: staged.unknown,
    }),
    facts(facts: QualityFacts, staged) {
      const files = csvFiles(staged);
      facts.encoding.name = [...new Set(files.map((f) => csvEncodingName(f.format.encoding)))].join(', ');
      const bad = files.reduce((a, f) => a + f.badRows, 0);
      if (bad) facts.rejected.bad_field_count = bad;
    },
  };
}

/** Where a CSV source is: the layout of its file (or files), and what to say when none is configured. */
export interface CsvSource extends SourceLayout {
  /** A folder holds the source as several files: every one the layout accepts is loaded (else the one picked). */
  several?: boolean;
  /** Said when no source is configured (e.g. that the operator supplies it). */
  hint?: string;
}

/**
 * The download stage of a CSV source: a file, a folder (the one picker chooses its file, or
 * every file the layout accepts when the source is several files) or an http(s) URL.
 */
export async function fetchCsv(ctx: RunContext, pipeline: string, layout: CsvSource): Promise<FetchedFile[]> {
  if (!ctx.source) {
    const env = `AGRO_SOURCE_${pipeline.toUpperCase().replace(/-/g, '_')}`;
    throw new AgroError('usage', `${pipeline} has no configured source: pass --source <file, folder or URL> or set ${env}${layout.hint ? ` (${layout.hint})` : ''}`);
  }
  const local = isHttp(ctx.source) ? null : localPath(ctx.source);
  if (local && layout.several && fs.statSync(local, { throwIfNoEntry: false })?.isDirectory()) {
    const files: FetchedFile[] = [];
    for (const p of sourceFolderFiles(local, layout)) files.push(...(await fetchOneFile(ctx, p, { expect: 'csv' })));
    return files;
  }
  const { uri, name } = resolveSource(ctx.source, layout);
  return fetchOneFile(ctx, uri, { expect: 'csv', name });
}
