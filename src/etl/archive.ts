// Zip validation and extraction. Government servers often answer with HTML error
// pages or cut archives short. A downloaded zip is checked without inflating anything
// (checkZipDirectory: signature, central directory, declared sizes against the bound);
// its members are inflated once, by the read step, which checks each member's CRC-32 and
// counts its bytes while streaming it (yauzl checks sizes but not CRCs).
// A hostile or broken archive may also inflate far beyond its size (a 2 MB zip holding a
// 2 GiB member): the central directory's declared sizes are checked against ZipLimits
// before anything is inflated, and the bytes are counted again while inflating, since
// declared sizes can lie. Extraction takes only the members asked for.
import { channel } from 'node:diagnostics_channel';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32, createInflateRaw } from 'node:zlib';
import yauzl, { type Entry, type ZipFile, type ZipFileOptions } from 'yauzl';
import { AgroError, isAgroError } from '../errors.ts';

export interface ZipLimits {
  /** Most bytes the members read from one archive may inflate to, together (AGRO_MAX_UNZIPPED_BYTES). */
  maxBytes: number;
  /** Largest inflated/compressed ratio of a member that inflates beyond ratioFloor bytes (AGRO_MAX_UNZIP_RATIO). */
  maxRatio: number;
  /** Members up to this size compress as they like (a blank DBF column compresses 1000:1); the ratio bounds big ones. */
  ratioFloor: number;
}

/** 8 GiB together; a member beyond 100 MiB may not inflate more than 200 times its compressed size. */
export const DEFAULT_ZIP_LIMITS: ZipLimits = Object.freeze({ maxBytes: 8 * 2 ** 30, maxRatio: 200, ratioFloor: 100 * 2 ** 20 });

/**
 * Published once per member inflated ({ file, member }): how the tests show that a zip is
 * inflated once from download to staging. No cost without a subscriber.
 */
export const inflateChannel = channel('agro:zip-inflate');

const LOCAL_HEADER = Buffer.from([0x50, 0x4b, 0x03, 0x04]);
const EMPTY_ZIP = Buffer.from([0x50, 0x4b, 0x05, 0x06]);

