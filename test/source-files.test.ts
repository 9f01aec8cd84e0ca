// The one folder picker: the official name (Unicode- and case-insensitive), then the newest
// pattern match, then the only file of its kind when an official name is declared; a folder
// without one fails naming what it holds. URLs: a file, a service request, a folder prefix.
import { describe, expect, test } from 'vitest';
import { AgroError } from '../src/errors.ts';
import { pickSourceFile, resolveSource, type SourceLayout } from '../src/etl/source-files.ts';

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
