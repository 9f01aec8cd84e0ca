// Pull-style reading of a byte stream: `ensure(n)` makes n bytes available at `pos`
// (awaiting only at chunk boundaries), so a parser walks records synchronously in the
// common case. Two sources:
// - a file, read with positional reads into ONE buffer that is reused (the unread tail
//   moved to its front, the rest refilled): no allocation per chunk, so memory stays
//   the same whatever the file's size; the buffer grows only for a record larger than it;
// - an async iterable of chunks (a zip entry being inflated): the current chunk plus one
//   record that straddles two chunks.
// Either way the bytes at `buf` are valid only until the next `ensure`.
import { open, type FileHandle } from 'node:fs/promises';

export interface ByteReader {
  buf: Buffer;
  pos: number;
  /** Bytes consumed before `buf` (for error messages). */
  base: number;
  readonly available: number;
  /** True when n bytes are available at `pos`; false when the source ends first. */
  ensure(n: number): Promise<boolean>;
  /** Reads the source to its end (so that a checking source, e.g. a zip entry's CRC, runs). */
  drain(): Promise<void>;
  /** Closes the source (also when the reader is abandoned early). */
  close(): Promise<void>;
}

/** A file or a stream of chunks. */
export type ByteSource = { file: string } | AsyncIterable<Buffer>;

export const READ_CHUNK = 1 << 20;

export function byteReader(src: ByteSource): ByteReader {
  return 'file' in src ? new FileReader(src.file) : new ChunkReader(src);
}

export class ChunkReader implements ByteReader {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  base = 0;
  private done = false;
  private readonly it: AsyncIterator<Buffer>;

  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  get available(): number {
    return this.buf.length - this.pos;
  }

  async ensure(n: number): Promise<boolean> {
    if (this.buf.length - this.pos >= n) return true;
    const parts = [this.buf.subarray(this.pos)];
    let have = parts[0].length;
    while (have < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else {
        parts.push(r.value);
        have += r.value.length;
      }
    }
    this.base += this.pos;
    this.buf = parts.length === 1 ? parts[0] : Buffer.concat(parts, have);
    this.pos = 0;
    return have >= n;
  }

  async drain(): Promise<void> {
    this.base += this.buf.length;
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    while (!this.done) if ((await this.it.next()).done) this.done = true;
  }

  async close(): Promise<void> {
    await this.it.return?.();
  }
}

export class FileReader implements ByteReader {
  /** The valid bytes: a view of `store` [0, end). */
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  base = 0;
  private store: Buffer = Buffer.allocUnsafe(READ_CHUNK);
  private fh: FileHandle | null = null;
  private filePos = 0;
  private eof = false;

  constructor(private readonly file: string) {}

  get available(): number {
    return this.buf.length - this.pos;
  }

  async ensure(n: number): Promise<boolean> {
    if (this.buf.length - this.pos >= n) return true;
    this.fh ??= await open(this.file, 'r');
    const have = this.buf.length - this.pos;
    if (n > this.store.length) {
      const bigger = Buffer.allocUnsafe(Math.max(n, 2 * this.store.length));
      this.buf.copy(bigger, 0, this.pos);
      this.store = bigger;
    } else if (have > 0) this.store.copyWithin(0, this.pos, this.buf.length); // buf is a view of store from 0
    this.base += this.pos;
    this.pos = 0;
    let end = have;
    while (end < this.store.length && !this.eof) {
      const { bytesRead } = await this.fh.read(this.store, end, this.store.length - end, this.filePos);
      if (bytesRead === 0) this.eof = true;
      this.filePos += bytesRead;
      end += bytesRead;
      if (end >= n) break;
    }
    this.buf = this.store.subarray(0, end);
    return end >= n;
  }

  async drain(): Promise<void> {
    this.base += this.buf.length;
    this.buf = this.store.subarray(0, 0);
    this.pos = 0;
  }

  async close(): Promise<void> {
    const fh = this.fh;
    this.fh = null;
    await fh?.close();
  }
}