/** First `max` bytes of a file (fewer if the file is shorter). */
export async function readHead(file: string, max = 1024): Promise<Buffer> {
  const fh = await open(file, 'r');
  try {
    const buf = Buffer.alloc(max);
    const { bytesRead } = await fh.read(buf, 0, max, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}

/** Index of the first byte that is not whitespace or a UTF-8 BOM, or -1. */
export function firstContentByte(head: Buffer): number {
  let i = head.subarray(0, 3).equals(Buffer.from([0xef, 0xbb, 0xbf])) ? 3 : 0;
  while (i < head.length && [0x20, 0x09, 0x0a, 0x0d].includes(head[i])) i++;
  return i < head.length ? i : -1;
}

async function checkSignature(file: string): Promise<void> {
  const head = await readHead(file, 512);
  if (head.length === 0) throw new AgroError('corrupt_archive', `${path.basename(file)}: empty file`);
  const sig = head.subarray(0, 4);
  if (sig.equals(LOCAL_HEADER) || sig.equals(EMPTY_ZIP)) return;
  const first = firstContentByte(head);
  if (first >= 0 && head[first] === 0x3c) {
    throw new AgroError('html_instead_of_archive', `${path.basename(file)} starts with '<'`);
  }
  throw new AgroError('corrupt_archive', `${path.basename(file)}: not a zip (signature ${sig.toString('hex')})`);
}

/** I/O errors (with a syscall) stay as they are; anything else from the zip reader is corruption. */
function asCorrupt(e: unknown, file: string): unknown {
  if (isAgroError(e) || (e as NodeJS.ErrnoException)?.syscall) return e;
  const reason = e instanceof Error ? e.message : String(e);
  return new AgroError('corrupt_archive', `${path.basename(file)}: ${reason}`);
}

function openZip(file: string): Promise<ZipFile> {
  return new Promise((resolve, reject) => {
    yauzl.open(file, { lazyEntries: true, autoClose: false }, (err, zip) => (err ? reject(err) : resolve(zip)));
  });
}

const isDirectory = (entry: Entry): boolean => entry.fileName.endsWith('/');

const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;

function tooLarge(file: string, why: string): AgroError {
  return new AgroError('archive_too_large', `${path.basename(file)}: ${why}`, { file: path.basename(file) });
}

/** Refuses, from the central directory alone, members that would inflate beyond the limits. */
function checkDeclared(file: string, entries: Entry[], limits: ZipLimits): void {
  let total = 0;
  for (const e of entries) {
    total += e.uncompressedSize;
    if (e.uncompressedSize > limits.ratioFloor && e.uncompressedSize > limits.maxRatio * Math.max(1, e.compressedSize)) {
      const ratio = Math.round(e.uncompressedSize / Math.max(1, e.compressedSize));
      throw tooLarge(file, `${e.fileName} declares ${mib(e.uncompressedSize)} from ${mib(e.compressedSize)} (ratio ${ratio}, at most ${limits.maxRatio} allowed: AGRO_MAX_UNZIP_RATIO)`);
    }
  }
  if (total > limits.maxBytes) throw tooLarge(file, `its members declare ${mib(total)} uncompressed, more than the ${mib(limits.maxBytes)} allowed (AGRO_MAX_UNZIPPED_BYTES)`);
}

/** What one archive (and the zips inside it) may still inflate, shared by all its members, extracted or streamed. */
export interface ZipBudget {
  left: number;
  limits: ZipLimits;
}

export const zipBudget = (limits: ZipLimits): ZipBudget => ({ left: limits.maxBytes, limits });

/** Output chunk of the inflater: zlib's default 16 KiB costs about a second of callbacks per 250 MB. */
const INFLATE_CHUNK = 1 << 20;

const corrupt = (file: string, why: string) => new AgroError('corrupt_archive', `${path.basename(file)}: ${why}`);

/**
 * One member's bytes, inflated in 1 MiB chunks: counted against the archive's budget as they
 * come, refused as soon as they pass the size the central directory declared (declared
 * sizes can lie), and checked against the CRC-32 at the end. Whatever the zip reader or
 * zlib throws is corruption (corrupt_archive); the budget's end is archive_too_large. Used
 * for every member read from a zip, extracted (walkZip) or streamed (read/zip-source.ts).
 */
export async function* memberBytes(zip: ZipFile, file: string, entry: Entry, budget: ZipBudget): AsyncGenerator<Buffer> {
  if (inflateChannel.hasSubscribers) inflateChannel.publish({ file, member: entry.fileName });
  const name = entry.fileName;
  const deflated = entry.compressionMethod === 8;
  const raw = await new Promise<Readable>((resolve, reject) =>
    zip.openReadStream(entry, (deflated ? { decompress: false } : {}) as ZipFileOptions, (err, s) => (err ? reject(corrupt(file, `${name}: ${err.message}`)) : resolve(s))),
  );
  const stream = deflated ? raw.pipe(createInflateRaw({ chunkSize: INFLATE_CHUNK })) : raw;
  if (deflated) raw.on('error', (e) => stream.destroy(e));
  let crc = 0;
  let size = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      budget.left -= chunk.length;
      if (budget.left < 0) throw tooLarge(file, `${name} inflates beyond the ${mib(budget.limits.maxBytes)} allowed (its header declared ${mib(entry.uncompressedSize)})`);
      if (size > entry.uncompressedSize) throw corrupt(file, `${name} inflates beyond its declared ${entry.uncompressedSize} bytes`);
      crc = crc32(chunk, crc);
      yield chunk;
    }
  } catch (e) {
    throw isAgroError(e) ? e : corrupt(file, `${name}: ${(e as Error).message}`);
  } finally {
    raw.destroy();
    stream.destroy();
  }
  if (size !== entry.uncompressedSize) throw corrupt(file, `${name}: ${size} bytes inflated, ${entry.uncompressedSize} declared`);
  if (crc >>> 0 !== entry.crc32 >>> 0) throw corrupt(file, `CRC mismatch in ${name}`);
}

