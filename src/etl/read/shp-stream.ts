// Streams shapefile layers into the staging table with binary COPY, without GDAL: the
// .shp and .dbf are read side by side as byte streams, each record's geometry is turned
// into WKB (shp-wkb.ts) and its attributes decoded in the layer's encoding (dbf.ts),
// and rows go out in ~1 MiB binary COPY chunks. Memory is flat (two read chunks and
// one COPY chunk) and there is no native call per feature.
//
// Same table, columns and values as stage-vector.ts's stageLayers (the GDAL reader):
// src_seq, src_layer, src_srid, one text column per canonical field, `extra` (jsonb of
// the unmapped non-empty fields) and geom (WKB, SRID 0; the layer's SRID in src_srid).
// Differences, all on values the GDAL reader damaged: integers beyond 2^53 keep every
// digit; a numeric or date field that is not one is kept as written and counted in
// `unparsed` (GDAL read it as 0 / NULL); a deleted DBF record is skipped and counted.
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { AgroError, isAgroError } from '../../errors.ts';
import { ident } from '../../db/pool.ts';
import { progress } from '../../progress.ts';
import { jsonText, writeOrWait } from '../copy.ts';
import { distrustIfDamaged } from '../download.ts';
import { layerPart } from '../layer-parts.ts';
import type { VectorLayer } from '../vector-reader.ts';
import { BinaryCopyWriter } from './binary-copy.ts';
import { byteReader, type ByteReader, type ByteSource } from './chunk-reader.ts';
import { canDecode, decodeField, encodingKind, FieldValue, parseDbfHeader, textDecoder, type DbfHeader } from './dbf.ts';
import { shapeWkb } from './shp-wkb.ts';
import { ZipEntries } from './zip-source.ts';
import { createStagingTable, mapFields, missingEverywhere, schemaFingerprint, stagingColumns, type FieldSpec, type StageResult } from './staging.ts';

export interface ShpStageResult extends StageResult {
  /** DBF records flagged deleted (skipped, as GDAL skips them). */
  deleted: number;
  /** Numeric/date values that were not numbers/dates, kept as written. */
  unparsed: number;
  /** Numeric cells of asterisks (NULL), per layer and DBF field: counted while reading, no second pass. */
  overflowed: Record<string, Record<string, number>>;
  /** Text cells cut at a NUL with text after it, per layer and DBF field (as GDAL reads them): counted while reading. */
  cutAtNul: Record<string, Record<string, number>>;
  /** Polygon rings not closed in the .shp, closed on reading (read/shp-wkb.ts). */
  ringsClosed: number;
  /** Shapes after the .dbf's last record (no attributes): not loaded, counted. */
  shapesWithoutRecord: number;
}

/** One feature of a layer as the reader hands it out (used by tests and the bench). */
export interface ShpRecord {
  /** 1-based record number in the layer. */
  index: number;
  values: { text: string | null; json: string | number | null; unparsed: boolean }[];
  wkb: Buffer | null;
}

/** A layer's two byte streams (from files, or from zip entries: zip-source.ts). */
export interface LayerSources {
  /** For messages: the .shp's name. */
  name: string;
  shp: ByteSource;
  dbf: ByteSource;
  /** Releases what the streams were opened from (a zip), once both are closed. */
  close?: () => void;
}

/** Shape types the reader builds WKB for (null, point, polyline, polygon, multipoint; plain, Z and M). */
const STREAMED_TYPES = new Set([0, 1, 3, 5, 8, 11, 13, 15, 18, 21, 23, 25, 28]);

/**
 * Whether the streaming reader can read this layer: a .shp whose header names a shape type
 * it builds (not MultiPatch) and a DBF encoding it can decode. Otherwise GDAL reads it.
 */
export function canStream(shp: string, encoding: string): boolean {
  const head = Buffer.alloc(36);
  const fd = openSync(shp, 'r');
  try {
    return canStreamHeader(head.subarray(0, readSync(fd, head, 0, 36, 0)), encoding);
  } finally {
    closeSync(fd);
  }
}

/** canStream from the first 36 bytes of the .shp, or of its .shx (the two share their header). */
export function canStreamHeader(head: Buffer, encoding: string): boolean {
  if (!canDecode(encoding) || head.length < 36 || head.readInt32BE(0) !== 9994) return false;
  return STREAMED_TYPES.has(head.readInt32LE(32));
}

