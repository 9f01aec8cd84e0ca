// The read step of a shaped source published as delimited text (ShapeSpec.read.csv), and
// the download of CSV sources. The route is told by content, not by name (IBAMA's SIFISC
// CSV, the `adm_embargo_a` shapefile zip, a zip holding the CSV): a file without the zip
// signature is text; a zip is inflated once (bounded, every CRC checked) and its shapefiles
// are the layers, else its first .csv is the text. Text goes through the one CSV reader
// (stage-csv.ts / csv-records.ts: encoding and delimiter detected, columns by header through
// the declaration's spellings) into the same staging columns as the layers, so one classify
// serves both routes. A source published as several CSV files (ZARC's seasons) goes into the
// one staging table in name order: src_seq runs on across the files and src_file says which
// file a row came from; every header is checked before any file is staged, so a drifted file
// fails the run before anything is loaded.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { ident } from '../db/pool.ts';
import { BUILD_TABLE } from '../sql.ts';
import { AgroError, ERRORS, isAgroError } from '../errors.ts';
import { maskCpfsInText } from '../privacy.ts';
import { extractZip, readHead } from './archive.ts';
import { csvEncodingName, readCsvHead, type CsvFormat } from './csv-records.ts';
import { isHttp, localPath, readingStored, type FetchedFile } from './download.ts';
import type { RunContext } from './pipeline.ts';
import type { QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import { fetchOneFile, resolveSource, sourceFolderFiles, type SourceLayout } from './source-files.ts';
import { matchHeader, normaliseHeader } from './header-match.ts';
import { headerMismatch, lineOfRow, stageCsv } from './stage-csv.ts';
import { stageLayers, type FieldSpec, type LayerStageResult, type StageResult } from './stage-vector.ts';
import { openForStreaming } from './layers.ts';
import { requiredFieldMissing } from './read/staging.ts';
import { findShapefiles, type VectorLayer } from './vector-reader.ts';

/** How a delimited-text source is read (ShapeSpec.read.csv). */
export interface CsvRead {
  /** The publisher's delimiter (another one is detected from the header). */
  delimiter: string;
  /** A row with the wrong field count: rejected and counted (facts.rejected.bad_field_count), or the file fails. */
  badRows: 'reject' | 'fail';
  /** The SRID of the text's coordinates (a CSV declares none); none for a source without geometry. */
  srid?: number;
}

/** The source of one run, by content. */
export type ContentSource = { kind: 'csv'; csv: string } | { kind: 'layers'; layers: VectorLayer[] };

/** One staged text file. */
export interface CsvStagedFile {
  name: string;
  /** Its number in read order (t.stage.src_file), from 0. */
  fileNo: number;
  /** src_seq of its first staged row: a row's record number in its file is src_seq - firstSeq + 1. */
  firstSeq: number;
  /** Well-formed rows staged. */
  rows: number;
  badRows: number;
  /** Line numbers of the first 20 rows with a wrong field count. */
  badRowSamples: number[];
  /** Rejected records spanning several lines (rows joined by a quote that does not close). */
  joinedRows?: { line: number; lines: number }[];
  /** Records of empty cells only, skipped. */
  emptyRecords?: number;
  format: CsvFormat;
  /** Header cells as matched (lower case, BOM stripped). */
  header: string[] | null;
  unknown: string[];
  missingOptional: string[];
  fingerprint: string | null;
  /** Where its rows' lines shift (stage-csv lineOfRow). */
  lineShifts: [number, number][];
  linesUnknownFrom: number | null;
}

/** What the text route adds to the read stage's result. */
export interface CsvStaged {
  /** The detected encoding as the report names it (UTF-8, ISO-8859-1, UTF-16LE, UTF-16BE; several files: each distinct one). */
  encoding: string;
  badRows: number;
  badRowSamples: number[];
  srid?: number;
  /** Every file staged, in read order. */
  files: CsvStagedFile[];
}

export type ContentStaged = StageResult & {
  layers: VectorLayer[];
  csv?: CsvStaged;
} & Partial<Pick<LayerStageResult, 'reader' | 'deleted' | 'unparsed' | 'overflowed' | 'cutAtNul' | 'ringsClosed' | 'shapesWithoutRecord'>>;

const resolved = new WeakMap<RunContext, Promise<ContentSource>>();

const isZip = async (file: string) => {
  const head = await readHead(file, 4);
  return head.length >= 4 && head.toString('latin1', 0, 2) === 'PK';
};

/**
 * The run's source by content, resolved once per run (the release date and the read stage
 * both ask; the zip is inflated once).
 */
export function sourceByContent(ctx: RunContext, file: FetchedFile, layerSrid: number): Promise<ContentSource> {
  let p = resolved.get(ctx);
  if (!p) {
    p = (async (): Promise<ContentSource> => {
      if (!(await isZip(file.path))) return { kind: 'csv', csv: file.path };
      const files = await readingStored(file.path, () => extractZip(file.path, path.join(ctx.workDir, 'source'), { limits: ctx.cfg.zip }));
      const shps = findShapefiles(files);
      if (shps.length) return { kind: 'layers', layers: shps.map((s) => openForStreaming(s, layerSrid)) };
      const csv = files.filter((f) => f.toLowerCase().endsWith('.csv')).sort()[0];
      if (csv) return { kind: 'csv', csv };
      throw new AgroError('no_layer', `${file.name} holds neither a shapefile nor a CSV`);
    })();
    resolved.set(ctx, p);
  }
  return p;
}

/** Errors of the CSV reader may quote a cell: CPFs masked (personal data). */
function scrubbed(e: unknown): unknown {
  if (!isAgroError(e)) return e instanceof Error ? new Error(maskCpfsInText(e.message)) : e;
  const prefix = `${ERRORS[e.code].message}: `;
  const detail = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  return new AgroError(e.code, maskCpfsInText(detail), e.details);
}

/** Fails (before anything is staged) when a file lacks a required column; names every missing one. */
async function checkHeaders(files: { name: string; path: string }[], fields: FieldSpec[], delimiter: string): Promise<void> {
  const heads = await Promise.all(files.map((f) => readCsvHead(f.path, delimiter)));
  files.forEach((f, i) => {
    const { header, format } = heads[i];
    const found = matchHeader(header.map(normaliseHeader), fields);
    const absent = fields.filter((s, k) => s.required && found[k] === null);
    if (!absent.length) return;
    const missing = absent.map((s) => s.name);
    const shown = missing.length > 8 ? `${missing.slice(0, 8).join(', ')} … (${missing.length} in all)` : missing.join(', ');
    // the spellings looked for are in the error's looked_for (for 36 ZARC columns the message would drown)
    throw requiredFieldMissing(`${f.name}: required columns missing: ${shown}; ${headerMismatch(f.name, format, header)}`, absent, {
      file: f.name, encoding: format.encoding, delimiter: format.delimiter,
    });
  });
}

/** Stages text files, in the order given, into one table: src_seq runs on, src_file numbers the files. */
async function stageCsvFiles(client: pg.ClientBase, table: string, files: { name: string; path: string }[], fields: FieldSpec[], o: CsvRead): Promise<ContentStaged & { csv: CsvStaged }> {
  // One file fails in its own read, at its header, before any row is staged.
  if (files.length > 1) await checkHeaders(files, fields, o.delimiter);
  await client.query(`CREATE UNLOGGED TABLE ${table} (src_seq bigint NOT NULL, src_file smallint NOT NULL DEFAULT 0, ${fields.map((f) => `${ident(f.name)} text`).join(', ')}, extra jsonb) ${BUILD_TABLE}`);
  const out: CsvStagedFile[] = [];
  let next = 1;
  for (const [fileNo, f] of files.entries()) {
    if (fileNo) await client.query(`ALTER TABLE ${table} ALTER COLUMN src_file SET DEFAULT ${fileNo}`);
    const r = await stageCsv(client, table, f.path, fields, { delimiter: o.delimiter, columns: 'header', badRows: o.badRows, append: true, firstSeq: next });
    out.push({ name: f.name, fileNo, firstSeq: next, ...r });
    next += r.rows;
  }
  const fps = [...new Set(out.map((f) => f.fingerprint ?? ''))].sort();
  const union = (lists: string[][]) => [...new Set(lists.flat())];
  return {
    rows: out.reduce((a, f) => a + f.rows, 0),
    missingOptional: union(out.map((f) => f.missingOptional)),
    unknown: union(out.map((f) => f.unknown)),
    replacementChars: 0, // counted in SQL over the staged text
    fingerprint: fps.length === 1 ? fps[0] : createHash('sha256').update(fps.join(',')).digest('hex').slice(0, 16),
    layers: [],
    csv: {
      encoding: [...new Set(out.map((f) => csvEncodingName(f.format.encoding)))].join(', '),
      badRows: out.reduce((a, f) => a + f.badRows, 0),
      // Line numbers are per file: with several files, those of the first file that has any.
      badRowSamples: out.find((f) => f.badRows)?.badRowSamples ?? [],
      srid: o.srid,
      files: out,
    },
  };
}

/**
 * Stages the source (text or layers) with the relation's staging fields; fields required only
 * of a text source are required there. Several files are text files, staged together in name order.
 */
export async function stageByContent(
  client: pg.ClientBase, ctx: RunContext, files: FetchedFile[], table: string, rel: Relation, o: { srid: number; csv: CsvRead; personalData?: boolean },
): Promise<ContentStaged> {
  try {
    const fields = rel.staging.map((f) => (rel.csvRequired.includes(f.name) ? { ...f, required: true } : f));
    if (files.length > 1) {
      const sorted = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const f of sorted) if (await isZip(f.path)) throw new AgroError('malformed_source', `${f.name}: a zip among several source files (only delimited text is read together)`);
      return await stageCsvFiles(client, table, sorted, fields, o.csv);
    }
    const source = await sourceByContent(ctx, files[0], o.srid);
    if (source.kind === 'layers') return { layers: source.layers, ...(await stageLayers(client, table, source.layers, rel.staging)) };
    return await stageCsvFiles(client, table, [{ name: files[0].name, path: source.csv }], fields, o.csv);
  } catch (e) {
    throw o.personalData ? scrubbed(e) : e;
  }
}