/** The central directory's entries (no member inflated yet). */
function listEntries(zip: ZipFile): Promise<Entry[]> {
  return new Promise<Entry[]>((resolve, reject) => {
    const entries: Entry[] = [];
    zip.on('error', reject);
    zip.on('end', () => resolve(entries));
    zip.on('entry', (entry: Entry) => {
      entries.push(entry);
      zip.readEntry();
    });
    zip.readEntry();
  });
}

/**
 * macOS's resource forks in a zip it made (`__MACOSX/…`, `._<name>` beside every file): binary
 * AppleDouble headers named like the data (`._GO_AREA_IMOVEL.shp`, `._termo_embargo.csv`), never
 * data. A zip repacked on a Mac (the manual-drop path) carries one per member: read, they failed
 * the load as a shapefile without a header or were taken for the CSV.
 */
const isMacResourceFork = (name: string): boolean => /(^|\/)__MACOSX\//.test(name) || /(^|\/)\._[^/]*$/.test(name);

/**
 * Two file members of one name (a zip appended to, two versions of a layer): which is meant
 * cannot be told, and read, the last one's layer was found twice and loaded twice.
 */
function refuseDuplicates(file: string, entries: Entry[]): void {
  const seen = new Set<string>();
  for (const e of entries) {
    if (isDirectory(e)) continue;
    if (seen.has(e.fileName)) throw corrupt(file, `${e.fileName} is in the archive more than once`);
    seen.add(e.fileName);
  }
}

/**
 * Opens a zip, lists its entries, checks the declared sizes of the file entries `pick`
 * selects, then streams those one at a time (inflated bytes counted, CRC checked) into
 * the sink `onEntry` gives; directory entries go to `onEntry` with no stream.
 */
async function walkZip(
  file: string,
  limits: ZipLimits,
  pick: (name: string) => boolean,
  onEntry: (entry: Entry) => Promise<Writable | null>,
  budget: ZipBudget = zipBudget(limits),
): Promise<void> {
  await withZip(file, async (zip) => {
    const entries = await listEntries(zip);
    const chosen = entries.filter((e) => !isMacResourceFork(e.fileName) && (isDirectory(e) || pick(e.fileName)));
    refuseDuplicates(file, chosen);
    checkDeclared(file, chosen.filter((e) => !isDirectory(e)), { ...limits, maxBytes: Math.min(limits.maxBytes, budget.left) });
    for (const entry of chosen) {
      const sink = await onEntry(entry);
      if (!sink || isDirectory(entry)) continue;
      await pipeline(memberBytes(zip, file, entry, budget), sink);
    }
  });
}

/** Runs `fn` on the opened zip (closed afterwards); what the zip reader throws is corruption. */
async function withZip<T>(file: string, fn: (zip: ZipFile) => Promise<T>): Promise<T> {
  let zip: ZipFile;
  try {
    zip = await openZip(file);
  } catch (e) {
    throw asCorrupt(e, file);
  }
  try {
    return await fn(zip);
  } catch (e) {
    throw asCorrupt(e, file);
  } finally {
    zip.close();
  }
}

/**
 * What can be checked without inflating: the signature (an HTML page is not a zip), the
 * central directory (a zip cut short has none) and the members' declared sizes against the
 * limits. The members' bytes and CRCs are checked when they are read (extractZip,
 * streamZipMembers). Returns the file entry names.
 */