/**
 * Whether the .shp's records lie one after the other in the order its .shx lists them (the
 * streaming reader reads the .shp in file order, the .shx unread). shapelib, editing in place,
 * writes a shape that grew after the last record and points the .shx to it, the old shape left
 * where it was (one that shrank stays in place, a gap after it): read in file order, the stale
 * shape was loaded for the record and the new one counted as a shape without a record. GDAL
 * reads such a layer (through the .shx). True when there is no .shx to say otherwise.
 */
export function shxInFileOrder(shp: string): boolean {
  const shx = layerPart(shp, '.shx');
  if (!shx) return true;
  const b = readFileSync(shx);
  let next = 50; // in 16-bit words: the first record follows the 100-byte header
  for (let at = 100; at + 8 <= b.length; at += 8) {
    if (b.readInt32BE(at) !== next) return false;
    next += 4 + b.readInt32BE(at + 4);
  }
  return true;
}

/** The .shp and its .dbf (extension in any case: layer-parts.ts) as files. */
export function fileSources(shp: string): LayerSources {
  const dbf = layerPart(shp, '.dbf') ?? shp.slice(0, -4) + '.dbf';
  return { name: path.basename(shp), shp: { file: shp }, dbf: { file: dbf } };
}

/**
 * A layer's byte streams: its .shp straight from the zip when layersFromZip left it there
 * (the .dbf extracted beside it), else the two files.
 */
export async function openLayerSources(layer: VectorLayer): Promise<LayerSources> {
  const z = layer.zipped;
  if (!z) return fileSources(layer.file);
  const entries = await ZipEntries.open(z.zip, z.budget);
  try {
    return { name: path.basename(z.entry), shp: entries.stream(z.entry), dbf: { file: z.dbf }, close: () => entries.close() };
  } catch (e) {
    entries.close();
    throw e;
  }
}

/**
 * Walks a layer's records in file order. `onRecord` gets the record's field values
 * (reused objects: copy what you keep) and its geometry as a WKB writer; it runs
 * synchronously between reads, so the buffers it sees stay valid during the call.
 */
export async function walkShapefile(
  files: LayerSources,
  encoding: string,
  onHeader: (dbf: DbfHeader) => void,
  onRecord: (values: FieldValue[], geom: ReturnType<typeof shapeWkb>, index: number) => void | Promise<void>,
): Promise<{ records: number; deleted: number; unparsed: number; overflowed: Record<string, number>; cutAtNul: Record<string, number>; ringsClosed: number; shapesWithoutRecord: number }> {
  const name = files.name;
  const dbfName = name.replace(/\.shp$/i, '.dbf');
  const decode = textDecoder(encoding);
  const shp = byteReader(files.shp);
  const dbf = byteReader(files.dbf);
  try {
    if (!(await shp.ensure(100)) || shp.buf.readInt32BE(0) !== 9994) throw new AgroError('malformed_source', `${name}: not a shapefile (bad .shp header)`);
    shp.pos = 100;
    if (!(await dbf.ensure(32))) throw new AgroError('malformed_source', `${name}: .dbf header cut short`);
    const headerLength = dbf.buf.readUInt16LE(8);
    await dbf.ensure(headerLength);
    const header = parseDbfHeader(dbf.buf.subarray(0, headerLength), dbfName, decode);
    dbf.pos = headerLength;
    onHeader(header);
    const values = header.fields.map(() => new FieldValue(decode));
    const overflows = header.fields.map(() => 0);
    const cuts = header.fields.map(() => 0);
    let deleted = 0, unparsed = 0, ringsClosed = 0, shpDone = false;
    for (let i = 0; i < header.records; i++) {
      // ensure() only when the bytes are not already there: an await per record costs more than its reading.
      if (dbf.available < header.recordLength && !(await dbf.ensure(header.recordLength))) throw new AgroError('malformed_source', `${dbfName}: ${header.records} records declared, ${i} present`);
      const recAt = dbf.pos;
      dbf.pos += header.recordLength;
      // GDAL reads as many features as the DBF has records; a missing shape is NULL.
      let geom: ReturnType<typeof shapeWkb> = null;
      if (!shpDone && (shp.available >= 8 || (await shp.ensure(8)))) {
        const num = shp.buf.readInt32BE(shp.pos);
        const len = shp.buf.readInt32BE(shp.pos + 4) * 2;
        if (num !== i + 1) throw new AgroError('malformed_source', `${name}: record ${i + 1} is numbered ${num} (records out of order)`);
        if (shp.available < 8 + len && !(await shp.ensure(8 + len))) throw new AgroError('malformed_source', `${name}: record ${i + 1} is cut short`);
        geom = shapeWkb(shp.buf, shp.pos + 8, len, name);
        shp.pos += 8 + len;
      } else shpDone = true;
      if (dbf.buf[recAt] === 0x2a) { // '*': deleted record
        deleted++;
        continue;
      }
      if (geom) ringsClosed += geom.ringsClosed;
      for (let f = 0; f < header.fields.length; f++) {
        if (decodeField(dbf.buf, recAt, header.fields[f], values[f])) unparsed++;
        else if (values[f].overflow) overflows[f]++;
        if (values[f].cutAtNul) cuts[f]++;
      }
      const wait = onRecord(values, geom, i + 1);
      if (wait) await wait;
    }
    // Shapes after the DBF's last record have no attributes and are not read (as GDAL reads
    // them): counted, so that a .dbf cut short against its .shp is not a silent loss.
    let shapesWithoutRecord = 0;
    while (!shpDone && (shp.available >= 8 || (await shp.ensure(8)))) {
      const len = shp.buf.readInt32BE(shp.pos + 4) * 2;
      if (shp.available < 8 + len && !(await shp.ensure(8 + len))) break;
      shp.pos += 8 + len;
      shapesWithoutRecord++;
    }
    await Promise.all([shp.drain(), dbf.drain()]);
    const overflowed: Record<string, number> = {};
    header.fields.forEach((f, i) => overflows[i] && (overflowed[f.name] = (overflowed[f.name] ?? 0) + overflows[i]));
    const cutAtNul: Record<string, number> = {};
    header.fields.forEach((f, i) => cuts[i] && (cutAtNul[f.name] = (cutAtNul[f.name] ?? 0) + cuts[i]));
    return { records: header.records, deleted, unparsed, overflowed, cutAtNul, ringsClosed, shapesWithoutRecord };
  } catch (e) {
    throw await rootCause(e, shp, dbf);
  } finally {
    await Promise.all([shp.close(), dbf.close()]);
    files.close?.();
  }
}

