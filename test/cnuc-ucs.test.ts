// cnuc-ucs end to end against PostGIS: the committed fixture, an unchanged rerun, a
// second release replacing the first (with a duplicate code), an unknown state name
// (gate), a drifted schema, a nested zip, and the real MMA sample loaded in full.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CNUC_FIXTURE, buildCnucZip, type CnucRow } from '../fixtures/cnuc-ucs.ts';
import { cnucReleaseDate, cnucUcs } from '../pipelines/cnuc-ucs/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SAMPLE_DIR = path.join(ROOT, 'fixtures/samples/cnuc-ucs');
const FIXTURE_DIR = path.join(ROOT, 'fixtures/cnuc-ucs');

let db: TestDb;
let tmp: string;
const run = (source: string, extra: { force?: boolean } = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnucUcs, { source, ...extra });
const quality = async (snapshotId: number) => (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
const servingRows = async () => (await db.pool.query('SELECT * FROM serving.cnuc_ucs ORDER BY codigo')).rows;
const withAttrs = (rows: readonly CnucRow[], id: string, a: Record<string, string | null>): CnucRow[] =>
  rows.map((r) => (r.id === id ? { ...r, attributes: { ...r.attributes, ...a } } : r));

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'cnuc-test-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('cnuc-ucs', () => {
  let first: number;
  let second: number;

  test('the committed fixture loads: text areas, dd-mm-yyyy dates, state names → siglas', async () => {
    const out = await run(FIXTURE_DIR);
    expect(out).toMatchObject({ status: 'published', as_of: '2024-10-01', rows_read: 5, rows_loaded: 5, rows_rejected: 0 });
    first = out.snapshot_id!;
    const rows = await servingRows();
    expect(rows.map((r) => [r.codigo, r.ufs])).toEqual([
      ['0000.00.9001', ['DF', 'GO']],
      ['0000.00.9004', ['CE', 'PI']],
      ['0000.00.9005', ['PA']],
      ['0000.51.9003', ['MT']],
      ['0000.52.9002', ['GO']],
    ]);
    const uc2 = rows.find((r) => r.codigo === '0000.52.9002');
    expect(uc2).toMatchObject({
      uc_id: '9002', nome: 'PARQUE ESTADUAL ALTAMIRO DE MOURA PACHECO', categoria: 'Parque', grupo: 'Proteção Integral',
      esfera: 'Estadual', data_criacao: '1992-12-05', ato_criacao: 'Lei ordinária 11.878 de 30-12-1992', plano_manejo: 'Sim',
      area_total_ha: 3183.12, area_ato_ha: null, categoria_iucn: 'Category II', situacao: 'Ativo', limite: 'uc',
      municipios: ['GOIÂNIA (GO)', 'GOIANÁPOLIS (GO)', 'NERÓPOLIS (GO)', 'TEREZÓPOLIS DE GOIÁS (GO)'],
      area_bioma_ha: { cerrado: 3183.12 },
      extra: { area_ato_ha: 'Sem informação' }, // the text that was not a number, kept
    });
    const uc5 = rows.find((r) => r.codigo === '0000.00.9005');
    expect(uc5.area_bioma_ha).toEqual({ amazonia: 12350.1, marinho: 17228.26 });
    const shapes = await db.pool.query(`SELECT codigo, ST_NumGeometries(geom) AS parts, ST_NumInteriorRings(ST_GeometryN(geom, 1)) AS holes FROM serving.cnuc_ucs ORDER BY codigo`);
    expect(shapes.rows.map((r) => [r.codigo, r.parts, r.holes])).toEqual([
      ['0000.00.9001', 1, 0], ['0000.00.9004', 1, 1], ['0000.00.9005', 2, 0], ['0000.51.9003', 1, 0], ['0000.52.9002', 1, 0],
    ]);
    for (const r of CNUC_FIXTURE) {
      const ref = await db.pool.query(
        `SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON($1), 4674), 4326)::geography) / 10000 AS ha`,
        [JSON.stringify(r.geometry)],
      );
      expect(rows.find((x) => x.codigo === r.attributes.cd_cnuc).area_calculada_ha).toBeCloseTo(ref.rows[0].ha, 6);
    }
    const q = await quality(first);
    expect(q.gate).toMatchObject({ passed: true, forced: false, failures: [] });
    expect(q.facts.notes).toContain('area_ato_ha: 1 value(s) are not numbers, or negative areas (loaded as NULL, source text kept in extra)');
    expect(q.facts.fields.unknown).toEqual([]);
    expect(q.facts.fields.missingOptional).toEqual(['area_fonte_ha', 'nome_abreviado']); // 2024_02-only columns
    expect(q.facts.dates).toEqual({ unparseable: {}, placeholders: {} });
  });

  test('the same file again is unchanged', async () => {
    expect(await run(FIXTURE_DIR)).toMatchObject({ status: 'unchanged', snapshot_id: first });
  });

  test('a second release replaces the first in serving; a duplicate cd_cnuc keeps the copy read last', async () => {
    const dir = path.join(tmp, 'v2');
    const uc2 = CNUC_FIXTURE.find((r) => r.id === 'UC2')!;
    const rows = [
      ...withAttrs(CNUC_FIXTURE, 'UC3', { situacao: 'em cadastro' }),
      { ...uc2, id: 'UC2b', attributes: { ...uc2.attributes, nome_uc: 'PARQUE ESTADUAL ALTAMIRO DE MOURA PACHECO (LIMITE REVISTO)', ha_ato: '3200' } },
    ];
    await buildCnucZip(dir, { rows, zipName: 'shp_cnuc_2025_04.zip' });
    fs.copyFileSync(path.join(FIXTURE_DIR, 'shp_cnuc_2024_10.zip'), path.join(dir, 'shp_cnuc_2024_10.zip')); // the newest release in the folder wins
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'published', as_of: '2025-04-01', rows_read: 6, rows_loaded: 5 });
    second = out.snapshot_id!;
    const served = await servingRows();
    expect(served).toHaveLength(5);
    expect(served.every((r) => r.snapshot_id === second)).toBe(true);
    expect(served.find((r) => r.codigo === '0000.52.9002')).toMatchObject({ nome: 'PARQUE ESTADUAL ALTAMIRO DE MOURA PACHECO (LIMITE REVISTO)', area_ato_ha: 3200, extra: null });
    expect(served.find((r) => r.codigo === '0000.51.9003').situacao).toBe('em cadastro');
    const q = await quality(second);
    expect(q.facts.dropped).toEqual({ duplicate_key: 1 });
    expect(q.change).toMatchObject({ previous_snapshot_id: first, previous_rows: 5, added: 0, removed: 0 });
    const snaps = await db.pool.query(`SELECT snapshot_id, status FROM serving.snapshots WHERE dataset = 'cnuc-ucs' AND snapshot_id IN ($1, $2) ORDER BY 1`, [first, second]);
    expect(snaps.rows).toEqual([{ snapshot_id: first, status: 'superseded' }, { snapshot_id: second, status: 'current' }]);
  });

  test('a state name outside the 27-entry map fails the gate; the known names still load', async () => {
    const dir = path.join(tmp, 'guanabara');
    await buildCnucZip(dir, { rows: withAttrs(CNUC_FIXTURE, 'UC3', { uf: 'MATO GROSSO, GUANABARA' }), zipName: 'shp_cnuc_2025_05.zip' });
    const out = await run(dir);
    expect(out.status).toBe('blocked');
    expect(out.gate?.failures).toEqual([
      { rule: 'unknown_uf_name', message: '1 unit(s) name a state outside the 27-entry map: "GUANABARA" (1) (kept in extra.ufs)', value: 1, threshold: 0 },
    ]);
    const t = await db.pool.query(`SELECT ufs, extra FROM snap.${'"cnuc_ucs__s' + out.snapshot_id + '"'} WHERE codigo = '0000.51.9003'`);
    expect(t.rows[0]).toEqual({ ufs: ['MT'], extra: { ufs: 'MATO GROSSO, GUANABARA' } });
    expect((await servingRows()).every((r) => r.snapshot_id === second)).toBe(true);
  });

  test('a missing cd_cnuc column blocks the run; the previous snapshot keeps serving', async () => {
    const dir = path.join(tmp, 'drift');
    await buildCnucZip(dir, { dropFields: ['cd_cnuc'], zipName: 'shp_cnuc_2025_06.zip' });
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'blocked', error: { code: 'required_field_missing' }, gate: { passed: false, failures: [{ rule: 'required_field_missing', fields: ['codigo'] }] } });
    const served = await servingRows();
    expect(served).toHaveLength(5);
    expect(served.every((r) => r.snapshot_id === second)).toBe(true);
  });

  test('a shapefile inside a folder of the zip is found', async () => {
    const dir = path.join(tmp, 'nested');
    const zip = await buildCnucZip(dir, { zipName: 'shp_cnuc_2025_07.zip', folder: 'shp_cnuc_2025_07' });
    const out = await run(zip);
    expect(out).toMatchObject({ status: 'published', rows_loaded: 5, as_of: '2025-07-01' });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.layers).toEqual([{ name: 'shp_cnuc_2025_07', features: 5, srid: 4674, encoding: 'UTF-8', decided_by: 'cpg' }]);
  });

  test('the real MMA sample loads fully with exact values', async () => {
    const dir = path.join(tmp, 'sample');
    const members = ['shp', 'shx', 'dbf', 'prj', 'cpg'].map((e) => ({ path: path.join(SAMPLE_DIR, `UCs_filtradas.${e}`), name: `UCs_filtradas.${e}` }));
    await zipFiles(path.join(dir, 'shp_cnuc_2025_11.zip'), members);
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'published', as_of: '2025-11-01', rows_read: 16, rows_loaded: 16, rows_rejected: 0 });
    const rows = await servingRows();
    // cd_cnuc → [ufs, data_criacao], read off `ogrinfo -al` of UCs_filtradas.shp (uf, cria_ano).
    expect(Object.fromEntries(rows.map((r) => [r.codigo, [r.ufs, r.data_criacao]]))).toEqual({
      '0000.00.0028': [['BA', 'GO'], '2001-09-28'],
      '0000.00.0029': [['CE', 'PI'], '1996-11-27'],
      '0000.00.0222': [['AC'], '1990-03-13'],
      '0000.00.1517': [['AC'], '1990-01-24'],
      '0000.31.0355': [['MG'], '1995-09-02'],
      '0000.31.0892': [['MG'], '2004-11-06'],
      '0000.31.2612': [['MG'], '2011-12-30'],
      '0000.35.0844': [['SP'], '1968-09-25'],
      '0000.35.1703': [['SP'], '1998-12-01'],
      '0000.35.1718': [['SP'], '1998-12-04'],
      '0000.41.0548': [['PR'], '1995-12-06'],
      '0000.41.2260': [['PR'], '2010-12-23'],
      '0000.43.1988': [['RS'], '1998-10-26'],
      '0000.43.1996': [['RS'], '1997-04-14'],
      '0000.51.0463': [['MT'], '1996-06-19'],
      '0000.52.0900': [['GO'], '2001-05-10'],
    });
    expect(rows.find((r) => r.codigo === '0000.41.0548')).toMatchObject({
      uc_id: '548', docleg_id: '2135', wdpa_pid: '555599940',
      nome: 'ÁREA DE PROTEÇÃO AMBIENTAL ESTADUAL DA SERRA DA ESPERANÇA',
      categoria: 'Área de Proteção Ambiental', grupo: 'Uso Sustentável', esfera: 'Estadual', categoria_iucn: 'Category V',
      ato_criacao: 'Lei ordinária 9.905 de 27-01-1992', outros_atos: 'Decreto 1.438 de 06-12-1995 Revisão dos limites',
      area_total_ha: 204513.5, area_ato_ha: 206555, area_bioma_ha: { matlantica: 409027 },
      orgao_gestor: 'INSTITUTO AMBIENTAL DO PARANÁ - PR', situacao: 'Ativo', limite: 'uc', extra: null,
    });
    expect(rows.find((r) => r.codigo === '0000.41.0548').municipios).toEqual([
      'CRUZ MACHADO (PR)', 'GUARAPUAVA (PR)', 'INÁCIO MARTINS (PR)', 'IRATI (PR)', 'MALLET (PR)', 'PAULA FREITAS (PR)',
      'PAULO FRONTIN (PR)', 'PRUDENTÓPOLIS (PR)', 'RIO AZUL (PR)', 'UNIÃO DA VITÓRIA (PR)',
    ]);
    expect(rows.find((r) => r.codigo === '0000.00.0029')).toMatchObject({
      nome: 'ÁREA DE PROTEÇÃO AMBIENTAL SERRA DA IBIAPABA', esfera: 'Federal', area_total_ha: 1628729.07,
      area_bioma_ha: { caatinga: 985690.34, cerrado: 643047.7 },
    });
    expect(rows.find((r) => r.codigo === '0000.35.0844')).toMatchObject({ nome: 'PARQUE ESTADUAL DA CANTAREIRA', area_ato_ha: 0, categoria: 'Parque' });

    // Geodesic areas and geometry against the same shapefile read by ogr2ogr into PostGIS.
    const csv = path.join(tmp, 'cnuc.csv');
    execFileSync('ogr2ogr', ['-f', 'CSV', '-lco', 'GEOMETRY=AS_WKT', csv, path.join(SAMPLE_DIR, 'UCs_filtradas.shp')]);
    const recs: { WKT: string; cd_cnuc: string; ha_total: string }[] = parse(fs.readFileSync(csv), { columns: true });
    expect(recs).toHaveLength(16);
    let vertices = 0;
    for (const r of recs) {
      const x = (
        await db.pool.query(
          `SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromText($1), 4674), 4326)::geography) / 10000 AS ha, ST_NPoints(ST_GeomFromText($1)) AS n,
                  t.area_calculada_ha, ST_NPoints(t.geom) AS tn, t.area_total_ha
             FROM serving.cnuc_ucs t WHERE t.codigo = $2`,
          [r.WKT, r.cd_cnuc],
        )
      ).rows[0];
      expect(x.area_calculada_ha).toBeCloseTo(x.ha, 6);
      expect(x.tn).toBe(x.n);
      expect(x.area_total_ha).toBe(Number(r.ha_total));
      vertices += x.tn;
    }
    expect(vertices).toBe(71168); // SAMPLES.md: 71,168 vertices in total
    const q = await quality(out.snapshot_id!);
    expect(q.gate.passed).toBe(true);
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.geometry).toMatchObject({ invalid: 0, repaired: 0, rejected: 0 });
  });

  test('release date from the file name', () => {
    expect(cnucReleaseDate('shp_cnuc_2024_02.zip')).toBe('2024-02-01');
    expect(cnucReleaseDate('shp_cnuc_2024_13.zip')).toBeNull();
    expect(cnucReleaseDate('ucs.zip')).toBeNull();
  });

  test('the committed fixture matches a fresh build (rerun fixtures/cnuc-ucs.ts if not)', async () => {
    const fresh = await buildCnucZip(path.join(tmp, 'fresh'));
    expect(fs.readFileSync(fresh).equals(fs.readFileSync(path.join(FIXTURE_DIR, 'shp_cnuc_2024_10.zip')))).toBe(true);
  });
});