/** The text route's facts: its encoding and SRID, the rows with a wrong field count (rejected, with their lines). */
export function addCsvFacts(facts: QualityFacts, csv: CsvStaged): void {
  facts.encoding.name = csv.encoding;
  if (csv.srid !== undefined) facts.geometry.srid = csv.srid;
  const empty = csv.files.reduce((a, f) => a + (f.emptyRecords ?? 0), 0);
  if (empty) facts.notes.push(`${empty} CSV records of empty cells only (a spreadsheet's empty rows, ';;;') skipped`);
  if (!csv.badRows) return;
  facts.rejected.bad_field_count = csv.badRows;
  // Each file with its own lines (numbered per file; the first 20 of each).
  const lines = (f: Pick<CsvStagedFile, 'badRowSamples'>) => `lines ${f.badRowSamples.join(', ')}${f.badRowSamples.length >= 20 ? ', …' : ''}`;
  const where = csv.files.length > 1 ? csv.files.filter((f) => f.badRows).map((f) => `${f.name} ${lines(f)}`).join('; ') : lines(csv);
  facts.notes.push(`${csv.badRows} CSV rows with the wrong field count rejected (${where})`);
  const joined = csv.files.flatMap((f) => (f.joinedRows ?? []).map((j) => `${csv.files.length > 1 ? `${f.name} ` : ''}lines ${j.line}–${j.line + j.lines - 1}`));
  if (joined.length) facts.notes.push(`rows joined into one record by a quote that does not close, each line counted as a rejected row: ${joined.join(', ')}`);
}

/**
 * Example rows of a text source name their file and their record in it (header excluded, rows of
 * a wrong field count not counted): src_seq runs on across files (ZARC's seasons), so row 97 of
 * no file was the 12th record of the second. Each also carries the line its record starts on
 * (`line`, from the file's line shifts), where an editor finds it. `own`: the reasons of this input.
 */
export function placeCsvExamples(facts: QualityFacts, csv: CsvStaged, own: (reason: string) => boolean): void {
  for (const [reason, list] of Object.entries(facts.examples ?? {})) {
    if (!own(reason)) continue;
    for (const e of list) {
      if (e.source !== null || e.row === null) continue;
      const f = [...csv.files].reverse().find((x) => x.firstSeq <= e.row!);
      if (!f) continue;
      e.source = f.name;
      const line = lineOfRow(e.row, f.firstSeq, f);
      if (line !== null) e.line = line;
      e.row = e.row - f.firstSeq + 1;
    }
  }
}

/** The files a text read staged, in read order (for a pipeline's own facts). */
export function csvFiles(staged: ContentStaged | undefined): CsvStagedFile[] {
  if (!staged?.csv) throw new Error('the source was not read as delimited text');
  return staged.csv.files;
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
