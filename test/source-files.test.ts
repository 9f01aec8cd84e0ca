// The one folder picker: the official name (Unicode- and case-insensitive), then the newest
// pattern match, then the only file of its kind when an official name is declared; a folder
// without one fails naming what it holds. URLs: a file, a service request, a folder prefix.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, test } from 'vitest';
import { AgroError } from '../src/errors.ts';
import type { FetchedFile } from '../src/etl/download.ts';
import { fileDay, lastModifiedDay, pickSourceFile, resolveSource, type SourceLayout } from '../src/etl/source-files.ts';

const quilombos: SourceLayout = { fileName: 'Áreas de Quilombolas.zip', pattern: /quilomb.*\.zip$/i, ext: /\.zip$/i, what: 'Áreas de Quilombolas.zip' };
const mesh: SourceLayout = {
  pattern: /^BR_Municipios_(\d{4})\.zip$/i, ext: /\.zip$/i, what: 'BR_Municipios_<YYYY>.zip',
  newest: (names) => [...names].sort((a, b) => Number(a.slice(14, 18)) - Number(b.slice(14, 18))).at(-1)!,
};

describe('pickSourceFile', () => {
  test('the official name first, whatever its Unicode form and case', () => {
    const decomposed = 'A\u0301reas de quilombolas.ZIP';
    expect(pickSourceFile(['areas_2023_quilombos.zip', decomposed, 'notes.txt'], quilombos, '/drop')).toBe(decomposed);
  });

  test('then the newest pattern match, by the layout’s own order', () => {
    expect(pickSourceFile(['BR_Municipios_2024.zip', 'BR_Municipios_2019.zip', 'BR_UF_2024.zip'], mesh, '/m')).toBe('BR_Municipios_2024.zip');
    expect(pickSourceFile(['old_quilombos.zip', 'quilombolas_2024.zip'], quilombos, '/q')).toBe('quilombolas_2024.zip');
  });

  test('then the only file of its kind, when an official name is declared (a renamed manual drop)', () => {
    expect(pickSourceFile(['download (3).zip', 'readme.txt'], quilombos, '/q')).toBe('download (3).zip');
    expect(() => pickSourceFile(['malha.zip'], mesh, '/m')).toThrow(/\/m holds no BR_Municipios_<YYYY>.zip \(there: malha.zip\)/);
  });

  test('a folder without the file fails as source_not_found, naming what is there', () => {
    let err: unknown;
    try {
      pickSourceFile(['a.zip', 'b.zip', 'x.csv'], quilombos, '/q');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AgroError);
    expect((err as AgroError).code).toBe('source_not_found');
    expect((err as Error).message).toBe('source not found: /q holds no Áreas de Quilombolas.zip (there: a.zip, b.zip)');
  });
});

describe('resolveSource', () => {
  test('a file URL as is, a service request under the official name, a folder URL joined to it', () => {
    expect(resolveSource('https://x.example/d/q%C3%BAilombos.zip', quilombos)).toEqual({ uri: 'https://x.example/d/q%C3%BAilombos.zip', name: 'qúilombos.zip' });
    expect(resolveSource('https://x.example/wfs?request=GetFeature', quilombos)).toEqual({ uri: 'https://x.example/wfs?request=GetFeature', name: 'Áreas de Quilombolas.zip' });
    expect(resolveSource('https://x.example/d/', quilombos)).toEqual({ uri: 'https://x.example/d/%C3%81reas%20de%20Quilombolas.zip', name: 'Áreas de Quilombolas.zip' });
  });

  test('a missing local path is source_not_found', () => {
    expect(() => resolveSource('/nonexistent/folder', quilombos)).toThrow(/no such file or folder/);
  });
});

// A file's day is the day it was published in Brazil (Brasília time, UTC−3): SICAR's own page
// dates a release put up at 22:30 on 10 June "10/06/2025", while its Last-Modified reads
// 01:30 GMT on the 11th. The UTC day made the snapshot as of the 11th, a day its publisher
// never named (as_of=2025-06-10 found nothing), and let dates of the 11th pass as plausible.
describe('the day of a source file', () => {
  const fetched = (o: Partial<FetchedFile>): FetchedFile => ({ path: '/x', name: 'x.zip', sha256: '', size: 0, sourceUri: 'https://x.example/x.zip', fromCache: false, ...o });

  test("Last-Modified: the Brazilian day, either side of Brasília's midnight (03:00 UTC)", () => {
    expect(lastModifiedDay(fetched({ lastModified: 'Wed, 11 Jun 2025 01:30:00 GMT' }))).toBe('2025-06-10');
    expect(lastModifiedDay(fetched({ lastModified: 'Wed, 11 Jun 2025 02:59:59 GMT' }))).toBe('2025-06-10');
    expect(lastModifiedDay(fetched({ lastModified: 'Wed, 11 Jun 2025 03:00:00 GMT' }))).toBe('2025-06-11');
    // across a month and a year
    expect(lastModifiedDay(fetched({ lastModified: 'Sat, 01 Mar 2025 00:10:00 GMT' }))).toBe('2025-02-28');
    expect(lastModifiedDay(fetched({ lastModified: 'Wed, 01 Jan 2025 02:00:00 GMT' }))).toBe('2024-12-31');
    expect(lastModifiedDay(fetched({ lastModified: 'not a date' }))).toBeNull();
  });

  test("a manual drop's modification time: the Brazilian day too", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-day-'));
    try {
      const file = path.join(dir, 'tis_poligonais.zip');
      fs.writeFileSync(file, 'x');
      fs.utimesSync(file, new Date('2025-06-11T01:30:00Z'), new Date('2025-06-11T01:30:00Z'));
      expect(fileDay(fetched({ sourceUri: pathToFileURL(file).href }))).toBe('2025-06-10');
      fs.utimesSync(file, new Date('2025-06-11T12:00:00Z'), new Date('2025-06-11T12:00:00Z'));
      expect(fileDay(fetched({ sourceUri: pathToFileURL(file).href }))).toBe('2025-06-11');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
