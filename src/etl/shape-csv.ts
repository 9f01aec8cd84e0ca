// The read step of a shaped source published as a delimited text OR as a zip: the route is
// told by content, not by name (IBAMA's SIFISC CSV, the `adm_embargo_a` shapefile zip, a zip
// holding the CSV). A file without the zip signature is the text; a zip is inflated once
// (bounded, every CRC checked) and its shapefiles are the layers, else its first .csv is the
// text. The text goes through the one CSV reader (stage-csv.ts / csv-records.ts: encoding
// and delimiter detected, columns by header through the declaration's spellings) into the
// same staging columns as the layers, so one classify serves both routes.
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { extractZip, readHead } from './archive.ts';
import { csvEncodingName } from './csv-records.ts';
import type { FetchedFile } from './download.ts';
import type { RunContext } from './pipeline.ts';
import type { QualityFacts } from './quality.ts';
import type { Relation } from './relation.ts';
import { stageCsv } from './stage-csv.ts';
import { stageLayers, type StageResult } from './stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from './vector-reader.ts';

/** How a delimited-text source is read (ShapeSpec.read.csv). */
export interface CsvRead {
  /** The publisher's delimiter (another one is detected from the header). */
  delimiter: string;
  /** A row with the wrong field count: rejected and counted (facts.rejected.bad_field_count), or the file fails. */
  badRows: 'reject' | 'fail';
  /** The SRID of the text's coordinates (a CSV declares none). */
  srid: number;
}

/** The source of one run, by content. */
export type ContentSource = { kind: 'csv'; csv: string } | { kind: 'layers'; layers: VectorLayer[] };

/** What the text route adds to the read stage's result. */
export interface CsvStaged {
  /** The detected encoding as the report names it (UTF-8, ISO-8859-1, UTF-16LE, UTF-16BE). */
  encoding: string;
  badRows: number;
  badRowSamples: number[];
  srid: number;
}

export type ContentStaged = StageResult & { layers: VectorLayer[]; csv?: CsvStaged };

const resolved = new WeakMap<RunContext, Promise<ContentSource>>();

/**
 * The run's source by content, resolved once per run (the release date and the read stage
 * both ask; the zip is inflated once).
 */
export function sourceByContent(ctx: RunContext, file: FetchedFile, layerSrid: number): Promise<ContentSource> {
  let p = resolved.get(ctx);
  if (!p) {
    p = (async (): Promise<ContentSource> => {
      const head = await readHead(file.path, 4);
      if (head.length < 4 || head.toString('latin1', 0, 2) !== 'PK') return { kind: 'csv', csv: file.path };
      const files = await extractZip(file.path, path.join(ctx.workDir, 'source'), { limits: ctx.cfg.zip });
      const shps = findShapefiles(files);
      if (shps.length) return { kind: 'layers', layers: shps.map((s) => openLayer(s, { srid: layerSrid })) };
      const csv = files.filter((f) => f.toLowerCase().endsWith('.csv')).sort()[0];
      if (csv) return { kind: 'csv', csv };
      throw new AgroError('no_layer', `${file.name} holds neither a shapefile nor a CSV`);
    })();
    resolved.set(ctx, p);
  }
  return p;
}

/** Stages the source (text or layers) with the relation's staging fields; fields required only of a text source are required there. */
export async function stageByContent(
  client: pg.ClientBase, ctx: RunContext, file: FetchedFile, table: string, rel: Relation, o: { srid: number; csv: CsvRead },
): Promise<ContentStaged> {
  const source = await sourceByContent(ctx, file, o.srid);
  if (source.kind === 'layers') return { layers: source.layers, ...(await stageLayers(client, table, source.layers, rel.staging)) };
  const fields = rel.staging.map((f) => (rel.csvRequired.includes(f.name) ? { ...f, required: true } : f));
  const r = await stageCsv(client, table, source.csv, fields, { delimiter: o.csv.delimiter, columns: 'header', badRows: o.csv.badRows });
  return {
    rows: r.rows,
    missingOptional: r.missingOptional,
    unknown: r.unknown,
    replacementChars: 0, // counted in SQL over the staged text
    fingerprint: r.fingerprint ?? '',
    layers: [],
    csv: { encoding: csvEncodingName(r.format.encoding), badRows: r.badRows, badRowSamples: r.badRowSamples, srid: o.csv.srid },
  };
}

/** The text route's facts: its encoding and SRID, the rows with a wrong field count (rejected, with their lines). */
export function addCsvFacts(facts: QualityFacts, csv: CsvStaged): void {
  facts.encoding.name = csv.encoding;
  facts.geometry.srid = csv.srid;
  if (!csv.badRows) return;
  facts.rejected.bad_field_count = csv.badRows;
  facts.notes.push(`${csv.badRows} CSV rows with the wrong field count rejected (lines ${csv.badRowSamples.join(', ')}${csv.badRows > csv.badRowSamples.length ? ', …' : ''})`);
}
