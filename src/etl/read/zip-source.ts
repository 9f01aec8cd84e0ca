// Entries of a zip as byte streams, read straight from the archive (nothing extracted),
// each inflated once by archive.ts's memberBytes: counted against the archive's budget,
// refused past its declared size, checked against its CRC-32 at the end. A damaged member
// fails the read (corrupt_archive) instead of feeding truncated or altered bytes to a parser.
// Several entries may be streamed at once (a layer's .shp and .dbf side by side).
import path from 'node:path';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { AgroError } from '../../errors.ts';
import { DEFAULT_ZIP_LIMITS, memberBytes, zipBudget, type ZipBudget } from '../archive.ts';
import { partAmong } from '../layer-parts.ts';
import type { LayerSources } from './shp-stream.ts';

export class ZipEntries {
  private constructor(
    private readonly file: string,
    private readonly zip: ZipFile,
    private readonly entries: Map<string, Entry>,
    private readonly budget: ZipBudget,
  ) {}

  /** Opens the zip and reads its central directory; `budget` is what its members may inflate (shared with extraction). */
  static async open(file: string, budget: ZipBudget = zipBudget(DEFAULT_ZIP_LIMITS)): Promise<ZipEntries> {
    const corrupt = (e: unknown) => new AgroError('corrupt_archive', `${path.basename(file)}: ${(e as Error).message}`);
    const zip = await new Promise<ZipFile>((resolve, reject) =>
      yauzl.open(file, { lazyEntries: true, autoClose: false }, (err, z) => (err ? reject(corrupt(err)) : resolve(z))),
    );
    const entries = new Map<string, Entry>();
    try {
      await new Promise<void>((resolve, reject) => {
        zip.on('error', (e) => reject(corrupt(e)));
        zip.on('end', resolve);
        zip.on('entry', (e: Entry) => {
          if (!e.fileName.endsWith('/')) entries.set(e.fileName, e);
          zip.readEntry();
        });
        zip.readEntry();
      });
    } catch (e) {
      zip.close();
      throw e;
    }
    return new ZipEntries(file, zip, entries, budget);
  }

  /** File entry names, in archive order. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /** The entry's bytes (1 MiB chunks), counted against the budget, CRC-checked at the end. */
  stream(name: string): AsyncGenerator<Buffer> {
    const entry = this.entries.get(name);
    if (!entry) throw new AgroError('missing_layer_part', `${path.basename(this.file)} has no ${name}`, { file: name });
    return memberBytes(this.zip, this.file, entry, this.budget);
  }

  /** A layer's .shp and .dbf streams; `shp` is the .shp's entry name (sub-folders included). */
  layerSources(shp: string): LayerSources {
    const dbf = partAmong(this.names(), shp, '.dbf');
    if (!dbf) throw new AgroError('missing_layer_part', `${path.basename(shp)} has no .dbf file`, { file: path.basename(shp), part: '.dbf' });
    return { name: path.basename(shp), shp: this.stream(shp), dbf: this.stream(dbf) };
  }

  close(): void {
    this.zip.close();
  }
}
