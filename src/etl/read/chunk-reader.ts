// Pull-style reading of a byte stream: `ensure(n)` makes n bytes available at `pos`
// (awaiting only at chunk boundaries), so a parser walks records synchronously in the
// common case. Memory: the current chunk plus one record that straddles two chunks.
export class ChunkReader {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  /** Bytes consumed before `buf` (for error messages). */
  base = 0;
  private done = false;
  private readonly it: AsyncIterator<Buffer>;

  constructor(source: AsyncIterable<Buffer>) {
    this.it = source[Symbol.asyncIterator]();
  }

  get available(): number {
    return this.buf.length - this.pos;
  }

  /** True when n bytes are available at `pos`; false when the stream ends first. */
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

  /** Reads the stream to its end (so that a checking source, e.g. a zip entry's CRC, runs). */
  async drain(): Promise<void> {
    this.base += this.buf.length;
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    while (!this.done) if ((await this.it.next()).done) this.done = true;
  }

  /** Stops the underlying stream (closes the file) when the reader is abandoned early. */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}
