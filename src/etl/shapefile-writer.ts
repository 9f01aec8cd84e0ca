// A small streaming ESRI Shapefile writer (.shp/.shx/.dbf, plus .prj and .cpg).
//
// Used to build test fixtures and benchmark inputs, so it writes incrementally:
// every feature is encoded straight into fixed-size chunk buffers that are flushed
// with positional fd writes, and memory stays flat however many features are written.
// The three headers are written as placeholders at open and patched at close() with
// the final file lengths, bounding box and record count.
//
// Format notes (ESRI Shapefile Technical Description, July 1998; dBase III):
// - .shp: 100-byte header (file code 9994 and file length in 16-bit words big-endian,
//   version 1000, shape type and bbox little-endian), then records: record number and
//   content length (16-bit words) big-endian, then the shape little-endian.
// - Polygons: outer rings clockwise, holes counter-clockwise. The writer re-orients
//   whatever the GeoJSON gives (RFC 7946 says the opposite); a ring with zero signed
//   area (a symmetric bow-tie, a collapsed ring) is written as given. Rings are closed
//   if open; empty rings are dropped. A MultiPolygon is one record, all rings as parts.
// - .shx: the same header, then per record its offset and content length (16-bit words).
// - .dbf: dBase III header, 32-byte field descriptors, 0x0D, records with deletion
//   flag ' ', 0x1A at the end. C fields are padded with spaces and truncated at the
//   field length in bytes (never inside a UTF-8 sequence); N/F right-aligned, null ->
//   spaces; D is YYYYMMDD; L is T/F ('?' for null).
//
// Misuse (a field name over 10 bytes, a geometry of the wrong type, a value that does
// not fit its field, writing after close) throws TypeError/RangeError: these are
// programming errors of the caller, not expected failures of the catalogue in errors.ts.
import { mkdir, open as fsOpen, writeFile, type FileHandle } from 'node:fs/promises';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import yazl from 'yazl';
import type { LineString, MultiLineString, MultiPolygon, Point, Polygon, Position } from 'geojson';

export type DbfField = { name: string; type: 'C' | 'N' | 'F' | 'D' | 'L'; length: number; decimals?: number };

export type ShapeKind = 'polygon' | 'polyline' | 'point';

export type WritableGeometry = Polygon | MultiPolygon | LineString | MultiLineString | Point;

export type DbfValue = string | number | null | undefined | Date | boolean;

export interface ShapefileWriterOptions {
  /** Path without extension: '/tmp/x/GO_AREA_IMOVEL' writes .shp .shx .dbf (+ .prj, .cpg). */
  basePath: string;
  shapeType: ShapeKind;
  /** DBF fields; names at most 10 bytes (ASCII), unique case-insensitively. */
  fields: DbfField[];
  /** DBF byte encoding; latin1 = ISO-8859-1 (characters outside it are written as '?'). */
  encoding: 'utf8' | 'latin1';
  /** Contents of the .cpg ('UTF-8', 'ISO-8859-1'); null or omitted = no .cpg file. */
  cpg?: string | null;
  /** WKT of the .prj (e.g. PRJ_SIRGAS2000); null or omitted = no .prj file. */
  prj?: string | null;
  /** "Last update" date in the DBF header (default: today). Fix it for reproducible bytes. */
  lastUpdate?: Date;
  /** DBF language driver id (header byte 29); default 0 = not declared. 0x57 = ANSI/ISO-8859-1. */
  languageDriverId?: number;
  /** Chunk size of the buffered writes, in bytes (default 1 MiB). */
  chunkSize?: number;
}

/** ESRI WKT of SIRGAS 2000 geographic (EPSG:4674), as SICAR and IBGE ship it. */
export const PRJ_SIRGAS2000 =
  'GEOGCS["GCS_SIRGAS_2000",DATUM["D_SIRGAS_2000",SPHEROID["GRS_1980",6378137.0,298.257222101]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]';

/** ESRI WKT of WGS 84 geographic (EPSG:4326). */
export const PRJ_WGS84 =
  'GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]';

