// funai-tis end to end against PostGIS: the real FUNAI sample (U+FFFD damage → blocked,
// then forced), the committed fixture (duplicates, repair, arrays, flags), unchanged
// reruns, a service URL, a drifted schema, and both field spellings.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FUNAI_FIXTURE, buildFunaiZip } from '../fixtures/funai-tis.ts';
import { FUNAI_FIELDS, funaiTis } from '../pipelines/funai-tis/index.ts';
import { describeRun } from '../src/cli/context.ts';
import { runPipeline } from '../src/etl/run.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { mapFields } from '../src/etl/stage-vector.ts';
import type { VectorLayer } from '../src/etl/vector-reader.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SAMPLE_DIR = path.join(ROOT, 'fixtures/samples/funai-tis');
const FIXTURE_DIR = path.join(ROOT, 'fixtures/funai-tis');

let db: TestDb;
let tmp: string;
const run = (source: string, extra: { force?: boolean } = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, funaiTis, { source, ...extra });
const quality = async (snapshotId: number) => (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
const servingRows = async () => (await db.pool.query('SELECT * FROM serving.funai_tis ORDER BY codigo')).rows;

/** U+FFFD occurrences counted straight from the DBF record bytes (EF BF BD), not through GDAL. */
function fffdInDbfRecords(dbf: string): number {
  const b = fs.readFileSync(dbf);
  const headerLen = b.readUInt16LE(8);
  const records = b.subarray(headerLen, headerLen + b.readUInt16LE(10) * b.readUInt32LE(4));
  let n = 0;
  for (let i = records.indexOf(Buffer.from([0xef, 0xbf, 0xbd])); i >= 0; i = records.indexOf(Buffer.from([0xef, 0xbf, 0xbd]), i + 3)) n++;
  return n;
}

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'funai-test-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('funai-tis', () => {
  let sampleZip: string;
  let fixtureSnapshot: number;

  test('the real sample is blocked by the U+FFFD gate, and only by it', async () => {
    sampleZip = path.join(tmp, 'sample', 'tis_poligonais.zip');
    const members = ['shp', 'shx', 'dbf', 'prj', 'cpg'].map((e) => ({ path: path.join(SAMPLE_DIR, `TerraIn_filtrado.${e}`), name: `TerraIn_filtrado.${e}` }));
    await zipFiles(sampleZip, members);
    const expected = fffdInDbfRecords(path.join(SAMPLE_DIR, 'TerraIn_filtrado.dbf'));
    expect(expected).toBe(21); // SAMPLES.md: 21 occurrences

    const out = await run(sampleZip);
    expect(out.status).toBe('blocked');
    expect(out.rows_read).toBe(2);
    expect(out.rows_loaded).toBe(2);
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['replacement_characters']);
    expect(out.gate?.failures[0].value).toBe(expected);
    const q = await quality(out.snapshot_id!);
    expect(q.facts.encoding.replacementChars).toBe(expected);
    expect(q.gate).toMatchObject({ passed: false, forced: false });
    const snap = await db.pool.query('SELECT status FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id]);
    expect(snap.rows[0].status).toBe('blocked');
    expect(await servingRows()).toEqual([]); // nothing was ever published
  });

  test('--force publishes the sample; attributes and geometry load right', async () => {
    const out = await run(sampleZip, { force: true });
    expect(out).toMatchObject({ status: 'published', forced: true, rows_read: 2, rows_loaded: 2, rows_rejected: 0 });
    const rows = await servingRows();
    expect(rows.map((r) => [r.codigo, r.nome])).toEqual([['33801', 'Parque do Xingu'], ['39001', 'Rio das Cobras']]);
    const xingu = rows[0];
    expect(xingu).toMatchObject({
      ufs: ['MT', 'PA'],
      fase: 'Regularizada',
      modalidade: 'Tradicionalmente ocupada',
      reestudo: null,
      data_atualizacao: '2025-04-24',
      coordenacao_regional: 'COORDENACAO REGIONAL XINGU',
      faixa_fronteira: false, // 'N\uFFFDo' still reads as "no"
      dominio_uniao: true,
      unidade_adm_codigo: '30202002060',
      unidade_adm_sigla: 'CR-XIN',
      area_declarada_ha: 2642003.9374,
      snapshot_id: out.snapshot_id,
    });
    expect(xingu.etnias).toHaveLength(15);
    expect(xingu.etnias[0]).toBe('Wauja');
    expect(xingu.municipios).toHaveLength(9);
    expect(xingu.municipios[0]).toBe('Feliz Natal');
    expect(xingu.extra).toEqual({ gid: 330 }); // epsg (always 0) is dropped
    expect(rows[1]).toMatchObject({ ufs: ['PR'], faixa_fronteira: true, data_atualizacao: '2025-06-06', unidade_adm_codigo: '30202002408' });

    // Geometry and geodesic area against the same shapefile read another way (ogr2ogr → WKT → PostGIS).
    const csv = path.join(tmp, 'sample.csv');
    execFileSync('ogr2ogr', ['-f', 'CSV', '-lco', 'GEOMETRY=AS_WKT', csv, path.join(SAMPLE_DIR, 'TerraIn_filtrado.shp')]);
    const recs: { WKT: string; terrai_cod: string }[] = parse(fs.readFileSync(csv), { columns: true });
    expect(recs).toHaveLength(2);
    for (const r of recs) {
      const ref = await db.pool.query(
        `SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromText($1), 4674), 4326)::geography) / 10000 AS ha,
                ST_NPoints(ST_GeomFromText($1)) AS npoints,
                ST_HausdorffDistance(ST_Transform(ST_SetSRID(ST_GeomFromText($1), 4674), 4326), t.geom) < 1e-9 AS same,
                t.area_calculada_ha, ST_NPoints(t.geom) AS t_npoints, ST_SRID(t.geom) AS srid, GeometryType(t.geom) AS type
           FROM serving.funai_tis t WHERE t.codigo = $2`,
        [r.WKT, r.terrai_cod],
      );
      const x = ref.rows[0];
      expect(x.area_calculada_ha).toBeCloseTo(x.ha, 6);
      expect(x).toMatchObject({ same: true, srid: 4326, type: 'MULTIPOLYGON', t_npoints: x.npoints });
    }
    const xinguArea = rows[0].area_calculada_ha;
    expect(xinguArea).toBeGreaterThan(2_600_000); // 2.64 M ha, within 0.1 % of the declared area
    expect(Math.abs(xinguArea - 2642003.9374) / 2642003.9374).toBeLessThan(0.001);
  });

  test('the committed fixture replaces the sample: duplicates, repair, arrays, flags', async () => {
    const out = await run(FIXTURE_DIR);
    expect(out).toMatchObject({ status: 'published', rows_read: 5, rows_loaded: 4, rows_rejected: 0 });
    // The duplicate key is dropped by design: the run's line adds up (read = loaded + dropped + rejected).
    expect(out.rows_dropped).toBe(1);
    expect(describeRun(out)).toMatch(/read 5, loaded 4, dropped 1, rejected 0 in /);
    fixtureSnapshot = out.snapshot_id!;
    const rows = await servingRows();
    expect(rows.map((r) => r.codigo)).toEqual(['90101', '90102', '90103', '90104']);
    expect(rows.every((r) => r.snapshot_id === fixtureSnapshot)).toBe(true);
    const [ti1, ti2, ti3, ti4] = rows;
    // Duplicate 90101: the copy updated last (read first) wins over the one read last.
    expect(ti1).toMatchObject({
      nome: 'Batovi', fase: 'Regularizada', data_atualizacao: '2024-03-15', municipios: ['Gaúcha do Norte', 'Paranatinga'],
      ufs: ['MT'], etnias: ['Wauja'], faixa_fronteira: false, dominio_uniao: true, coordenacao_regional: 'COORDENAÇÃO REGIONAL XINGU',
      unidade_adm_codigo: '30202002060', area_declarada_ha: 24368.2143, extra: { gid: 101 },
    });
    expect(ti2).toMatchObject({ ufs: ['AM', 'RR'], etnias: ['Yanomami', "Ye'kwana"], faixa_fronteira: true });
    expect(ti2.municipios).toHaveLength(7);
    expect(ti4).toMatchObject({ nome: 'Tekoha Guasu Guavirá', fase: 'Delimitada', dominio_uniao: false, ufs: ['PR'] });

    // Areas: geodesic, against PostGIS on the generator's own geometry (valid rows).
    const byId = Object.fromEntries(FUNAI_FIXTURE.map((r) => [r.id, r]));
    for (const [row, id] of [[ti1, 'TI1'], [ti2, 'TI2'], [ti3, 'TI3']] as const) {
      const ref = await db.pool.query(
        `SELECT ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON($1), 4674), 4326)::geography) / 10000 AS ha`,
        [JSON.stringify(byId[id].geometry)],
      );
      expect(row.area_calculada_ha).toBeCloseTo(ref.rows[0].ha, 6);
    }
    const shapes = await db.pool.query(
      `SELECT codigo, ST_NumGeometries(geom) AS parts, ST_NumInteriorRings(ST_GeometryN(geom, 1)) AS holes, ST_IsValid(geom) AS valid
         FROM serving.funai_tis ORDER BY codigo`,
    );
    expect(shapes.rows).toEqual([
      { codigo: '90101', parts: 1, holes: 0, valid: true },
      { codigo: '90102', parts: 2, holes: 0, valid: true },
      { codigo: '90103', parts: 1, holes: 1, valid: true },
      { codigo: '90104', parts: 2, holes: 0, valid: true }, // the bow-tie, repaired into its two triangles
    ]);
    // Hand-computed: the two triangles of the bow-tie meet where its edges cross (-54.18, -24.285).
    const tri = await db.pool.query(
      `SELECT ST_Area(ST_Transform(ST_SetSRID('MULTIPOLYGON(((-54.2 -24.3,-54.18 -24.285,-54.2 -24.27,-54.2 -24.3)),((-54.16 -24.27,-54.16 -24.3,-54.18 -24.285,-54.16 -24.27)))'::geometry, 4674), 4326)::geography) / 10000 AS ha`,
    );
    expect(ti4.area_calculada_ha).toBeCloseTo(tri.rows[0].ha, 6);

    const q = await quality(fixtureSnapshot);
    expect(q.gate).toMatchObject({ passed: true, forced: false, failures: [] });
    expect(q.facts.dropped).toEqual({ duplicate_key: 1 });
    expect(q.facts.rejected).toEqual({});
    expect(q.facts.geometry).toMatchObject({ invalid: 1, repaired: 1, rejected: 0, empty: 0, srid: 4674, sridAssumed: false, outsideBrazil: 0 });
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.fields).toMatchObject({ unknown: ['gid'], missingOptional: [] });
    expect(q.facts.fields.empty).toMatchObject({ nome: 0, ufs: 0, data_atualizacao: 0 });
    expect(q.change).toMatchObject({ previous_rows: 2, rows: 4, added: 4, removed: 2 });

    const idx = await db.pool.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'snap' AND tablename = $1 ORDER BY indexname`, [`funai_tis__s${fixtureSnapshot}`]);
    const defs = idx.rows.map((r) => r.indexdef).join('\n');
    expect(defs).toMatch(/USING gin \(ufs\)/);
    expect(defs).toMatch(/USING gist \(geom\)/);
    expect(defs).toMatch(/UNIQUE INDEX .* \(codigo\)/);
    const mt = await db.pool.query(`SELECT array_agg(codigo) AS c FROM serving.funai_tis WHERE ufs @> '{RR}'`);
    expect(mt.rows[0].c.sort()).toEqual(['90102', '90103']);
  });

  test('the same bytes again, even from a WFS-style URL, end as unchanged', async () => {
    const again = await run(FIXTURE_DIR);
    expect(again).toMatchObject({ status: 'unchanged', snapshot_id: fixtureSnapshot });

    const bytes = fs.readFileSync(path.join(FIXTURE_DIR, 'tis_poligonais.zip'));
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': bytes.length });
      res.end(bytes);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const url = `http://127.0.0.1:${port}/geoserver/Funai/ows?service=WFS&version=1.0.0&request=GetFeature&typeName=Funai%3Atis_poligonais&maxFeatures=10000&outputFormat=SHAPE-ZIP`;
      const viaUrl = await run(url);
      expect(viaUrl).toMatchObject({ status: 'unchanged', snapshot_id: fixtureSnapshot });
      expect(hits).toEqual([url.slice(url.indexOf('/geoserver'))]);
      expect(fs.existsSync(path.join(db.cfg.dataDir, 'raw', 'funai-tis', 'tis_poligonais.zip'))).toBe(true);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  test('a missing required column blocks the run before loading; the previous snapshot keeps serving', async () => {
    const dir = path.join(tmp, 'drift');
    await buildFunaiZip(dir, { dropFields: ['terrai_cod'] });
    const out = await run(dir);
    expect(out.status).toBe('blocked');
    expect(out.error?.code).toBe('required_field_missing');
    expect(out.error?.message).toMatch(/codigo/);
    expect(out.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['codigo'], looked_for: { codigo: expect.arrayContaining(['terrai_cod']) } }]);
    const rows = await servingRows();
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.snapshot_id === fixtureSnapshot)).toBe(true);
    const snap = await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id]);
    // blocked for its report, without tables (publishSnapshot refuses it even with --force)
    expect(snap.rows[0].status).toBe('blocked');
    const left = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'snap' AND tablename = $1`, [`funai_tis__s${out.snapshot_id}`]);
    expect(left.rows[0].n).toBe(0);
  });

  test('the WFS full names and the 10-character DBF names map to the same columns', () => {
    const layer = (names: string[]): VectorLayer => ({
      file: 'x.shp', name: 'x', srid: 4674, sridAssumed: false, encoding: 'UTF-8', encodingDecidedBy: 'cpg', encodingAssumed: false,
      fields: names.map((name) => ({ name, type: 'string' })), featureCount: 0,
    });
    const wfs = ['gid', 'terrai_codigo', 'terrai_nome', 'etnia_nome', 'municipio_nome', 'uf_sigla', 'superficie_perimetro_ha', 'fase_ti',
      'modalidade_ti', 'reestudo_ti', 'cr', 'faixa_fronteira', 'undadm_codigo', 'undadm_nome', 'undadm_sigla', 'dominio_uniao', 'data_atualizacao', 'epsg'];
    const dbf = ['gid', 'terrai_cod', 'terrai_nom', 'etnia_nome', 'municipio_', 'uf_sigla', 'superficie', 'fase_ti', 'modalidade',
      'reestudo_t', 'cr', 'faixa_fron', 'undadm_cod', 'undadm_nom', 'undadm_sig', 'dominio_un', 'data_atual', 'epsg'];
    for (const names of [wfs, dbf]) {
      const m = mapFields(layer(names), FUNAI_FIELDS);
      expect(m.missing).toEqual([]);
      expect(m.unknown).toEqual(['gid']);
      expect(new Set(m.index.values())).toEqual(new Set(FUNAI_FIELDS.map((f) => f.name)));
    }
  });

  test('uf_sigla lists split on every separator (/, e, comma, semicolon); an unknown token is loaded as given and counted', async () => {
    const written: Record<number, string> = { 90101: 'MT/PA', 90102: 'am e RR', 90103: 'RR;\u00a0AM ; ', 90104: 'PR / Paraná, SC' };
    const rows = FUNAI_FIXTURE.map((r) => ({ ...r, attributes: { ...r.attributes, uf_sigla: written[r.attributes.terrai_cod] } }));
    const out = await run(await buildFunaiZip(path.join(tmp, 'ufs'), { rows }));
    expect(out).toMatchObject({ status: 'published', rows_loaded: 4 });
    const got = Object.fromEntries((await servingRows()).map((r) => [r.codigo, r.ufs]));
    expect(got).toEqual({ 90101: ['MT', 'PA'], 90102: ['AM', 'RR'], 90103: ['RR', 'AM'], 90104: ['PR', 'PARANÁ', 'SC'] });
    const pa = await db.pool.query(`SELECT array_agg(codigo ORDER BY codigo) AS c FROM serving.funai_tis WHERE ufs @> '{PA}'`);
    expect(pa.rows[0].c).toEqual(['90101']);
    const q = await quality(out.snapshot_id!);
    expect(q.facts.notes).toContain('uf_sigla values that are not UF siglas (loaded as given): "PARANÁ" (1)');
  });

  test('the committed fixture matches a fresh build (rerun fixtures/funai-tis.ts if not)', async () => {
    const fresh = await buildFunaiZip(path.join(tmp, 'fresh'));
    expect(fs.readFileSync(fresh).equals(fs.readFileSync(path.join(FIXTURE_DIR, 'tis_poligonais.zip')))).toBe(true);
  });
});
