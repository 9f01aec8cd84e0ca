// The engine's readers on shapefiles as real agencies ship them (issue 6, A.1, A.2, C.6,
// C.7), each through a real pipeline run against PostGIS: UTF-8 without a .cpg under
// LDID 0x57 (older SICAR), ISO-8859-1 without a .cpg (INCRA), a .cst and GeoServer's WKT
// (FUNAI SHAPE-ZIP), the text gate (U+FFFD, double encoding), projected layers with their
// .prj (EPSG:3857, 31983), and a zip whose extra member inflates beyond the bound.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FUNAI_DBF_FIELDS, FUNAI_FIXTURE } from '../fixtures/funai-tis.ts';
import { SHAPEFILE_FIELDS, SHAPEFILE_TERM_IDS, shapefileAttributes, termById } from '../fixtures/ibama-embargos.ts';
import { INCRA_DBF_FIELDS, INCRA_FIXTURE, INCRA_ZIP_NAME } from '../fixtures/incra-quilombos.ts';
import {
  PRJ_GEOSERVER_SIRGAS2000, PRJ_SIRGAS2000_UTM23S, PRJ_WEB_MERCATOR, buildLayerZip, writeLayer, zipWithBigMember, type LayerFormat, type LayerRow,
} from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import { incraQuilombos } from '../pipelines/incra-quilombos/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { DEFAULT_ZIP_LIMITS } from '../src/etl/archive.ts';
import { layersFromZip } from '../src/etl/layers.ts';
import type { Pipeline } from '../src/etl/pipeline.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let tmp: string;

const run = (d: TestDb, p: Pipeline, source: string, extra: { uf?: string; force?: boolean } = {}) =>
  runPipeline({ cfg: d.cfg, pool: d.pool, log: d.log }, p, { source, ...extra });
