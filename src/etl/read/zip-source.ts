// Entries of a zip as byte streams, read straight from the archive (nothing extracted),
// each checked against its CRC-32 as it streams: a damaged member fails the read
// (corrupt_archive) instead of feeding truncated or altered bytes to a parser.
// Several entries may be streamed at once (a layer's .shp and .dbf side by side).
import path from 'node:path';
import type { Readable } from 'node:stream';
import { crc32, createInflateRaw } from 'node:zlib';
import yauzl, { type Entry, type ZipFile, type ZipFileOptions } from 'yauzl';
import { AgroError } from '../../errors.ts';
import type { LayerSources } from './shp-stream.ts';

export class ZipEntries {
  private constructor(
    private readonly file: string,
    private readonly zip: ZipFile,
    private readonly entries: Map<string, Entry>,
  ) {}

  static async open(file: string): Promise<ZipEntries> {
    const corrupt = (e: unknown) => new AgroError('corrupt_archive', `${path.basename(file)}: ${(e as Error).message}`);
    const zip = await new Promise<ZipFile>((resolve, reject) =>
      yauzl.open(file, { lazyEntries: true, autoClose: false }, (err, z) => (err ? reject(corrupt(err)) : resolve(z))),
    );
    const entries = new Map<string, Entry>();
    await new Promise<void>((resolve, reject) => {
      zip.on('error', (e) => reject(corrupt(e)));
      zip.on('end', resolve);
      zip.on('entry', (e: Entry) => {
        if (!e.fileName.endsWith('/')) entries.set(e.fileName, e);
        zip.readEntry();
      });
      zip.readEntry();
    });
    return new ZipEntries(file, zip, entries);
  }

  /** File entry names, in archive order. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** The entry's bytes, CRC-checked at the end. */
  async *stream(name: string): AsyncGenerator<Buffer> {
    const entry = this.entries.get(name);
    if (!entry) throw new AgroError('missing_layer_part', `${path.basename(this.file)} has no ${name}`, { file: name });
    // Deflated entries are inflated here rather than by yauzl, with 1 MiB output chunks:
    // zlib's default 16 KiB chunks cost about a second of callbacks per 250 MB.
    const deflated = entry.compressionMethod === 8;
    const raw = await new Promise<Readable>((resolve, reject) =>
      this.zip.openReadStream(entry, (deflated ? { decompress: false } : {}) as ZipFileOptions, (err, s) =>
        err ? reject(new AgroError('corrupt_archive', `${name}: ${err.message}`)) : resolve(s)),
    );
    const stream = deflated ? raw.pipe(createInflateRaw({ chunkSize: 1 << 20 })) : raw;
    raw.on('error', (e) => stream.destroy(e));
    let crc = 0, size = 0;
    try {
      for await (const chunk of stream) {
        crc = crc32(chunk as Buffer, crc);
        size += (chunk as Buffer).length;
        yield chunk as Buffer;
      }
    } catch (e) {
      throw new AgroError('corrupt_archive', `${name}: ${(e as Error).message}`);
    } finally {
      raw.destroy();
      stream.destroy();
    }
    if (size !== entry.uncompressedSize) throw new AgroError('corrupt_archive', `${name}: ${size} bytes inflated, ${entry.uncompressedSize} declared`);
    if (crc >>> 0 !== entry.crc32 >>> 0) throw new AgroError('corrupt_archive', `CRC mismatch in ${name}`);
  }

  /** A layer's .shp and .dbf streams; `shp` is the .shp's entry name (sub-folders included). */
  layerSources(shp: string): LayerSources {
    const base = shp.slice(0, -4).toLowerCase();
    const dbf = this.names().find((n) => n.toLowerCase() === `${base}.dbf`);
    if (!dbf) throw new AgroError('missing_layer_part', `${path.basename(shp)} has no .dbf file`, { file: path.basename(shp), part: '.dbf' });
    return { name: path.basename(shp), shp: this.stream(shp), dbf: this.stream(dbf) };
  }

  close(): void {
    this.zip.close();
  }
}
