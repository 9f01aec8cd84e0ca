import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { DEFAULT_ZIP_LIMITS, extractZip, validateZip } from '../src/etl/archive.ts';
import { zipWithBigMember } from '../fixtures/readers.ts';

interface ZipInput {
  name: string;
  data: string | Buffer;
  compress?: boolean;
}

async function buildZip(files: ZipInput[], dirs: string[] = []): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const d of dirs) zip.addEmptyDirectory(d);
  for (const f of files) zip.addBuffer(Buffer.from(f.data), f.name, { compress: f.compress ?? true });
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Rewrites an entry name in place (local header and central directory); names must have equal length. */
function renameEntry(zip: Buffer, from: string, to: string): Buffer {
  expect(from.length).toBe(to.length);
  const out = Buffer.from(zip);
  let hits = 0;
  for (let i = out.indexOf(from); i >= 0; i = out.indexOf(from, i + 1)) {
    out.write(to, i, 'latin1');
    hits++;
  }
  expect(hits).toBe(2);
  return out;
}

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(path.join(os.tmpdir(), 'agro-archive-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function put(name: string, bytes: Buffer | string): Promise<string> {
  const file = path.join(tmp, name);
  await writeFile(file, bytes);
  return file;
}

const TEXT = 'linha;valor\n'.repeat(500);

describe('validateZip / extractZip', () => {
  it('extracts a valid zip keeping subfolders', async () => {
    const zip = await put(
      'ok.zip',
      await buildZip(
        [
          { name: 'a.txt', data: 'alpha' },
          { name: 'sub/dir/b.csv', data: TEXT },
          { name: 'sub/stored.bin', data: Buffer.from([0, 1, 2, 250]), compress: false },
        ],
        ['empty/'],
      ),
    );
    expect(await validateZip(zip)).toEqual({ entries: ['a.txt', 'sub/dir/b.csv', 'sub/stored.bin'] });

    const dest = path.join(tmp, 'out');
    const files = await extractZip(zip, dest);
    expect(files).toEqual([path.join(dest, 'a.txt'), path.join(dest, 'sub/dir/b.csv'), path.join(dest, 'sub/stored.bin')]);
    expect(await readFile(files[0], 'utf8')).toBe('alpha');
    expect(await readFile(files[1], 'utf8')).toBe(TEXT);
    expect([...(await readFile(files[2]))]).toEqual([0, 1, 2, 250]);
    expect(existsSync(path.join(dest, 'empty'))).toBe(true);
  });

  it('accepts an empty zip', async () => {
    const zip = await put('empty.zip', await buildZip([]));
    expect((await readFile(zip)).subarray(0, 4).toString('hex')).toBe('504b0506');
    expect(await validateZip(zip)).toEqual({ entries: [] });
    expect(await extractZip(zip, path.join(tmp, 'out'))).toEqual([]);
  });

  it('rejects a truncated zip as corrupt_archive', async () => {
    const full = await buildZip([{ name: 'a.csv', data: TEXT }, { name: 'b.csv', data: TEXT + 'x' }]);
    const zip = await put('cut.zip', full.subarray(0, Math.floor(full.length * 0.6)));
    await expect(validateZip(zip)).rejects.toMatchObject({ code: 'corrupt_archive' });
    await expect(extractZip(zip, path.join(tmp, 'out'))).rejects.toMatchObject({ code: 'corrupt_archive' });
  });

  it('detects flipped entry bytes through the CRC and leaves nothing extracted', async () => {
    const content = 'the quick brown fox jumps over the lazy dog\n'.repeat(20);
    const full = await buildZip([
      { name: 'first.txt', data: 'fine' },
      { name: 'data.txt', data: content, compress: false },
    ]);
    const at = full.indexOf(content);
    expect(at).toBeGreaterThan(0);
    const bad = Buffer.from(full);
    bad[at + 100] ^= 0xff;
    const zip = await put('flipped.zip', bad);

    await expect(validateZip(zip)).rejects.toMatchObject({ code: 'corrupt_archive', message: expect.stringContaining('CRC mismatch in data.txt') });
    const dest = path.join(tmp, 'out');
    await expect(extractZip(zip, dest)).rejects.toMatchObject({ code: 'corrupt_archive' });
    expect(existsSync(path.join(dest, 'first.txt'))).toBe(false);
    expect(existsSync(path.join(dest, 'data.txt'))).toBe(false);
  });

  it('reports HTML bytes as html_instead_of_archive', async () => {
    const file = await put('page.zip', '\n  <!DOCTYPE html><html><body>Erro 500</body></html>');
    await expect(validateZip(file)).rejects.toMatchObject({ code: 'html_instead_of_archive' });
    await expect(extractZip(file, path.join(tmp, 'out'))).rejects.toMatchObject({ code: 'html_instead_of_archive' });
  });

  it('reports other non-zip bytes as corrupt_archive', async () => {
    const file = await put('junk.zip', 'CD_MUN;NM_MUN\n');
    await expect(validateZip(file)).rejects.toMatchObject({ code: 'corrupt_archive', message: expect.stringContaining('not a zip') });
  });

  it('rejects path traversal and absolute entry names', async () => {
    const dest = path.join(tmp, 'nested', 'out');
    const dotdot = await put('dotdot.zip', renameEntry(await buildZip([{ name: 'zz/evil.txt', data: 'x' }]), 'zz/evil.txt', '../evil.txt'));
    await expect(extractZip(dotdot, dest)).rejects.toMatchObject({ code: 'corrupt_archive', message: expect.stringContaining('../evil.txt') });
    await expect(validateZip(dotdot)).rejects.toMatchObject({ code: 'corrupt_archive' });
    expect(existsSync(path.join(tmp, 'nested', 'evil.txt'))).toBe(false);

    const abs = await put('abs.zip', renameEntry(await buildZip([{ name: 'xtmp/agro-evil.txt', data: 'x' }]), 'xtmp/agro-evil.txt', '/tmp/agro-evil.txt'));
    await expect(extractZip(abs, dest)).rejects.toMatchObject({ code: 'corrupt_archive', message: expect.stringContaining('/tmp/agro-evil.txt') });
    expect(await readdir(dest)).toEqual([]);
  });

  it('extracts only the members asked for', async () => {
    const zip = await put('some.zip', await buildZip([{ name: 'a.shp', data: 'shp' }, { name: 'dir/a.dbf', data: 'dbf' }, { name: 'leia-me.pdf', data: TEXT }]));
    const dest = path.join(tmp, 'out');
    const files = await extractZip(zip, dest, { only: (n) => /\.(shp|dbf)$/.test(n) });
    expect(files).toEqual([path.join(dest, 'a.shp'), path.join(dest, 'dir/a.dbf')]);
    expect(existsSync(path.join(dest, 'leia-me.pdf'))).toBe(false);
  });
});

describe('bounds on what a zip inflates to', () => {
  const MIB = 2 ** 20;
  const small = { ...DEFAULT_ZIP_LIMITS, maxBytes: 4 * MIB };
  let layer: { path: string; name: string }[];
  beforeEach(async () => {
    layer = [{ path: await put('a.shp', 'shape bytes'), name: 'a.shp' }, { path: await put('a.dbf', 'dbf bytes'), name: 'a.dbf' }];
  });

  it('refuses members whose declared sizes add up beyond maxBytes, before inflating anything', async () => {
    const zip = await zipWithBigMember(path.join(tmp, 'big.zip'), layer, { name: 'dump.bin', bytes: 16 * MIB });
    const err = { code: 'archive_too_large', message: expect.stringContaining('big.zip: its members declare 16.0 MiB uncompressed, more than the 4.0 MiB allowed') };
    await expect(validateZip(zip, small)).rejects.toMatchObject(err);
    const dest = path.join(tmp, 'out');
    await expect(extractZip(zip, dest, { limits: small })).rejects.toMatchObject(err);
    expect(existsSync(path.join(dest, 'a.shp'))).toBe(false);
    // Left out, the big member is never read: the layer's members extract within the bound.
    expect(await extractZip(zip, dest, { limits: small, only: (n) => n.startsWith('a.') })).toHaveLength(2);
    // The default bound takes it.
    expect((await validateZip(zip)).entries).toEqual(['a.shp', 'a.dbf', 'dump.bin']);
  });

  it('refuses a big member that inflates more than maxRatio times its compressed size', async () => {
    // The default floor is 100 MiB; 1 MiB here keeps the test fast.
    const zip = await zipWithBigMember(path.join(tmp, 'bomb.zip'), layer, { name: 'bomb.bin', bytes: 16 * MIB });
    const limits = { ...DEFAULT_ZIP_LIMITS, ratioFloor: MIB };
    await expect(validateZip(zip, limits)).rejects.toMatchObject({ code: 'archive_too_large', message: expect.stringMatching(/bomb\.bin declares 16\.0 MiB from 0\.0 MiB \(ratio \d+, at most 200 allowed: AGRO_MAX_UNZIP_RATIO\)/) });
    expect((await validateZip(zip, { ...limits, maxRatio: 2000 })).entries).toContain('bomb.bin');
  });

  /** The zip with `member`'s declared uncompressed size set to `size`: local header (offset 22) and central directory (offset 24). */
  function declareSize(zip: Buffer, member: string, size: number): Buffer {
    const lied = Buffer.from(zip);
    let patched = 0;
    for (const [sig, at] of [[0x04034b50, 22], [0x02014b50, 24]] as const) {
      for (let i = lied.indexOf(Buffer.from(member)); i > 0; i = lied.indexOf(Buffer.from(member), i + 1)) {
        const start = sig === 0x04034b50 ? i - 30 : i - 46;
        if (start >= 0 && lied.readUInt32LE(start) === sig) {
          lied.writeUInt32LE(size, start + at);
          patched++;
        }
      }
    }
    expect(patched).toBe(2);
    return lied;
  }

  it('counts the bytes while inflating: a member that declares less than it holds is refused, and nothing stays on disk', async () => {
    const zip = await buildZip([{ name: 'a.shp', data: 'shape bytes' }, { name: 'dump.bin', data: Buffer.alloc(2 * MIB) }]);
    const file = await put('lied.zip', declareSize(zip, 'dump.bin', 1000));
    await expect(validateZip(file, small)).rejects.toMatchObject({ code: 'corrupt_archive', message: expect.stringMatching(/dump\.bin|too many bytes/) });
    const dest = path.join(tmp, 'out');
    await expect(extractZip(file, dest, { limits: small })).rejects.toMatchObject({ code: 'corrupt_archive' });
    expect(await readdir(dest)).toEqual([]);
  });

  it('a deflated member that inflates to fewer bytes than it declares is refused (a short member is no whole file), nothing stays on disk', async () => {
    const data = Buffer.from(TEXT);
    const zip = await buildZip([{ name: 'a.shp', data: 'shape bytes' }, { name: 'short.dbf', data }]);
    const file = await put('short.zip', declareSize(zip, 'short.dbf', data.length + 1000));
    const err = { code: 'corrupt_archive', message: expect.stringContaining(`short.zip: short.dbf: ${data.length} bytes inflated, ${data.length + 1000} declared`) };
    await expect(validateZip(file, small)).rejects.toMatchObject(err);
    const dest = path.join(tmp, 'out');
    await expect(extractZip(file, dest, { limits: small })).rejects.toMatchObject(err);
    expect(await readdir(dest)).toEqual([]);
  });
});