const report = async (d: TestDb, snapshotId: number): Promise<QualityReport> =>
  (await d.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
/** A fresh folder under tmp holding one zip built from rows in a format. */
async function zipIn(folder: string, zipName: string, layer: string, fields: typeof AREA_IMOVEL_FIELDS, rows: readonly LayerRow[], f: LayerFormat) {
  const dir = path.join(tmp, folder);
  fs.mkdirSync(dir, { recursive: true });
  await buildLayerZip(path.join(dir, zipName), layer, fields, rows, f);
  return dir;
}

const GO_ROWS: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => ({
  geometry: r.geometry,
  attributes: r.id === 'GO2' ? { ...r.attributes, municipio: 'Plácido de Castro' } : { ...r.attributes },
}));
const INCRA_ROWS: LayerRow[] = INCRA_FIXTURE.map((r) => ({
  geometry: r.geometry,
  attributes: r.attributes.cd_quilomb === 1103 ? { ...r.attributes, nm_comunid: 'FAMÍLIA Magalhães' } : { ...r.attributes },
}));
const FUNAI_ROWS: LayerRow[] = FUNAI_FIXTURE.map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes } }));

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'readers-test-'));
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('encodings: .cpg, then .cst, then the LDID, then the bytes, in every pipeline', () => {
  test('SICAR: UTF-8 bytes without a .cpg under LDID 0x57 publish Plácido de Castro, not PlÃ¡cido', async () => {
    const dir = await zipIn('sicar-utf8-ldid57', 'GO_AREA_IMOVEL.zip', 'GO_AREA_IMOVEL', AREA_IMOVEL_FIELDS, GO_ROWS, { encoding: 'utf8', cpg: null, ldid: 0x57 });
    const out = await run(db, sicar, dir, { uf: 'GO' });
    expect(out.status).toBe('published');
    const names = (await db.pool.query(`SELECT DISTINCT municipio FROM serving.car_imovel WHERE uf = 'GO' ORDER BY 1`)).rows.map((r) => r.municipio);
    expect(names).toEqual(['Goiânia', 'Plácido de Castro', 'Rio Verde']);
    const q = await report(db, out.snapshot_id!);
    expect(q.facts.layers).toEqual([{ name: 'GO_AREA_IMOVEL', features: GO_ROWS.length, srid: 4674, encoding: 'UTF-8', decided_by: 'bytes' }]);
    expect(q.facts.encoding).toMatchObject({ name: 'UTF-8', assumed: true });
    expect(q.facts.notes).toContain('GO_AREA_IMOVEL has no .cpg or .cst: its DBF read as UTF-8 (decided by the bytes)');
    expect(q.facts.text?.findings).toEqual([]);
  });

  test('INCRA: ISO-8859-1 bytes without a .cpg publish FAMÍLIA, not FAM\uFFFDLIA', async () => {
    const dir = await zipIn('incra-latin1', INCRA_ZIP_NAME, INCRA_ZIP_NAME.replace(/\.zip$/, ''), INCRA_DBF_FIELDS, INCRA_ROWS, { encoding: 'latin1', cpg: null });
    const out = await run(db, incraQuilombos, dir);
    expect(out.status).toBe('published');
    const rows = (await db.pool.query(`SELECT codigo, nome, municipio FROM serving.incra_quilombos ORDER BY codigo`)).rows;
    expect(rows.find((r) => r.codigo === '1103')).toMatchObject({ nome: 'FAMÍLIA Magalhães' });
    expect(rows.map((r) => r.municipio)).toContain('Aparecida de Goiânia');
    expect(rows.map((r) => r.nome)).toContain('Conceição das Crioulas');
    const q = await report(db, out.snapshot_id!);
    expect(q.facts.layers[0]).toMatchObject({ encoding: 'ISO-8859-1', decided_by: 'bytes' });
    expect(q.gate.failures).toEqual([]);
  });

  test("FUNAI's SHAPE-ZIP: the charset from the .cst, the CRS from GeoServer's WKT (TOWGS84, AXIS)", async () => {
    const dir = await zipIn('funai-geoserver', 'tis_poligonais.zip', 'tis_poligonais', FUNAI_DBF_FIELDS, FUNAI_ROWS, {
      encoding: 'utf8', cpg: null, cst: 'UTF-8', prj: PRJ_GEOSERVER_SIRGAS2000,
    });
    const out = await run(db, funaiTis, dir);
    expect(out.error).toBeUndefined();
    expect(out.status).toBe('published');
    const q = await report(db, out.snapshot_id!);
    expect(q.facts.layers).toEqual([{ name: 'tis_poligonais', features: FUNAI_ROWS.length, srid: 4674, encoding: 'UTF-8', decided_by: 'cst' }]);
    expect(q.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false });
    expect(q.facts.encoding).toMatchObject({ name: 'UTF-8', assumed: false });
    const names = (await db.pool.query(`SELECT nome FROM serving.funai_tis`)).rows.map((r) => r.nome);
    expect(names).toContain('Tekoha Guasu Guavirá');
  });
});