/**
 * Bytes that do not parse may be a damaged zip member whose CRC is only checked at its end:
 * the rest of both streams is read (each byte still inflated once), and a damaged member
 * (corrupt_archive, archive_too_large) is the error rather than what the parser saw.
 */
async function rootCause(e: unknown, ...readers: ByteReader[]): Promise<unknown> {
  if (!isAgroError(e) || e.code !== 'malformed_source') return e;
  for (const r of readers) {
    try {
      await r.drain();
    } catch (d) {
      if (isAgroError(d) && (d.code === 'corrupt_archive' || d.code === 'archive_too_large')) return d;
    }
  }
  return e;
}

/** Every record of a layer, values and WKB copied out (tests, small layers). */
export async function readShapefile(files: LayerSources, encoding: string): Promise<{ fields: string[]; records: ShpRecord[] }> {
  let fields: string[] = [];
  const records: ShpRecord[] = [];
  await walkShapefile(files, encoding, (h) => (fields = h.fields.map((f) => f.name)), (values, geom, index) => {
    let wkb: Buffer | null = null;
    if (geom) {
      wkb = Buffer.alloc(geom.size);
      geom.write(wkb, 0);
    }
    records.push({ index, values: values.map((v) => ({ text: v.text, json: v.json, unparsed: v.unparsed })), wkb });
  });
  return { fields, records };
}

/**
 * Loads every layer into `table` (created here) through binary COPY. Required fields are
 * checked on all layers before a row is written (as stageLayers does). Each layer is
 * decoded in its own `encoding` (decided by the engine's rule, e.g. from the .cpg).
 */