const SHAPE_TYPE_CODE: Record<ShapeKind, number> = { point: 1, polyline: 3, polygon: 5 };
const HEADER_BYTES = 100;
const DEFAULT_CHUNK = 1 << 20;
/** Queued chunk writes per file before write() waits for them. */
const MAX_IN_FLIGHT = 1;
/** Offsets and lengths are signed 32-bit counts of 16-bit words. */
const MAX_SHP_BYTES = 0x7fffffff * 2;

/** Positional, chunked writer over one file handle. */
class ChunkedFile {
  private buf: Buffer;
  private used = 0;
  /** File position of buf[0]. */
  private base: number;
  private pending: Promise<unknown> = Promise.resolve();
  private failure: unknown = null;
  private queued = 0;

  constructor(
    readonly fh: FileHandle,
    private readonly chunkSize: number,
    start: number,
  ) {
    this.buf = Buffer.allocUnsafe(chunkSize);
    this.base = start;
  }

  /** Bytes written or buffered so far, i.e. the current end of file. */
  get position(): number {
    return this.base + this.used;
  }

  /** Reserves n contiguous bytes in the chunk and returns the buffer and offset to fill. */
  reserve(n: number): { buf: Buffer; off: number } {
    if (this.used + n > this.buf.length) {
      this.flush();
      if (n > this.buf.length) this.buf = Buffer.allocUnsafe(Math.max(n, this.chunkSize));
    }
    const off = this.used;
    this.used += n;
    return { buf: this.buf, off };
  }

  /** Chunks handed to the write queue and not yet on disk. */
  get inFlight(): number {
    return this.queued;
  }

  /** Hands the current chunk to the write queue and starts a fresh one. */
  flush(): void {
    if (this.used === 0) return;
    const data = this.buf.subarray(0, this.used);
    const pos = this.base;
    this.base += this.used;
    this.used = 0;
    this.buf = Buffer.allocUnsafe(this.chunkSize);
    this.queued++;
    this.pending = this.pending
      .then(() => this.writeAll(data, pos))
      .catch((e: unknown) => {
        this.failure ??= e;
      })
      .finally(() => {
        this.queued--;
      });
  }

  /** Waits for queued chunks; rethrows the first write error. */
  async drain(): Promise<void> {
    await this.pending;
    if (this.failure !== null) throw this.failure;
  }

  async writeAt(data: Buffer, pos: number): Promise<void> {
    await this.drain();
    await this.writeAll(data, pos);
  }

  private async writeAll(data: Buffer, pos: number): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.fh.write(data, done, data.length - done, pos + done);
      done += bytesWritten;
    }
  }
}

interface PreparedShape {
  /** Content bytes (without the 8-byte record header). */
  contentBytes: number;
  encode(buf: Buffer, off: number): void;
  bbox: [number, number, number, number] | null;
}

function assertFinite(p: Position): void {
  if (!Number.isFinite(p[0]) || !Number.isFinite(p[1])) {
    throw new RangeError(`non-finite coordinate [${p[0]}, ${p[1]}]`);
  }
}

/** Shoelace sum: > 0 counter-clockwise, < 0 clockwise (x right, y up). */
function signedArea2(ring: Position[]): number {
  let s = 0;
  for (let i = 0, n = ring.length; i < n - 1; i++) {
    s += ring[i][0] * ring[i + 1][1] - ring[i + 1][0] * ring[i][1];
  }
  return s;
}

function closeRing(ring: Position[]): Position[] {
  const first = ring[0];
  const last = ring[ring.length - 1];
  return first[0] === last[0] && first[1] === last[1] ? ring : [...ring, first];
}

/** Rings of a polygon in shapefile order: outer clockwise, holes counter-clockwise. */
function orientPolygon(rings: Position[][]): Position[][] {
  const out: Position[][] = [];
  rings.forEach((raw, i) => {
    if (raw.length === 0) return;
    raw.forEach(assertFinite);
    const ring = closeRing(raw);
    const a = signedArea2(ring);
    const isOuter = i === 0;
    const wrong = isOuter ? a > 0 : a < 0;
    out.push(wrong ? [...ring].reverse() : ring);
  });
  return out;
}

