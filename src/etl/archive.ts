// Zip validation and extraction. Government servers often answer with HTML error
// pages or cut archives short, so every entry is streamed end to end and its
// CRC-32 checked (yauzl checks sizes but not CRCs).
import { createWriteStream } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { crc32 } from 'node:zlib';
import yauzl, { type Entry, type ZipFile } from 'yauzl';
import { AgroError, isAgroError } from '../errors.ts';

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

function openEntry(zip: ZipFile, entry: Entry): Promise<Readable> {
  return new Promise((resolve, reject) => {
    zip.openReadStream(entry, (err, stream) => (err ? reject(err) : resolve(stream)));
  });
}

function crcCheck(entry: Entry): Transform {
  let crc = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      crc = crc32(chunk, crc);
      cb(null, chunk);
    },
    flush(cb) {
      const ok = crc >>> 0 === entry.crc32 >>> 0;
      cb(ok ? null : new Error(`CRC mismatch in ${entry.fileName}`));
    },
  });
}

async function streamEntry(zip: ZipFile, entry: Entry, sink: Writable): Promise<void> {
  await pipeline(await openEntry(zip, entry), crcCheck(entry), sink);
}

const isDirectory = (entry: Entry): boolean => entry.fileName.endsWith('/');

/** Visits entries one at a time (lazyEntries), so only one entry stream is open. */
async function walkZip(file: string, onEntry: (zip: ZipFile, entry: Entry) => Promise<void>): Promise<void> {
  let zip: ZipFile;
  try {
    zip = await openZip(file);
  } catch (e) {
    throw asCorrupt(e, file);
  }
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', resolve);
      zip.on('entry', (entry: Entry) => {
        onEntry(zip, entry).then(() => zip.readEntry(), reject);
      });
      zip.readEntry();
    });
  } catch (e) {
    throw asCorrupt(e, file);
  } finally {
    zip.close();
  }
}

const discard = (): Writable => new Writable({ write: (_chunk, _enc, cb) => cb() });

/** Reads every entry through to the end; returns the file entry names. */
export async function validateZip(file: string): Promise<{ entries: string[] }> {
  await checkSignature(file);
  const entries: string[] = [];
  await walkZip(file, async (zip, entry) => {
    if (isDirectory(entry)) return;
    entries.push(entry.fileName);
    await streamEntry(zip, entry, discard());
  });
  return { entries };
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

/** Extracts every file entry under destDir; on failure removes what it wrote. */
export async function extractZip(file: string, destDir: string): Promise<string[]> {
  await checkSignature(file);
  const root = path.resolve(destDir);
  await mkdir(root, { recursive: true });
  const written = new Set<string>();
  try {
    await walkZip(file, async (zip, entry) => {
      const target = safeTarget(root, entry.fileName);
      if (isDirectory(entry)) {
        await mkdir(target, { recursive: true });
        return;
      }
      await mkdir(path.dirname(target), { recursive: true });
      written.add(target);
      await streamEntry(zip, entry, createWriteStream(target));
    });
  } catch (e) {
    await Promise.all([...written].map((f) => rm(f, { force: true })));
    throw e;
  }
  return [...written];
}