export async function checkZipDirectory(file: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<{ entries: string[] }> {
  await checkSignature(file);
  return withZip(file, async (zip) => {
    const files = (await listEntries(zip)).filter((e) => !isDirectory(e));
    checkDeclared(file, files, limits);
    return { entries: files.map((e) => e.fileName) };
  });
}

const discard = (): Writable => new Writable({ write: (_chunk, _enc, cb) => cb() });
const everything = (): boolean => true;

/** Reads every entry through to the end (inflated, bytes counted, CRC checked); returns the file entry names. */
export async function validateZip(file: string, limits: ZipLimits = DEFAULT_ZIP_LIMITS): Promise<{ entries: string[] }> {
  await checkSignature(file);
  const entries: string[] = [];
  await walkZip(file, limits, everything, async (entry) => {
    if (isDirectory(entry)) return null;
    entries.push(entry.fileName);
    return discard();
  });
  return { entries };
}

/**
 * Streams the members `pick` selects, one after the other, into the sink `sinkFor` gives
 * (inflated bytes counted, CRC checked while streaming): read a member without unpacking it.
 * Returns the names streamed.
 */
export async function streamZipMembers(
  file: string,
  pick: (name: string) => boolean,
  sinkFor: (name: string, declaredSize: number) => Writable,
  limits: ZipLimits = DEFAULT_ZIP_LIMITS,
): Promise<string[]> {
  await checkSignature(file);
  const names: string[] = [];
  await walkZip(file, limits, pick, async (entry) => {
    if (isDirectory(entry)) return null;
    names.push(entry.fileName);
    return sinkFor(entry.fileName, entry.uncompressedSize);
  });
  return names;
}

// yauzl already refuses these names; checked again because extraction writes to disk.
function safeTarget(root: string, name: string): string {
  const target = path.resolve(root, name);
  const unsafe = path.isAbsolute(name) || /^[a-zA-Z]:/.test(name) || name.split(/[\\/]/).includes('..');
  if (unsafe || !target.startsWith(root + path.sep)) {
    throw new AgroError('corrupt_archive', `unsafe entry path: ${name}`);
  }
  return target;
}

export interface ExtractOptions {
  limits?: ZipLimits;
  /** The members to extract, by name in the archive (default: all). */
  only?: (name: string) => boolean;
  /**
   * Of the members `only` selects, those left in the zip for the caller to stream
   * (read/zip-source.ts): their declared sizes are checked with the others', nothing is
   * inflated or written.
   */
  leave?: (name: string) => boolean;
  /** What the archive may still inflate, shared with the zips around it and the members streamed later (default: limits.maxBytes). */
  budget?: ZipBudget;
}

/** A member left in the zip by extractMembers: its name in the archive and where extraction would have put it. */
export interface LeftMember {
  name: string;
  target: string;
}

/** Extracts the file entries `only` selects under destDir (but those `leave` keeps in the zip); on failure removes what it wrote. */
export async function extractMembers(file: string, destDir: string, o: ExtractOptions = {}): Promise<{ written: string[]; left: LeftMember[] }> {
  await checkSignature(file);
  const root = path.resolve(destDir);
  await mkdir(root, { recursive: true });
  const written = new Set<string>();
  const left: LeftMember[] = [];
  const limits = o.limits ?? DEFAULT_ZIP_LIMITS;
  try {
    await walkZip(file, limits, o.only ?? everything, async (entry) => {
      const target = safeTarget(root, entry.fileName);
      if (isDirectory(entry)) {
        await mkdir(target, { recursive: true });
        return null;
      }
      if (o.leave?.(entry.fileName)) {
        left.push({ name: entry.fileName, target });
        return null;
      }
      await mkdir(path.dirname(target), { recursive: true });
      written.add(target);
      return createWriteStream(target);
    }, o.budget ?? zipBudget(limits));
  } catch (e) {
    await Promise.all([...written].map((f) => rm(f, { force: true })));
    throw e;
  }
  return { written: [...written], left };
}

/** Extracts the file entries `only` selects under destDir; on failure removes what it wrote. */
export async function extractZip(file: string, destDir: string, o: ExtractOptions = {}): Promise<string[]> {
  return (await extractMembers(file, destDir, o)).written;
}