function multiPartShape(typeCode: number, parts: Position[][]): PreparedShape | null {
  const nonEmpty = parts.filter((p) => p.length > 0);
  if (nonEmpty.length === 0) return null;
  let numPoints = 0;
  let xmin = Infinity, ymin = Infinity, xmax = -Infinity, ymax = -Infinity;
  for (const part of nonEmpty) {
    numPoints += part.length;
    for (const p of part) {
      assertFinite(p);
      const x = p[0], y = p[1];
      if (x < xmin) xmin = x;
      if (x > xmax) xmax = x;
      if (y < ymin) ymin = y;
      if (y > ymax) ymax = y;
    }
  }
  const numParts = nonEmpty.length;
  return {
    contentBytes: 44 + 4 * numParts + 16 * numPoints,
    bbox: [xmin, ymin, xmax, ymax],
    encode(buf, off) {
      buf.writeInt32LE(typeCode, off);
      buf.writeDoubleLE(xmin, off + 4);
      buf.writeDoubleLE(ymin, off + 12);
      buf.writeDoubleLE(xmax, off + 20);
      buf.writeDoubleLE(ymax, off + 28);
      buf.writeInt32LE(numParts, off + 36);
      buf.writeInt32LE(numPoints, off + 40);
      let o = off + 44;
      let start = 0;
      for (const part of nonEmpty) {
        buf.writeInt32LE(start, o);
        o += 4;
        start += part.length;
      }
      for (const part of nonEmpty) {
        for (const p of part) {
          buf.writeDoubleLE(p[0], o);
          buf.writeDoubleLE(p[1], o + 8);
          o += 16;
        }
      }
    },
  };
}

function prepareShape(kind: ShapeKind, g: WritableGeometry | null): PreparedShape | null {
  if (g === null || g === undefined) return null;
  const code = SHAPE_TYPE_CODE[kind];
  switch (kind) {
    case 'polygon':
      if (g.type === 'Polygon') return multiPartShape(code, orientPolygon(g.coordinates));
      if (g.type === 'MultiPolygon') return multiPartShape(code, g.coordinates.flatMap(orientPolygon));
      break;
    case 'polyline':
      if (g.type === 'LineString') return multiPartShape(code, [g.coordinates]);
      if (g.type === 'MultiLineString') return multiPartShape(code, g.coordinates);
      break;
    case 'point':
      if (g.type === 'Point') {
        const p = g.coordinates;
        if (p.length === 0) return null;
        assertFinite(p);
        return {
          contentBytes: 20,
          bbox: [p[0], p[1], p[0], p[1]],
          encode(buf, off) {
            buf.writeInt32LE(1, off);
            buf.writeDoubleLE(p[0], off + 4);
            buf.writeDoubleLE(p[1], off + 12);
          },
        };
      }
      break;
  }
  throw new TypeError(`a ${kind} layer cannot hold a ${(g as { type?: unknown }).type} geometry`);
}

const NON_LATIN1 = /[^\u0000-\u00ff]/g;