describe('the gate fails on U+FFFD and on double-encoded text, whatever the pipeline', () => {
  test('a .cpg that lies (ISO-8859-1 bytes, UTF-8 .cpg): the bytes overrule it, INCRA publishes FAMÍLIA and says why', async () => {
    const dir = await zipIn('incra-lying-cpg', INCRA_ZIP_NAME, INCRA_ZIP_NAME.replace(/\.zip$/, ''), INCRA_DBF_FIELDS, INCRA_ROWS, { encoding: 'latin1', cpg: 'UTF-8' });
    const out = await run(db, incraQuilombos, dir);
    expect(out.status).toBe('published');
    const rows = (await db.pool.query(`SELECT codigo, nome, municipio FROM serving.incra_quilombos ORDER BY codigo`)).rows;
    expect(rows.find((r) => r.codigo === '1103')).toMatchObject({ nome: 'FAMÍLIA Magalhães' });
    expect(rows.map((r) => r.nome)).toContain('Conceição das Crioulas');
    const q = await report(db, out.snapshot_id!);
    expect(q.facts.layers[0]).toMatchObject({ encoding: 'ISO-8859-1', decided_by: 'bytes' });
    expect(q.facts.notes.find((n) => n.includes('.cpg says UTF-8'))).toMatch(/^Áreas de Quilombolas: \.cpg says UTF-8 but the DBF's bytes are not UTF-8 \(\d+ byte sequences undecodable, [1-9]\d* of them inside words; 0 multibyte\)$/);
    expect(q.facts.text?.findings).toEqual([]);
  });

  test('UTF-8 under its UTF-8 .cpg with one value written in latin1: U+FFFD blocks INCRA, with examples', async () => {
    const before = (await db.pool.query('SELECT codigo, nome FROM serving.incra_quilombos ORDER BY codigo')).rows;
    // every text as its UTF-8 bytes (through a latin1 writer), but community 1103's name and
    // 1104's phase in latin1
    const asUtf8Bytes = (v: unknown) => (typeof v === 'string' ? Buffer.from(v, 'utf8').toString('latin1') : v);
    const rows = INCRA_ROWS.map((r) => {
      const attributes = Object.fromEntries(Object.entries(r.attributes).map(([k, v]) => [k, asUtf8Bytes(v)]));
      if (r.attributes.cd_quilomb === 1103) return { ...r, attributes: { ...attributes, nm_comunid: r.attributes.nm_comunid } };
      if (r.attributes.cd_quilomb === 1104) return { ...r, attributes: { ...attributes, fase: r.attributes.fase } };
      return { ...r, attributes };
    });
    const dir = await zipIn('incra-damaged-utf8', INCRA_ZIP_NAME, INCRA_ZIP_NAME.replace(/\.zip$/, ''), INCRA_DBF_FIELDS, rows, { encoding: 'latin1', cpg: 'UTF-8' });
    const out = await run(db, incraQuilombos, dir);
    expect(out.status).toBe('blocked');
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['replacement_characters']);
    const q = await report(db, out.snapshot_id!);
    // Each column read with U+FFFD is counted, with its examples (serving's `nome` is a view of `comunidade`).
    const found = Object.fromEntries(q.facts.text!.findings.map((f) => [f.column, f.replacement]));
    expect(found).toEqual({ comunidade: 1, fase: 1 });
    expect(q.facts.text!.findings.find((f) => f.column === 'comunidade')!.examples).toEqual(['FAM\uFFFDLIA Magalh\uFFFDes']);
    expect(q.facts.text!.findings.find((f) => f.column === 'fase')!.examples).toEqual(['T\uFFFDtulo parcial']);
    expect(out.gate?.failures[0]).toMatchObject({ value: 2, threshold: 0 });
    expect(q.facts.layers[0]).toMatchObject({ encoding: 'UTF-8', decided_by: 'cpg' });
    expect((await db.pool.query('SELECT codigo, nome FROM serving.incra_quilombos ORDER BY codigo')).rows).toEqual(before);
  });

  test('text already double-encoded under a true UTF-8 .cpg (FAMÃ\u008dLIA): double_encoding blocks INCRA', async () => {
    const garble = (s: string) => Buffer.from(s, 'utf8').toString('latin1');
    const rows = INCRA_ROWS.map((r) => ({ ...r, attributes: { ...r.attributes, nm_comunid: garble(String(r.attributes.nm_comunid)), nm_municip: garble(String(r.attributes.nm_municip)) } }));
    const dir = await zipIn('incra-double', INCRA_ZIP_NAME, INCRA_ZIP_NAME.replace(/\.zip$/, ''), INCRA_DBF_FIELDS, rows, { encoding: 'utf8', cpg: 'UTF-8' });
    const out = await run(db, incraQuilombos, dir);
    expect(out.status).toBe('blocked');
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['double_encoding']);
    const q = await report(db, out.snapshot_id!);
    const municipio = q.facts.text!.findings.find((f) => f.column === 'municipio')!;
    expect(municipio.double_encoded).toBe(1); // Aparecida de Goiânia (its duplicate row is dropped)
    expect(municipio.examples).toEqual(['Aparecida de GoiÃ¢nia']);
    expect(out.gate?.failures[0].message).toMatch(/double-encoded/);
  });
});

