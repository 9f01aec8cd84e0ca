// PostgreSQL binary COPY encoding (COPY … FROM STDIN WITH (FORMAT binary)): a header,
// then per row an int16 field count and per field an int32 byte length (-1 = NULL) and
// the type's binary form; int16 -1 ends the stream. Rows are written into ~1 MiB
// chunks that the caller hands to the COPY stream. Binary forms used here: int4, int8,
// text (UTF-8 bytes), jsonb (version byte 1 + JSON text) and geometry (WKB, which
// PostGIS' geometry_recv accepts as it is).
import { isUtf8 } from 'node:buffer';
import { dataView } from './data-view.ts';
import { NUL_STANDS_IN } from '../copy.ts';

const REPLACEMENT = Buffer.from('\uFFFD', 'utf8');
/** NUL_STANDS_IN's three UTF-8 bytes, for the byte-level Latin-1 path. */
const NUL_UTF8 = Buffer.from(NUL_STANDS_IN, 'utf8');
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
export const COPY_CHUNK_BYTES = 1 << 20;

/** A value that knows its binary size and writes itself (e.g. a shape's WKB). */
export interface SizedValue {
  size: number;
  write(buf: Buffer, at: number): number;
}

export class BinaryCopyWriter {
  buf: Buffer;
  off = 0;

  constructor(private readonly chunkBytes = COPY_CHUNK_BYTES) {
    this.buf = Buffer.allocUnsafe(chunkBytes * 2);
    SIGNATURE.copy(this.buf, 0);
    this.buf.writeInt32BE(0, 11); // flags
    this.buf.writeInt32BE(0, 15); // header extension length
    this.off = 19;
  }

  private viewBuf: Buffer | null = null;
  private dv: DataView<ArrayBufferLike> | null = null;