function pad2(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

interface CompiledField extends DbfField {
  offset: number;
  decimals: number;
}

function compileFields(fields: DbfField[]): { fields: CompiledField[]; recordLength: number } {
  if (fields.length === 0) throw new RangeError('a DBF needs at least one field');
  const seen = new Set<string>();
  let offset = 1;
  const out: CompiledField[] = [];
  for (const f of fields) {
    if (!/^[\x21-\x7e]+$/.test(f.name)) throw new RangeError(`DBF field name must be printable ASCII: ${JSON.stringify(f.name)}`);
    if (f.name.length > 10) throw new RangeError(`DBF field name longer than 10 characters: ${f.name}`);
    const key = f.name.toUpperCase();
    if (seen.has(key)) throw new RangeError(`duplicate DBF field name: ${f.name}`);
    seen.add(key);
    const decimals = f.decimals ?? 0;
    const maxLen = f.type === 'C' ? 254 : f.type === 'D' ? 8 : f.type === 'L' ? 1 : 20;
    if (!Number.isInteger(f.length) || f.length < 1 || f.length > maxLen) {
      throw new RangeError(`DBF field ${f.name}: length ${f.length} outside 1..${maxLen} for type ${f.type}`);
    }
    if (f.type === 'D' && f.length !== 8) throw new RangeError(`DBF field ${f.name}: D fields are 8 long`);
    if (!Number.isInteger(decimals) || decimals < 0 || decimals > 15 || (decimals > 0 && decimals > f.length - 2)) {
      throw new RangeError(`DBF field ${f.name}: bad decimals ${decimals}`);
    }
    if (decimals > 0 && f.type !== 'N' && f.type !== 'F') throw new RangeError(`DBF field ${f.name}: decimals only for N/F`);
    out.push({ ...f, decimals, offset });
    offset += f.length;
  }
  if (offset > 0xffff) throw new RangeError('DBF record longer than 65535 bytes');
  return { fields: out, recordLength: offset };
}

export class ShapefileWriter {
  private readonly typeCode: number;
  private readonly fields: CompiledField[];
  private readonly fieldByName: Map<string, CompiledField>;
  private readonly recordLength: number;
  private count = 0;
  private bbox: [number, number, number, number] | null = null;
  private closed = false;
  private failed: unknown = null;

  private constructor(
    private readonly o: ShapefileWriterOptions,
    compiled: { fields: CompiledField[]; recordLength: number },
    private readonly shp: ChunkedFile,
    private readonly shx: ChunkedFile,
    private readonly dbf: ChunkedFile,
  ) {
    this.typeCode = SHAPE_TYPE_CODE[o.shapeType];
    this.fields = compiled.fields;
    this.recordLength = compiled.recordLength;
    this.fieldByName = new Map(this.fields.map((f) => [f.name, f]));
  }

  static async open(o: ShapefileWriterOptions): Promise<ShapefileWriter> {
    if (!(o.shapeType in SHAPE_TYPE_CODE)) throw new TypeError(`unknown shape type: ${String(o.shapeType)}`);
    if (o.encoding !== 'utf8' && o.encoding !== 'latin1') throw new TypeError(`unknown DBF encoding: ${String(o.encoding)}`);
    const compiled = compileFields(o.fields);
    const chunk = o.chunkSize ?? DEFAULT_CHUNK;
    if (!Number.isInteger(chunk) || chunk < 1024) throw new RangeError('chunkSize must be an integer >= 1024');
    await mkdir(path.dirname(path.resolve(o.basePath)), { recursive: true });
    const handles: FileHandle[] = [];
    try {
      for (const ext of ['.shp', '.shx', '.dbf']) handles.push(await fsOpen(o.basePath + ext, 'w'));
    } catch (e) {
      await Promise.allSettled(handles.map((h) => h.close()));
      throw e;
    }
    const dbfHeaderBytes = 32 + 32 * compiled.fields.length + 1;
    const w = new ShapefileWriter(
      o,
      compiled,
      new ChunkedFile(handles[0], chunk, HEADER_BYTES),
      new ChunkedFile(handles[1], chunk, HEADER_BYTES),
      new ChunkedFile(handles[2], chunk, dbfHeaderBytes),
    );
    return w;
  }

  /** Number of records written so far. */
  get written(): number {
    return this.count;
  }

  async write(geometry: WritableGeometry | null, properties: Record<string, DbfValue>): Promise<void> {
    if (this.closed) throw new Error('ShapefileWriter: write after close');
    if (this.failed !== null) throw this.failed;
    // Validate and prepare everything before touching the buffers, so a rejected
    // feature leaves the three files consistent.
    const shape = prepareShape(this.o.shapeType, geometry);
    for (const k of Object.keys(properties)) {
      if (!this.fieldByName.has(k)) throw new RangeError(`property ${k} is not a DBF field of ${path.basename(this.o.basePath)}`);
    }
    const record = this.encodeRecord(properties);

    const contentBytes = shape ? shape.contentBytes : 4;
    const offsetBytes = this.shp.position;
    if (offsetBytes + 8 + contentBytes > MAX_SHP_BYTES) throw new RangeError('.shp would exceed the format limit');
    const recNo = this.count + 1;

    const s = this.shp.reserve(8 + contentBytes);
    s.buf.writeInt32BE(recNo, s.off);
    s.buf.writeInt32BE(contentBytes / 2, s.off + 4);
    if (shape) shape.encode(s.buf, s.off + 8);
    else s.buf.writeInt32LE(0, s.off + 8);

    const x = this.shx.reserve(8);
    x.buf.writeInt32BE(offsetBytes / 2, x.off);
    x.buf.writeInt32BE(contentBytes / 2, x.off + 4);

    const d = this.dbf.reserve(this.recordLength);
    record.copy(d.buf, d.off);

    this.count = recNo;
    if (shape?.bbox) {
      const b = shape.bbox;
      if (this.bbox === null) this.bbox = [...b];
      else {
        const t = this.bbox;
        if (b[0] < t[0]) t[0] = b[0];
        if (b[1] < t[1]) t[1] = b[1];
        if (b[2] > t[2]) t[2] = b[2];
        if (b[3] > t[3]) t[3] = b[3];
      }
    }
    // Backpressure: chunks are flushed by reserve() when full; once a file has more
    // than MAX_IN_FLIGHT chunks queued, wait for the disk, so memory stays bounded
    // (about (MAX_IN_FLIGHT + 1) chunks per file) even for a caller that never yields
    // to the event loop between writes.
    if (this.shp.inFlight > MAX_IN_FLIGHT || this.shx.inFlight > MAX_IN_FLIGHT || this.dbf.inFlight > MAX_IN_FLIGHT) {
      try {
        await Promise.all([this.shp.drain(), this.shx.drain(), this.dbf.drain()]);
      } catch (e) {
        this.failed = e;
        throw e;
      }
    }
  }

  private encodeRecord(props: Record<string, DbfValue>): Buffer {
    const rec = Buffer.alloc(this.recordLength, 0x20);
    for (const f of this.fields) {
      const v = props[f.name];
      if (v === null || v === undefined) {
        if (f.type === 'L') rec.write('?', f.offset, 1, 'latin1');
        continue;
      }
      switch (f.type) {
        case 'C': {
          const s = v instanceof Date ? v.toISOString() : typeof v === 'boolean' ? (v ? 'T' : 'F') : String(v);
          if (this.o.encoding === 'latin1') rec.write(s.replace(NON_LATIN1, '?'), f.offset, f.length, 'latin1');
          // Buffer#write never writes a partial UTF-8 sequence: truncation is at a character boundary.
          else rec.write(s, f.offset, f.length, 'utf8');
          break;
        }
        case 'N':
        case 'F': {
          const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
          if (!Number.isFinite(n)) throw new RangeError(`DBF field ${f.name}: not a finite number: ${String(v)}`);
          const s = n.toFixed(f.decimals);
          if (s.length > f.length || s.includes('e')) {
            throw new RangeError(`DBF field ${f.name}: ${s} does not fit N(${f.length},${f.decimals})`);
          }
          rec.write(s, f.offset + f.length - s.length, s.length, 'latin1');
          break;
        }
        case 'D': {
          let s: string;
          if (v instanceof Date) {
            if (Number.isNaN(v.getTime())) throw new RangeError(`DBF field ${f.name}: invalid date`);
            s = `${String(v.getUTCFullYear()).padStart(4, '0')}${pad2(v.getUTCMonth() + 1)}${pad2(v.getUTCDate())}`;
          } else if (typeof v === 'string' && /^\d{4}-?\d{2}-?\d{2}$/.test(v)) {
            s = v.replace(/-/g, '');
          } else {
            throw new RangeError(`DBF field ${f.name}: not a date (Date, YYYYMMDD or YYYY-MM-DD): ${String(v)}`);
          }
          rec.write(s, f.offset, 8, 'latin1');
          break;
        }
        case 'L': {
          let c: string;
          if (typeof v === 'boolean') c = v ? 'T' : 'F';
          else if (typeof v === 'string' && /^[TtFfYyNn?]$/.test(v)) c = v.toUpperCase();
          else throw new RangeError(`DBF field ${f.name}: not a boolean: ${String(v)}`);
          rec.write(c, f.offset, 1, 'latin1');
          break;
        }
      }
    }
    return rec;
  }

  private shpHeader(fileBytes: number): Buffer {
    const h = Buffer.alloc(HEADER_BYTES);
    h.writeInt32BE(9994, 0);
    h.writeInt32BE(fileBytes / 2, 24);
    h.writeInt32LE(1000, 28);
    h.writeInt32LE(this.typeCode, 32);
    const b = this.bbox ?? [0, 0, 0, 0];
    h.writeDoubleLE(b[0], 36);
    h.writeDoubleLE(b[1], 44);
    h.writeDoubleLE(b[2], 52);
    h.writeDoubleLE(b[3], 60);
    // Z and M ranges (68..99) stay 0 for 2D shapes.
    return h;
  }

  private dbfHeader(): Buffer {
    const n = this.fields.length;
    const h = Buffer.alloc(32 + 32 * n + 1);
    const date = this.o.lastUpdate ?? new Date();
    h.writeUInt8(0x03, 0);
    h.writeUInt8((date.getUTCFullYear() - 1900) & 0xff, 1);
    h.writeUInt8(date.getUTCMonth() + 1, 2);
    h.writeUInt8(date.getUTCDate(), 3);
    h.writeUInt32LE(this.count, 4);
    h.writeUInt16LE(32 + 32 * n + 1, 8);
    h.writeUInt16LE(this.recordLength, 10);
    h.writeUInt8((this.o.languageDriverId ?? 0) & 0xff, 29);
    this.fields.forEach((f, i) => {
      const o = 32 + 32 * i;
      h.write(f.name, o, 10, 'latin1');
      h.write(f.type, o + 11, 1, 'latin1');
      h.writeUInt8(f.length, o + 16);
      h.writeUInt8(f.decimals, o + 17);
    });
    h.writeUInt8(0x0d, 32 + 32 * n);
    return h;
  }

  /** Flushes, patches the headers, writes .prj/.cpg and closes the files. */
  async close(): Promise<{ files: string[]; count: number }> {
    if (this.closed) throw new Error('ShapefileWriter: already closed');
    this.closed = true;
    const base = this.o.basePath;
    const files = [`${base}.shp`, `${base}.shx`, `${base}.dbf`];
    try {
      const eof = this.dbf.reserve(1);
      eof.buf.writeUInt8(0x1a, eof.off);
      const shpBytes = this.shp.position;
      const shxBytes = this.shx.position;
      for (const f of [this.shp, this.shx, this.dbf]) f.flush();
      await Promise.all([
        this.shp.writeAt(this.shpHeader(shpBytes), 0),
        this.shx.writeAt(this.shpHeader(shxBytes), 0),
        this.dbf.writeAt(this.dbfHeader(), 0),
      ]);
    } finally {
      await Promise.allSettled([this.shp.fh.close(), this.shx.fh.close(), this.dbf.fh.close()]);
    }
    if (this.o.prj != null) {
      await writeFile(`${base}.prj`, this.o.prj, 'utf8');
      files.push(`${base}.prj`);
    }
    if (this.o.cpg != null) {
      await writeFile(`${base}.cpg`, this.o.cpg, 'utf8');
      files.push(`${base}.cpg`);
    }
    return { files, count: this.count };
  }
}

export interface ZipOptions {
  /** Entry timestamp (default: a fixed 2024-01-01 00:00 local time, for reproducible bytes). */
  mtime?: Date;
  /** Deflate the entries (default true). */
  compress?: boolean;
}

/**
 * Writes a zip holding each file under its entry name. Timestamps are fixed and written
 * as DOS date/time only (which yazl derives from local time fields; no UTC extra field),
 * and the mode is fixed, so the same inputs give the same bytes on any machine.
 */
export async function zipFiles(
  zipPath: string,
  files: { path: string; name: string }[],
  opts: ZipOptions = {},
): Promise<void> {
  const zip = new yazl.ZipFile();
  const entryOpts = {
    mtime: opts.mtime ?? new Date(2024, 0, 1, 0, 0, 0),
    mode: 0o100644,
    compress: opts.compress ?? true,
    forceDosTimestamp: true,
  };
  const names = new Set<string>();
  for (const f of files) {
    if (names.has(f.name)) throw new RangeError(`duplicate zip entry name: ${f.name}`);
    names.add(f.name);
    zip.addFile(f.path, f.name, entryOpts);
  }
  await mkdir(path.dirname(path.resolve(zipPath)), { recursive: true });
  const out = createWriteStream(zipPath);
  const done = pipeline(zip.outputStream, out);
  zip.end();
  await done;
}
