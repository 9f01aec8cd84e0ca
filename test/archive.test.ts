import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import yazl from 'yazl';
import { extractZip, validateZip } from '../src/etl/archive.ts';

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
});
