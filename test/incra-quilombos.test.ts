// incra-quilombos end to end against PostGIS: the committed fixture (mixed date layouts,
// unparseable dates kept in extra, a repaired polygon, a duplicate code, accents), the
// accented official file name in a folder and behind a URL (prefix or full), a second
// snapshot replacing the first, and a drifted schema.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { INCRA_FIXTURE, INCRA_OVERFLOW_FIXTURE, buildIncraOverflowZip, buildIncraZip, type IncraRow } from '../fixtures/incra-quilombos.ts';
import { resolveSource } from '../src/etl/source-files.ts';
import { INCRA_FILE_NAME, incraQuilombos } from '../pipelines/incra-quilombos/index.ts';
import { joinSource } from '../src/etl/download.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FIXTURE_DIR = path.join(ROOT, 'fixtures/incra-quilombos');
const OVERFLOW_DIR = path.join(ROOT, 'fixtures/incra-quilombos-overflow');
const OFFICIAL_PATH = '/csv_shp/zip/%C3%81reas%20de%20Quilombolas.zip';

let db: TestDb;
let tmp: string;
const run = (source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, incraQuilombos, { source });
const quality = async (snapshotId: number) => (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
const servingRows = async () => (await db.pool.query('SELECT * FROM serving.incra_quilombos ORDER BY codigo')).rows;

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'incra-test-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('incra-quilombos', () => {
  let first: number;

  test('the committed fixture loads: mixed date layouts, repair, duplicate, accents', async () => {
    expect(fs.readdirSync(FIXTURE_DIR)).toEqual([INCRA_FILE_NAME]);
    const out = await run(FIXTURE_DIR);
    expect(out).toMatchObject({ status: 'published', rows_read: 6, rows_loaded: 5, rows_rejected: 0 });
    first = out.snapshot_id!;
    const rows = await servingRows();
    expect(rows.map((r) => [r.codigo, r.nome, r.comunidade, r.municipio, r.uf])).toEqual([
      ['1101', 'Jardim Cascata', 'Jardim Cascata', 'Aparecida de Goiânia', 'GO'],
      ['1102', 'Kalunga', 'Kalunga', 'Cavalcante', 'GO'],
      ['1103', 'Mesquita', 'Mesquita', 'Cidade Ocidental', 'GO'],
      ['1104', 'Ivaporunduva', 'Ivaporunduva', 'Eldorado', 'SP'],
      ['1105', 'Conceição das Crioulas', 'Conceição das Crioulas', 'Salgueiro', 'PE'],
    ]);
    const by = Object.fromEntries(rows.map((r) => [r.codigo, r]));
    // Duplicate 1101: the copy read last wins.
    expect(by['1101']).toMatchObject({ familias: 92, data_portaria: '2024-02-01', area_ha: 1297.4, titulado: false, fase: 'Portaria', extra: null });
    // yyyy-mm-dd and dd/mm/yyyy side by side in the same columns.
    expect(by['1102']).toMatchObject({
      data_portaria: '2004-01-20', data_publicacao_decreto: '2009-01-20', data_decreto: '2009-01-20', data_titulacao: '2023-11-14',
      titulado: true, fase: 'Titulado', familias: 1200, cod_sipra: 'GO0123', sr_incra: 'SR-04', numero_processo: '54150.000123/2004-41',
      esfera: 'federal', responsavel: 'INCRA', tipo_levantamento: 'Georreferenciado',
    });
    // A placeholder is NULL but not "unparseable" and not kept.
    expect(by['1103']).toMatchObject({ data_portaria: '2016-05-12', data_decreto: '2018-12-03', data_titulacao: null, extra: null });
    // Neither layout (or no such day): NULL, text kept in extra under the column's name.
    expect(by['1104']).toMatchObject({
      data_portaria: null, data_publicacao_decreto: '2010-05-14', data_titulacao: null, esfera: 'estadual', responsavel: 'ITESP',
      extra: { data_portaria: '31/02/2010', data_titulacao: '20100514' },
    });
    expect(by['1105']).toMatchObject({
      observacao: 'Área em sobreposição parcial com assentamento; revisão em curso', extra: { nr_escalao: '1:25.000' },
      area_ha: 16865.07, perimetro: 66.3, area_calc_fonte: 16866.1, perimetro_calc_fonte: 66.3,
    });

    const fx = Object.fromEntries(INCRA_FIXTURE.map((r) => [r.id, r]));
    for (const [codigo, id] of [['1101', 'Q1b'], ['1102', 'Q2'], ['1104', 'Q4'], ['1105', 'Q5']]) {
      const ref = await db.pool.query(`SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON($1), 4674), 4326)::geography) / 10000 AS ha`, [
        JSON.stringify(fx[id].geometry),
      ]);
      expect(by[codigo].area_calculada_ha).toBeCloseTo(ref.rows[0].ha, 6);
    }
    // The bow-tie (0,0)→(200,100)→(200,0)→(0,100) in 1e-4° repaired into the two triangles meeting at (100,50).
    const tri = await db.pool.query(
      `SELECT ST_Area(ST_Transform(ST_SetSRID('MULTIPOLYGON(((-47.96 -16.1,-47.95 -16.095,-47.96 -16.09,-47.96 -16.1)),((-47.94 -16.09,-47.94 -16.1,-47.95 -16.095,-47.94 -16.09)))'::geometry, 4674), 4326)::geography) / 10000 AS ha`,
    );
    expect(by['1103'].area_calculada_ha).toBeCloseTo(tri.rows[0].ha, 6);
    const shapes = await db.pool.query(`SELECT codigo, ST_NumGeometries(geom) AS parts, ST_IsValid(geom) AS valid, ST_SRID(geom) AS srid FROM serving.incra_quilombos ORDER BY codigo`);
    expect(shapes.rows.map((r) => [r.codigo, r.parts, r.valid, r.srid])).toEqual([
      ['1101', 1, true, 4326], ['1102', 2, true, 4326], ['1103', 2, true, 4326], ['1104', 1, true, 4326], ['1105', 1, true, 4326],
    ]);

    const q = await quality(first);
    expect(q.gate).toMatchObject({ passed: true, forced: false, failures: [] });
    expect(q.facts.dates).toEqual({ unparseable: { data_portaria: 1, data_titulacao: 1 }, placeholders: { data_titulacao: 1 } });
    expect(q.facts.dropped).toEqual({ duplicate_key: 1 });
    expect(q.facts.geometry).toMatchObject({ invalid: 1, repaired: 1, rejected: 0, srid: 4674 });
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.fields.unknown).toEqual(['nr_escalao']);
    expect(q.facts.fields.empty).toMatchObject({ data_portaria: 2, data_titulacao: 4, uf: 0, comunidade: 0 }) // Q4 and Q5; Q1b, Q3, Q4, Q5;
  });

  test('the official URL is the file name joined to the folder URL, percent-encoded', () => {
    expect(joinSource('https://certificacao.incra.gov.br/csv_shp/zip', INCRA_FILE_NAME)).toBe(`https://certificacao.incra.gov.br${OFFICIAL_PATH}`);
    expect(db.cfg.sources['incra-quilombos']).toBe(`https://certificacao.incra.gov.br${OFFICIAL_PATH}`);
    expect(resolveSource(`https://certificacao.incra.gov.br${OFFICIAL_PATH}`, incraQuilombos.spec.source)).toEqual({
      uri: `https://certificacao.incra.gov.br${OFFICIAL_PATH}`, name: INCRA_FILE_NAME,
    });
    expect(resolveSource('https://mirror.example/incra/', incraQuilombos.spec.source)).toEqual({
      uri: `https://mirror.example/incra${OFFICIAL_PATH.replace('/csv_shp/zip', '')}`, name: INCRA_FILE_NAME,
    });
  });

  test('the same zip over HTTP, by URL prefix or by the full encoded URL, is unchanged', async () => {
    const bytes = fs.readFileSync(path.join(FIXTURE_DIR, INCRA_FILE_NAME));
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url !== OFFICIAL_PATH) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': bytes.length });
      res.end(bytes);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      expect(await run(`${base}/csv_shp/zip/`)).toMatchObject({ status: 'unchanged', snapshot_id: first });
      expect(await run(`${base}${OFFICIAL_PATH}`)).toMatchObject({ status: 'unchanged', snapshot_id: first });
      expect(hits).toEqual([OFFICIAL_PATH, OFFICIAL_PATH]);
      expect(fs.readdirSync(path.join(db.cfg.dataDir, 'raw', 'incra-quilombos')).filter((f) => f.endsWith('.zip'))).toEqual([INCRA_FILE_NAME]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  test('a second snapshot from a folder (decomposed Unicode name, other zips beside it) replaces the first', async () => {
    const dir = path.join(tmp, 'drop');
    const rows: IncraRow[] = [
      ...INCRA_FIXTURE.map((r) => (r.id === 'Q4' ? { ...r, attributes: { ...r.attributes, fase: 'Titulado', dt_titulac: '2025-03-10' } } : r)),
      {
        id: 'Q6', role: 'accents',
        geometry: { type: 'Polygon', coordinates: [[[-44.5, -2.6], [-44.4, -2.6], [-44.4, -2.5], [-44.5, -2.5], [-44.5, -2.6]]] },
        attributes: { ...INCRA_FIXTURE[4].attributes, cd_quilomb: 1106, nm_comunid: 'Santa Rosa dos Pretos', nm_municip: 'Itapecuru Mirim', cd_uf: 'MA', nr_escalao: null },
      },
    ];
    const decomposed = INCRA_FILE_NAME.normalize('NFD');
    expect(decomposed).not.toBe(INCRA_FILE_NAME);
    await buildIncraZip(dir, { rows, zipName: decomposed });
    await buildIncraZip(dir, { rows: rows.slice(0, 1), zipName: 'outro.zip' });
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'published', rows_read: 7, rows_loaded: 6 });
    const served = await servingRows();
    expect(served.map((r) => r.codigo)).toEqual(['1101', '1102', '1103', '1104', '1105', '1106']);
    expect(served.every((r) => r.snapshot_id === out.snapshot_id)).toBe(true);
    expect(served.find((r) => r.codigo === '1104')).toMatchObject({ fase: 'Titulado', data_titulacao: '2025-03-10', extra: { data_portaria: '31/02/2010' } });
    expect(served.find((r) => r.codigo === '1106')).toMatchObject({ comunidade: 'Santa Rosa dos Pretos', uf: 'MA' });
    const q = await quality(out.snapshot_id!);
    expect(q.change).toMatchObject({ previous_snapshot_id: first, previous_rows: 5, rows: 6, added: 1, removed: 0 });
    expect(q.source.files.map((f: { name: string }) => f.name)).toEqual([INCRA_FILE_NAME]); // stored under the NFC name
  });

  test('a missing cd_quilomb column blocks the run; the previous snapshot keeps serving', async () => {
    const before = await servingRows();
    const dir = path.join(tmp, 'drift');
    await buildIncraZip(dir, { dropFields: ['cd_quilomb'] });
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'blocked', error: { code: 'required_field_missing' }, gate: { failures: [{ rule: 'required_field_missing' }] } });
    expect(out.error?.message).toMatch(/cd_quilomb/);
    expect(await servingRows()).toEqual(before);
  });

  test('the committed fixture matches a fresh build (rerun fixtures/incra-quilombos.ts if not)', async () => {
    const fresh = await buildIncraZip(path.join(tmp, 'fresh'));
    expect(fs.readFileSync(fresh).equals(fs.readFileSync(path.join(FIXTURE_DIR, INCRA_FILE_NAME)))).toBe(true);
    const overflow = await buildIncraOverflowZip(path.join(tmp, 'fresh-overflow'));
    expect(fs.readFileSync(overflow).equals(fs.readFileSync(path.join(OVERFLOW_DIR, INCRA_FILE_NAME)))).toBe(true);
  });

  test('overflowed cd_quilomb (the real layer\'s "**********"): every area is kept under a stable fallback key, counted', async () => {
    // The committed zip really holds asterisks in the N(10) cells (what a dBase writer leaves on overflow).
    const dir = path.join(tmp, 'unzipped-overflow');
    fs.mkdirSync(dir, { recursive: true });
    const { extractZip } = await import('../src/etl/archive.ts');
    const dbf = (await extractZip(path.join(OVERFLOW_DIR, INCRA_FILE_NAME), dir)).find((f) => f.endsWith('.dbf'))!;
    expect(fs.readFileSync(dbf).toString('latin1').split('**********').length - 1).toBe(6); // 5 keys + 1 nr_familia

    const out = await run(OVERFLOW_DIR);
    expect(out).toMatchObject({ status: 'published', rows_read: 7, rows_loaded: 7, rows_rejected: 0 });
    const rows = await servingRows();
    const by = Object.fromEntries(rows.map((r) => [r.comunidade + (r.comunidade === 'São José' ? `#${r.familias}` : ''), r]));
    expect(by['Rio dos Macacos']).toMatchObject({ codigo: 'processo:54160.000212/2006-31', uf: 'BA', familias: 67, extra: { codigo_origem: 'processo' } });
    // Two territories under one process number: neither takes it, each keeps its own name key.
    expect(by['Santa Rosa dos Pretos']).toMatchObject({ codigo: 'comunidade:MA/itapecuru mirim/santa rosa dos pretos', extra: { codigo_origem: 'comunidade' } });
    expect(by['Monge Belo']).toMatchObject({ codigo: 'comunidade:MA/itapecuru mirim/monge belo', extra: { codigo_origem: 'comunidade' } });
    // No process and a shared name: the geometry hash, distinct per polygon.
    expect(by['São José#40'].codigo).toMatch(/^geometria:[0-9a-f]{32}$/);
    expect(by['São José#22'].codigo).toMatch(/^geometria:[0-9a-f]{32}$/);
    expect(by['São José#40'].codigo).not.toBe(by['São José#22'].codigo);
    // Real codes stay codes; an overflowed number is NULL (no value), not kept as text.
    expect(by['Kalunga do Mimoso']).toMatchObject({ codigo: '1201', familias: null, extra: null });
    // A date after the release date (contract §3): NULL, its text kept.
    expect(by['Castainho']).toMatchObject({ codigo: '1202', data_portaria: null, data_decreto: '2015-08-19', extra: { data_portaria: '02/05/2061' } });

    const q = await quality(out.snapshot_id!);
    expect(q.facts.incra).toEqual({ chave_substituta: { comunidade: 2, geometria: 2, processo: 1 } });
    expect(q.facts.fields.overflowed).toEqual({ codigo: 5, familias: 1 });
    expect(q.facts.dates.implausible).toEqual({ data_portaria: 1 });
    expect(q.facts.rejected).toEqual({});
    expect(q.gate.passed).toBe(true);

    // The same release again under new bytes (another zip time) keeps the same keys: they are stable.
    const again = path.join(tmp, 'overflow-again');
    await buildIncraZip(again, { rows: [...INCRA_OVERFLOW_FIXTURE].reverse() });
    const o2 = await run(again);
    expect(o2.status).toBe('published');
    const q2 = await quality(o2.snapshot_id!);
    expect(q2.change).toMatchObject({ previous_rows: 7, rows: 7, added: 0, removed: 0 });
  });
});