describe('CRS: a labelled projected layer loads, checked against Brazil after transforming', () => {
  const areas = async (): Promise<Record<string, number>> =>
    Object.fromEntries((await db.pool.query(`SELECT car, area_calculada_ha FROM serving.car_imovel WHERE uf = 'GO'`)).rows.map((r) => [r.car, r.area_calculada_ha]));

  test('SICAR GO in EPSG:3857 (ArcGIS WKT) and in SIRGAS 2000 / UTM 23S publish the same properties', async () => {
    const reference = await areas(); // the UTF-8 run above, in SIRGAS 2000
    expect(Object.keys(reference).length).toBeGreaterThan(3);
    for (const [epsg, prj] of [[3857, PRJ_WEB_MERCATOR], [31983, PRJ_SIRGAS2000_UTM23S]] as const) {
      const dir = await zipIn(`sicar-${epsg}`, 'GO_AREA_IMOVEL.zip', 'GO_AREA_IMOVEL', AREA_IMOVEL_FIELDS, GO_ROWS, { encoding: 'utf8', cpg: 'UTF-8', prj, epsg });
      const out = await run(db, sicar, dir, { uf: 'GO' });
      expect(out.status, `EPSG:${epsg}`).toBe('published');
      expect(out.rows_rejected).toBe(0);
      const q = await report(db, out.snapshot_id!);
      expect(q.facts.geometry).toMatchObject({ srid: epsg, sridAssumed: false, outsideBrazil: 0 });
      const got = await areas();
      expect(Object.keys(got).sort()).toEqual(Object.keys(reference).sort());
      for (const [car, ha] of Object.entries(reference)) expect(Math.abs(got[car] - ha) / ha, `${car} in EPSG:${epsg}`).toBeLessThan(1e-5);
    }
  });

  test("IBAMA's adm_embargo_a in SIRGAS 2000 / UTM 23S: polygons transformed, the DMS point columns still read as degrees", async () => {
    const rows = SHAPEFILE_TERM_IDS.map((id) => termById(id)).map((t) => ({ geometry: t.geometry!, attributes: shapefileAttributes(t) }));
    const dir = await zipIn('ibama-31983', 'adm_embargo_a.zip', 'adm_embargo_a', SHAPEFILE_FIELDS, rows, { encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_SIRGAS2000_UTM23S, epsg: 31983 });
    const out = await run(db, ibamaEmbargos, path.join(dir, 'adm_embargo_a.zip'));
    expect(out).toMatchObject({ status: 'published', rows_read: 3, rows_loaded: 3, rows_rejected: 0 });
    const q = await report(db, out.snapshot_id!);
    expect(q.facts.geometry).toMatchObject({ srid: 31983, sridAssumed: false, outsideBrazil: 0 });
    const got = (await db.pool.query(`SELECT geom IS NOT NULL AS poly, geom_ponto IS NOT NULL AS pt FROM serving.ibama_embargos ORDER BY numero_tad`)).rows;
    expect(got).toEqual(rows.map(() => ({ poly: true, pt: true })));
  });

  test('INCRA in EPSG:3857 loads too', async () => {
    const dir = await zipIn('incra-3857', INCRA_ZIP_NAME, INCRA_ZIP_NAME.replace(/\.zip$/, ''), INCRA_DBF_FIELDS, INCRA_ROWS, {
      encoding: 'utf8', cpg: 'UTF-8', prj: PRJ_WEB_MERCATOR, epsg: 3857,
    });
    const out = await run(db, incraQuilombos, dir);
    expect(out).toMatchObject({ status: 'published', rows_rejected: 0 });
    expect((await report(db, out.snapshot_id!)).facts.geometry).toMatchObject({ srid: 3857, outsideBrazil: 0 });
  });
});