export async function stageShapefiles(
  client: pg.ClientBase,
  table: string,
  layers: VectorLayer[],
  specs: FieldSpec[],
  sources: (layer: VectorLayer) => LayerSources | Promise<LayerSources> = openLayerSources,
): Promise<ShpStageResult> {
  const mappings = layers.map((l) => mapFields(l, specs));
  await createStagingTable(client, table, specs);
  const columns = stagingColumns(specs);
  let seq = 0, replacementChars = 0, deleted = 0, unparsed = 0, ringsClosed = 0, shapesWithoutRecord = 0;
  const overflowed: Record<string, Record<string, number>> = {};
  const cutAtNul: Record<string, Record<string, number>> = {};
  const w = new BinaryCopyWriter();
  const nFields = columns.length;
  const stream = client.query(pgCopy.from(`COPY ${table} (${columns.map(ident).join(', ')}) FROM STDIN WITH (FORMAT binary)`));
  const done = finished(stream);
  done.catch(() => undefined); // observed below; a rejection before then is not unhandled
  // Rows go to the run's live progress line with each chunk (as the text COPY reports them).
  const p = progress();
  let reported = 0;
  const report = () => {
    p.rows(seq - reported);
    reported = seq;
  };
  // Backpressure: wait for the socket when the stream's buffer is full.
  const push = async (chunk: Buffer): Promise<void> => {
    report();
    await writeOrWait(stream, chunk);
  };
  let current: VectorLayer | null = null;
  try {
    for (let li = 0; li < layers.length; li++) {
      const layer = (current = layers[li]);
      const { index, unknown } = mappings[li];
      // For each staging column the DBF field index (-1 = NULL); unmapped fields for `extra`.
      let plan: number[] = [];
      const kind = encodingKind(layer.encoding);
      const layerName = Buffer.from(layer.name.replace(/\0/g, ''), 'utf8');
      let extras: { name: string; at: number }[] = [];
      const r = await walkShapefile(
        await sources(layer),
        layer.encoding,
        (h) => {
          const at = new Map(h.fields.map((f, i) => [f.name, i]));
          const canonAt = new Map<string, number>();
          for (const [src, canon] of index) {
            const i = at.get(src);
            if (i === undefined) throw new AgroError('malformed_source', `${layer.name}: field ${src} is not in the .dbf header`);
            canonAt.set(canon, i);
          }
          plan = specs.map((s) => canonAt.get(s.name) ?? -1);
          extras = unknown.map((u) => ({ name: u, at: at.get(u) ?? -1 })).filter((e) => e.at >= 0);
        },
        (values, geom) => {
          w.row(nFields);
          w.int8(++seq);
          w.bytes(layerName);
          w.int4(layer.srid);
          for (let c = 0; c < plan.length; c++) {
            const i = plan[c];
            const v = i < 0 ? null : values[i];
            if (v?.rec && v.plain) w.bytes(v.rec, v.start, v.end);
            else if (v?.rec && kind === 'latin1') w.latin1(v.rec, v.start, v.end);
            else if (v?.rec && kind === 'utf8') {
              if (w.utf8(v.rec, v.start, v.end)) replacementChars++;
            } else {
              const t = v ? v.text : null;
              if (t !== null && t.includes('\uFFFD')) replacementChars++;
              w.text(t);
            }
          }
          let extra: Record<string, string | number> | null = null;
          for (const e of extras) {
            const v = values[e.at].json;
            if (v !== null && v !== '') (extra ??= {})[e.name] = v;
          }
          w.jsonb(extra ? jsonText(extra) : null);
          if (geom) w.field(geom);
          else w.nullField();
          return w.full ? push(w.take()) : undefined;
        },
      );
      deleted += r.deleted;
      unparsed += r.unparsed;
      ringsClosed += r.ringsClosed;
      shapesWithoutRecord += r.shapesWithoutRecord;
      if (Object.keys(r.overflowed).length) overflowed[layer.name] = r.overflowed;
      if (Object.keys(r.cutAtNul).length) cutAtNul[layer.name] = r.cutAtNul;
    }
    w.end();
    stream.end(w.take());
    await done;
    report();
  } catch (e) {
    stream.destroy(e as Error); // sends CopyFail: nothing of this COPY is kept
    await done.catch(() => undefined);
    // A damaged member of a stored zip: the store stops trusting it (download.ts).
    if (current?.zipped) await distrustIfDamaged(current.zipped.stored, e);
    throw e;
  }
  const rows = Number(stream.rowCount ?? 0);
  const unknownAll = [...new Set(mappings.flatMap((m) => m.unknown))];
  return { rows, missingOptional: missingEverywhere(specs, mappings), unknown: unknownAll, replacementChars, fingerprint: schemaFingerprint(layers), deleted, unparsed, overflowed, cutAtNul, ringsClosed, shapesWithoutRecord };
}