  /** A DataView of `buf` (kept while `buf` is the same buffer). */
  private view(): DataView<ArrayBufferLike> {
    if (this.viewBuf !== this.buf) {
      this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.length);
      this.viewBuf = this.buf;
    }
    return this.dv!;
  }

  /** Room for n more bytes (the buffer grows for a row larger than a chunk). */
  ensure(n: number): void {
    if (this.off + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.off + n));
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }

  /** Whether a full chunk is ready to be taken (call between rows). */
  get full(): boolean {
    return this.off >= this.chunkBytes;
  }

  /** The bytes written so far; the writer starts a new buffer. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.off);
    this.buf = Buffer.allocUnsafe(Math.max(this.chunkBytes * 2, 64));
    this.off = 0;
    return out;
  }

  row(fields: number): void {
    this.ensure(2);
    this.buf.writeInt16BE(fields, this.off);
    this.off += 2;
  }

  nullField(): void {
    this.ensure(4);
    this.buf.writeInt32BE(-1, this.off);
    this.off += 4;
  }

  int4(v: number): void {
    this.ensure(8);
    this.buf.writeInt32BE(4, this.off);
    this.buf.writeInt32BE(v, this.off + 4);
    this.off += 8;
  }

  /** An int8 from a safe integer (two int32 halves: no BigInt per row). */
  int8(v: number): void {
    this.ensure(12);
    this.buf.writeInt32BE(8, this.off);
    this.buf.writeInt32BE(Math.floor(v / 0x100000000), this.off + 4);
    this.buf.writeUInt32BE(v >>> 0, this.off + 8);
    this.off += 12;
  }

  /** A text field; NUL cannot be stored in PostgreSQL text and becomes U+2400, counted by the text check (as the text COPY does). */
  text(s: string | null): void {
    if (s === null) return this.nullField();
    if (s.includes('\0')) s = s.replace(/\0/g, NUL_STANDS_IN);
    this.ensure(4 + s.length * 3);
    const n = this.buf.write(s, this.off + 4, 'utf8');
    this.buf.writeInt32BE(n, this.off);
    this.off += 4 + n;
  }

  /** A text field from bytes that are already its UTF-8 (ASCII, or text encoded once for many rows). */
  bytes(src: Buffer, start = 0, end = src.length): void {
    const n = end - start;
    this.ensure(4 + n);
    const buf = this.buf;
    buf.writeInt32BE(n, this.off);
    let o = this.off + 4;
    if (n > 64) src.copy(buf, o, start, end);
    else for (let i = start; i < end; i++) buf[o++] = src[i];
    this.off += 4 + n;
  }

  /** A text field from ISO-8859-1 bytes, transcoded to UTF-8 on the way (no JS string); a NUL as U+2400 (NUL_STANDS_IN). */
  latin1(src: Buffer, start: number, end: number): void {
    this.ensure(4 + 3 * (end - start));
    const buf = this.buf;
    let o = this.off + 4;
    let i = start;
    // Four bytes at a time while they are ASCII without NUL (most of a Portuguese name).
    const sv = dataView(src), ov = this.view();
    for (; i + 4 <= end; i += 4) {
      const x = sv.getUint32(i, true);
      if (((x | ((x - 0x01010101) & ~x)) & 0x80808080) !== 0) break;
      ov.setUint32(o, x, true);
      o += 4;
    }
    for (; i < end; i++) {
      const b = src[i];
      if (b === 0) {
        buf[o++] = NUL_UTF8[0];
        buf[o++] = NUL_UTF8[1];
        buf[o++] = NUL_UTF8[2];
      } else if (b < 0x80) buf[o++] = b;
      else {
        buf[o++] = 0xc0 | (b >> 6);
        buf[o++] = 0x80 | (b & 0x3f);
      }
    }
    buf.writeInt32BE(o - this.off - 4, this.off);
    this.off = o;
  }

  /**
   * Copies src[start, end) as a text field when it is ASCII without NUL (valid UTF-8 as it
   * is, no U+FFFD possible), four bytes at a time; returns false, having written nothing,
   * at the first other byte.
   */
  private ascii(src: Buffer, start: number, end: number): boolean {
    this.ensure(4 + end - start);
    const buf = this.buf;
    const sv = dataView(src), ov = this.view();
    let o = this.off + 4;
    let i = start;
    for (; i + 4 <= end; i += 4) {
      const x = sv.getUint32(i, true);
      if (((x | ((x - 0x01010101) & ~x)) & 0x80808080) !== 0) return false;
      ov.setUint32(o, x, true);
      o += 4;
    }
    for (; i < end; i++) {
      const b = src[i];
      if (b === 0 || b >= 0x80) return false;
      buf[o++] = b;
    }
    buf.writeInt32BE(end - start, this.off);
    this.off = o;
    return true;
  }

  /**
   * A text field from bytes declared UTF-8: copied when valid, else decoded with U+FFFD
   * for the bad sequences (a NUL as U+2400). Returns whether the value holds U+FFFD (an
   * encoding problem, counted apart; a NUL is a stray byte the text check counts).
   */
  utf8(src: Buffer, start: number, end: number): boolean {
    if (this.ascii(src, start, end)) return false;
    const bytes = src.subarray(start, end);
    if (!isUtf8(bytes) || bytes.includes(0)) {
      const s = bytes.toString('utf8');
      this.text(s);
      return s.includes('\uFFFD');
    }
    this.ensure(4 + bytes.length);
    this.buf.writeInt32BE(bytes.length, this.off);
    bytes.copy(this.buf, this.off + 4);
    this.off += 4 + bytes.length;
    return bytes.includes(REPLACEMENT);
  }

  jsonb(json: string | null): void {
    if (json === null) return this.nullField();
    this.ensure(5 + json.length * 3);
    this.buf[this.off + 4] = 1;
    const n = this.buf.write(json, this.off + 5, 'utf8');
    this.buf.writeInt32BE(n + 1, this.off);
    this.off += 5 + n;
  }

  /** A field of `v.size` bytes that `v.write(buf, at)` writes (returning the end offset). */
  field(v: SizedValue): void {
    this.ensure(4 + v.size);
    this.buf.writeInt32BE(v.size, this.off);
    const end = v.write(this.buf, this.off + 4);
    if (end !== this.off + 4 + v.size) throw new Error(`binary COPY field: wrote ${end - this.off - 4} bytes, announced ${v.size}`);
    this.off = end;
  }

  end(): void {
    this.ensure(2);
    this.buf.writeInt16BE(-1, this.off);
    this.off += 2;
  }
}