describe('archives: members that inflate beyond the bound', () => {
  const MIB = 2 ** 20;
  let layerFiles: { path: string; name: string }[];
  let bigZip: string;

  beforeAll(async () => {
    const dir = path.join(tmp, 'funai-parts');
    fs.mkdirSync(dir, { recursive: true });
    layerFiles = (await writeLayer(dir, 'tis_poligonais', FUNAI_DBF_FIELDS, FUNAI_ROWS, { encoding: 'utf8', cpg: 'UTF-8' })).map((p) => ({ path: p, name: path.basename(p) }));
    bigZip = await zipWithBigMember(path.join(tmp, 'funai-big', 'tis_poligonais.zip'), layerFiles, { name: 'dump.bin', bytes: 64 * MIB });
    expect(fs.statSync(bigZip).size).toBeLessThan(MIB); // 64 MiB of zeros deflate to ~64 KB
  });

  test('with a bound of 8 MiB the zip is refused at download, stays out of the raw store, and the last good snapshot keeps serving', async () => {
    const small = await testDatabase({ AGRO_MAX_UNZIPPED_BYTES: String(8 * MIB) });
    try {
      const goodDir = path.join(tmp, 'funai-good');
      fs.mkdirSync(goodDir, { recursive: true });
      const { zipFiles } = await import('../fixtures/lib/shapefile-writer.ts');
      await zipFiles(path.join(goodDir, 'tis_poligonais.zip'), layerFiles);
      const good = await run(small, funaiTis, goodDir);
      expect(good.status).toBe('published');
      const rawDir = path.join(small.dataDir, 'raw', 'funai-tis');
      const stored = fs.readFileSync(path.join(rawDir, 'tis_poligonais.zip'));

      const out = await run(small, funaiTis, path.dirname(bigZip));
      expect(out.status).toBe('failed');
      expect(out.error?.code).toBe('archive_too_large');
      expect(out.error?.message).toMatch(/tis_poligonais\.zip: its members declare 64\.\d MiB uncompressed, more than the 8\.0 MiB allowed/);
      expect(fs.readFileSync(path.join(rawDir, 'tis_poligonais.zip')).equals(stored)).toBe(true);
      expect(fs.readdirSync(rawDir).filter((n) => n.includes('.part'))).toEqual([]);
      const serving = await small.pool.query('SELECT DISTINCT snapshot_id FROM serving.funai_tis');
      expect(serving.rows.map((r) => Number(r.snapshot_id))).toEqual([good.snapshot_id]);
    } finally {
      await small.drop();
    }
  });

  test('under the default bound the zip loads, and only the layer members are ever written to disk', async () => {
    const work = path.join(tmp, 'funai-big-work');
    const layers = await layersFromZip(bigZip, work, { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    expect(layers.map((l) => l.name)).toEqual(['tis_poligonais']);
    const written = fs.readdirSync(work, { recursive: true }).map(String).sort();
    // The .shp is not even written: the streaming reader inflates it straight from the zip.
    expect(written).toEqual(['tis_poligonais', ...['cpg', 'dbf', 'prj', 'shx'].map((e) => `tis_poligonais/tis_poligonais.${e}`)]);
    expect(layers.map((l) => [l.reader, l.zipped?.entry])).toEqual([['shp-stream', 'tis_poligonais.shp']]);

    const out = await run(db, funaiTis, path.dirname(bigZip));
    expect(out.status).toBe('published');
  });

  test('zips inside the zip share one budget: two inner zips each under the bound are refused together', async () => {
    const inner = async (name: string) =>
      zipWithBigMember(path.join(tmp, 'nested', name), layerFiles.map((f) => ({ ...f, name: `${name.slice(0, -4)}/${f.name}` })), { name: `${name.slice(0, -4)}/extra.prj`, bytes: 3 * MIB });
    const { zipFiles } = await import('../fixtures/lib/shapefile-writer.ts');
    const outer = path.join(tmp, 'nested', 'outer.zip');
    await zipFiles(outer, [await inner('a.zip'), await inner('b.zip')].map((p) => ({ path: p, name: path.basename(p) })));
    const limits = { ...DEFAULT_ZIP_LIMITS, maxBytes: 5 * MIB };
    expect(await layersFromZip(await inner('a.zip'), path.join(tmp, 'nested-one'), { srid: 4674, limits })).toHaveLength(1);
    await expect(layersFromZip(outer, path.join(tmp, 'nested-work'), { srid: 4674, limits, maxDepth: 2 })).rejects.toMatchObject({ code: 'archive_too_large' });
    expect(await layersFromZip(outer, path.join(tmp, 'nested-work2'), { srid: 4674, limits: DEFAULT_ZIP_LIMITS, maxDepth: 2 })).toHaveLength(2);
  });
});
