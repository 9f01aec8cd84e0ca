// The IBAMA embargo pipeline on the generated fixtures (fixtures/ibama-embargos.ts): the
// CSV route (inline WKT, a >128 KB cell, repair, duplicates, point-only terms, status
// semantics, documents and their HMAC), the shapefile route giving the same canonical
// values, variants (legacy headers, rejections and the gate, a missing required column)
// and a truncated download that fails while the previous snapshot keeps serving.
// Expectations come from the CSV read a second way (csv-parse/sync, no staging) and from
// PostGIS run directly on the WKT text, not from the pipeline's own SQL.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'csv-parse/sync';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  IBAMA_FIXTURE_DIR, IBAMA_RELEASE_DATE, IBAMA_TERMS, IBAMA_VARIANTS, IBAMA_VARIANT_TERMS, WORKFLOW_COLUMNS, encodeText, ibamaCsv,
  termById, toDms, truncatedIbamaCsv, writeIbamaCsv, writeIbamaVariants, type CsvRow, type IbamaTerm,
} from '../fixtures/ibama-embargos.ts';
import { SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { ibamaEmbargos, type EmbargoFacts } from '../pipelines/ibama-embargos/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { DEV_HMAC_KEY } from '../src/config.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { createPool } from '../src/db/pool.ts';
import type { Logger } from '../src/log.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

type Report = QualityReport & { facts: QualityReport['facts'] & { embargos: EmbargoFacts } };

const CSV_FILE = path.join(IBAMA_FIXTURE_DIR, 'termo_embargo.csv');
const ZIP_FILE = path.join(IBAMA_FIXTURE_DIR, 'shapefile', 'adm_embargo_a.zip');

/** The committed CSV read another way: csv-parse/sync, one object per record, values untouched. */
const RAW: Record<string, string>[] = parse(fs.readFileSync(CSV_FILE), { delimiter: ';', bom: true, columns: true, relax_column_count: true });
/** id_tad as the contract of the pipeline defines it. */
const idOf = (r: Pick<CsvRow, 'SEQ_TAD' | 'NUM_TAD' | 'SER_TAD'>) => r.SEQ_TAD || `tad:${r.NUM_TAD}${r.SER_TAD ? '/' + r.SER_TAD : ''}`;
/** Terms that end up loaded: all but the malformed row, the superseded duplicates and the one without any geometry. */
const SUPERSEDED = ['T09b', 'T10a'];
const LOADED_TERMS = IBAMA_TERMS.filter((t) => !t.malformed && !SUPERSEDED.includes(t.id) && t.role !== 'sem-geometria');
/** The raw record of a loaded term (the last record with its key, as the file holds it). */
const rawOf = (t: IbamaTerm) => {
  const nth = IBAMA_TERMS.filter((x) => !x.malformed).indexOf(t);
  const withoutMalformed = RAW.filter((r) => Object.keys(r).length === 51);
  return withoutMalformed[nth];
};
const hmac = (doc: string, key = DEV_HMAC_KEY) => crypto.createHmac('sha256', key).update(doc).digest('hex');
/** Contract §3: issued = 'Lavrado' in either status column or 'Impresso' in the AIe one; a status not known to be inactive is active too. */
const KNOWN_INACTIVE = /^(cancelad|exclu[ií]d|substitu[ií]d|anulad)/i;
const isActive = (r: Record<string, string>) => {
  const issued = r.DES_STATUS_FORMULARIO === 'Lavrado' || ['Lavrado', 'Impresso'].includes(r.DES_STATUS_FORMULARIO_AIE);
  const inactive = KNOWN_INACTIVE.test(r.DES_STATUS_FORMULARIO) || KNOWN_INACTIVE.test(r.DES_STATUS_FORMULARIO_AIE);
  return (issued || !inactive) && r.SIT_CANCELADO !== 'S' && r.SIT_DESEMBARGO !== 'S';
};

let db: TestDb;
let work: string;
let main: RunOutcome;
let report: Report;
const rows = new Map<string, Record<string, any>>();

const run = (d: TestDb, source: string, extra: object = {}, log?: Logger) =>
  runPipeline({ cfg: d.cfg, pool: d.pool, log: log ?? d.log }, ibamaEmbargos, { source, ...extra });
async function reportOf(d: TestDb, snapshotId: number): Promise<Report> {
  return (await d.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'ibama-test-'));
  main = await run(db, IBAMA_FIXTURE_DIR);
  report = await reportOf(db, main.snapshot_id!);
  const r = await db.pool.query(`SELECT *, data_embargo::text AS data_embargo_t, data_desembargo::text AS data_desembargo_t, data_alteracao::text AS data_alteracao_t, ST_AsText(geom) AS wkt, GeometryType(geom) AS gtype, ST_X(geom_ponto) AS px, ST_Y(geom_ponto) AS py FROM serving.ibama_embargos`);
  for (const x of r.rows) rows.set(x.id_tad, x);
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('CSV route: the committed fixture', () => {
  test('the fixture is what it claims: 51 columns in the file order, BOM, 118 records, one of 50 fields', () => {
    const bytes = fs.readFileSync(CSV_FILE);
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(Object.keys(RAW[0])).toHaveLength(51);
    expect(RAW).toHaveLength(118);
    expect(RAW.filter((r) => Object.keys(r).length === 50)).toHaveLength(1);
    expect(termById('T07').row.GEOM_AREA_EMBARGADA.length).toBeGreaterThan(128 * 1024);
  });

  test('the committed CSV is exactly what the generator writes', () => {
    expect(fs.readFileSync(CSV_FILE, 'utf8')).toBe(ibamaCsv());
  });

  test('run outcome counts every row', () => {
    expect(main.status).toBe('published');
    expect(main.as_of).toBe(IBAMA_RELEASE_DATE);
    expect(main.rows_read).toBe(118);
    expect(main.rows_loaded).toBe(LOADED_TERMS.length);
    expect(main.rows_loaded).toBe(114);
    expect(main.rows_rejected).toBe(1);
    expect(Object.keys(main.stages)).toEqual(expect.arrayContaining(['download', 'read', 'normalise', 'index', 'quality', 'publish']));
    expect(rows.size).toBe(114);
  });

  test('quality report: rejections, drops, geometry, dates, documents, point share', () => {
    const f = report.facts;
    expect(f.rejected).toEqual({ bad_field_count: 1 });
    expect(f.dropped).toEqual({ duplicate_key: 2, no_geometry: 1 });
    expect(f.geometry).toEqual({ invalid: 1, repaired: 1, rejected: 1, empty: 1, srid: 4326, sridAssumed: false, outsideBrazil: 0 });
    expect(f.dates.unparseable).toEqual({ data_embargo: 1 });
    expect(f.dates.placeholders).toEqual({});
    expect(f.fields.unknown).toEqual([]);
    expect(f.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    const polygons = LOADED_TERMS.filter((t) => t.geometry).length;
    const e = f.embargos;
    expect(e.poligono).toBe(polygons);
    expect(e.ponto).toBe(114 - polygons);
    expect(e.ponto_share).toBeCloseTo((114 - polygons) / 114, 12);
    expect(e.ponto_em_vez_de_poligono).toBe(1);
    expect(e.problemas_poligono).toEqual({ bad_wkt: 1 });
    expect(e.numero_tad_repetido).toBe(0);
    expect(e.ativos).toBe(LOADED_TERMS.map(rawOf).filter(isActive).length);
    const digits = LOADED_TERMS.map((t) => rawOf(t).CPF_CNPJ_EMBARGADO.replace(/\D/g, ''));
    expect(e.documentos).toEqual({ cpf: digits.filter((d) => d.length === 11).length, cnpj: digits.filter((d) => d.length === 14).length, outro: 0, mascarado: 0, zeros_completados: 0, ausente: 0 });
    expect(e.ultima_atualizacao).toEqual({ distintos: 1, min: '2026-10-28 18:56:39', max: '2026-10-28 18:56:39' });
    expect(e.hmac_key).toBe('development');
    expect(report.gate.passed).toBe(true);
  });

  test('every loaded term has its id, numbers, dates and declared area as the file says', () => {
    expect([...rows.keys()].sort()).toEqual(LOADED_TERMS.map((t) => idOf(rawOf(t) as CsvRow)).sort());
    for (const t of LOADED_TERMS) {
      const raw = rawOf(t);
      const row = rows.get(idOf(raw as CsvRow))!;
      const m = /^(\d{4})-(\d{2})-(\d{2})/.exec(raw.DAT_EMBARGO) ?? /^(\d{2})\/(\d{2})\/(\d{4})/.exec(raw.DAT_EMBARGO);
      const iso = !m ? null : m[1].length === 4 ? `${m[1]}-${m[2]}-${m[3]}` : `${m[3]}-${m[2]}-${m[1]}`;
      const expectedDate = iso && Number(iso.slice(0, 4)) <= 2200 ? iso : null;
      expect({
        numero_tad: row.numero_tad, serie_tad: row.serie_tad, seq_tad: row.seq_tad,
        data_embargo: row.data_embargo_t,
        area_embargada_ha: row.area_embargada_ha, cod_municipio_ibge: row.cod_municipio_ibge, uf: row.uf,
        numero_processo: row.numero_processo, numero_auto_infracao: row.numero_auto_infracao,
      }, t.id).toEqual({
        numero_tad: raw.NUM_TAD, serie_tad: raw.SER_TAD || null, seq_tad: raw.SEQ_TAD || null,
        data_embargo: expectedDate,
        area_embargada_ha: Number(raw.QTD_AREA_EMBARGADA.replace(',', '.')), cod_municipio_ibge: raw.COD_MUNICIPIO, uf: raw.UF,
        numero_processo: raw.NUM_PROCESSO, numero_auto_infracao: raw.NUM_AUTO_INFRACAO || null,
      });
    }
    expect(rows.get('1067002')!.data_embargo_t).toBe('2018-03-15'); // dd/mm/yyyy
    expect(rows.get('1071555')!.data_embargo_t).toBeNull(); // year 2925
  });

  test('every valid polygon equals ST_GeomFromText of the raw WKT, with the geodesic area', async () => {
    const valid = LOADED_TERMS.filter((t) => t.geometry && t.role !== 'bowtie');
    const ids = valid.map((t) => idOf(rawOf(t) as CsvRow));
    const wkts = valid.map((t) => rawOf(t).GEOM_AREA_EMBARGADA);
    const r = await db.pool.query(
      `SELECT x.id, e.geom_origem, GeometryType(e.geom) AS t,
              ST_OrderingEquals(e.geom, ST_Multi(ST_GeomFromText(x.wkt, 4326))) AS same,
              e.area_calculada_ha / (ST_Area(ST_GeomFromText(x.wkt, 4326)::geography) / 10000) AS ratio
         FROM unnest($1::text[], $2::text[]) AS x(id, wkt) JOIN serving.ibama_embargos e ON e.id_tad = x.id`,
      [ids, wkts],
    );
    expect(r.rows).toHaveLength(valid.length);
    for (const x of r.rows) {
      expect(x, x.id).toMatchObject({ geom_origem: 'poligono', t: 'MULTIPOLYGON', same: true });
      expect(Math.abs(x.ratio - 1), x.id).toBeLessThan(1e-6);
    }
  });

  test('the >128 KB WKT cell loads whole: 8,000 vertices', async () => {
    const raw = rawOf(termById('T07'));
    expect(raw.GEOM_AREA_EMBARGADA.length).toBeGreaterThan(131072);
    const r = await db.pool.query(
      `SELECT ST_NPoints(geom) AS n, ST_IsValid(geom) AS valid, ST_OrderingEquals(geom, ST_Multi(ST_GeomFromText($2, 4326))) AS same
         FROM serving.ibama_embargos WHERE id_tad = $1`,
      ['1125580', raw.GEOM_AREA_EMBARGADA],
    );
    expect(r.rows).toEqual([{ n: 8001, valid: true, same: true }]);
  });

  test('MultiPolygon term keeps both parts and the hole', async () => {
    const r = await db.pool.query(
      `SELECT ST_NumGeometries(geom) AS parts, ST_NumInteriorRings(ST_GeometryN(geom, 1)) AS holes, ST_NumInteriorRings(ST_GeometryN(geom, 2)) AS holes2
         FROM serving.ibama_embargos WHERE id_tad = '1093377'`,
    );
    expect(r.rows).toEqual([{ parts: 2, holes: 1, holes2: 0 }]);
  });

  test('the bow-tie is repaired into its two triangles', async () => {
    // ring (0,0) → (300,200) → (300,0) → (0,300) in 1e-4° from (-51.08, -17.89): edges cross at (180,120)
    const expected = 'MULTIPOLYGON(((-51.08 -17.89, -51.062 -17.878, -51.08 -17.86, -51.08 -17.89)), ((-51.062 -17.878, -51.05 -17.87, -51.05 -17.89, -51.062 -17.878)))';
    const r = await db.pool.query(
      `SELECT geom_origem, geom_problema, ST_IsValid(geom) AS valid, ST_NumGeometries(geom) AS parts,
              ST_HausdorffDistance(geom, ST_GeomFromText($1, 4326)) < 1e-9 AS same_shape,
              area_calculada_ha / (ST_Area(ST_GeomFromText($1, 4326)::geography) / 10000) AS ratio
         FROM serving.ibama_embargos WHERE id_tad = '1101936'`,
      [expected],
    );
    expect(r.rows[0]).toMatchObject({ geom_origem: 'poligono', geom_problema: null, valid: true, parts: 2, same_shape: true });
    // equal-area (EPSG:10857) against geodesic: long diagonal edges differ a little more than boxes
    expect(Math.abs(r.rows[0].ratio - 1)).toBeLessThan(1e-5);
    expect(rows.get('1101936')!.geom_ponto).toBeNull(); // empty lon/lat
  });

  test('point-only terms load as their point', () => {
    for (const t of LOADED_TERMS.filter((x) => !x.geometry)) {
      const raw = rawOf(t);
      const row = rows.get(idOf(raw as CsvRow))!;
      expect({ origem: row.geom_origem, t: row.gtype, x: row.px, y: row.py, calc: row.area_calculada_ha }, t.id).toEqual({
        origem: 'ponto', t: 'POINT', x: Number(raw.NUM_LONGITUDE_TAD), y: Number(raw.NUM_LATITUDE_TAD), calc: null,
      });
    }
    expect(rows.get('1110482')!.wkt).toBe('POINT(-55.735 -12.5375)');
  });

  test('an unparseable WKT keeps the term as its point, flagged', () => {
    const row = rows.get('1133456')!;
    expect({ o: row.geom_origem, p: row.geom_problema, wkt: row.wkt, ativo: row.ativo }).toEqual({ o: 'ponto', p: 'bad_wkt', wkt: 'POINT(-49.045 -16.795)', ativo: true });
  });

  test('the active polygon crosses SICAR GO1 and the active point lies in MT1; nothing else touches a SICAR property', async () => {
    const props = (['GO', 'MT', 'DF'] as const).flatMap((uf) => SICAR_FIXTURES[uf].areaImovel.map((p) => ({ id: p.id, gj: JSON.stringify(p.geometry) })));
    const r = await db.pool.query(
      `SELECT p.id, e.id_tad, e.ativo, e.geom_origem, ST_Within(e.geom, ST_SetSRID(ST_GeomFromGeoJSON(p.gj), 4326)) AS within
         FROM unnest($1::text[], $2::text[]) AS p(id, gj)
         JOIN serving.ibama_embargos e ON ST_Intersects(e.geom, ST_SetSRID(ST_GeomFromGeoJSON(p.gj), 4326))
        ORDER BY p.id`,
      [props.map((p) => p.id), props.map((p) => p.gj)],
    );
    expect(r.rows).toEqual([
      { id: 'GO1', id_tad: '1084521', ativo: true, geom_origem: 'poligono', within: false },
      { id: 'MT1', id_tad: '1110482', ativo: true, geom_origem: 'ponto', within: true },
    ]);
  });

  test('situacao: active, cancelled, lifted, substituted, AIe', () => {
    const pick = (id: string) => {
      const x = rows.get(id)!;
      return { situacao: x.situacao, ativo: x.ativo, status: x.status_formulario, cancelado: x.cancelado, desembargado: x.desembargado };
    };
    expect(pick('1084521')).toEqual({ situacao: 'ativo', ativo: true, status: 'Lavrado', cancelado: false, desembargado: false });
    expect(pick('1112209')).toEqual({ situacao: 'cancelado', ativo: false, status: 'Lavrado', cancelado: true, desembargado: false });
    expect(pick('1098765')).toEqual({ situacao: 'desembargado', ativo: false, status: 'Lavrado', cancelado: false, desembargado: true });
    expect(pick('1108830')).toEqual({ situacao: 'substituído por outro', ativo: false, status: 'Substituído por outro', cancelado: false, desembargado: false });
    expect(pick('tad:K7Q2M9XA')).toEqual({ situacao: 'ativo', ativo: true, status: 'Lavrado', cancelado: false, desembargado: false });
    expect(rows.get('tad:K7Q2M9XA')!.seq_tad).toBeNull();
    const lifted = rows.get('1098765')!;
    expect([lifted.data_desembargo_t, lifted.tipo_desembargo, lifted.descricao_desembargo]).toEqual(['2023-08-14', 'Total', 'Desembargo após adesão ao PRA e recuperação da área']);
    for (const t of LOADED_TERMS) expect(rows.get(idOf(rawOf(t) as CsvRow))!.ativo, t.id).toBe(isActive(rawOf(t)));
  });

  test('duplicates keep the most recently changed version, then the last read', () => {
    const newer = rows.get('1120045')!; // T09a (changed 2025-03-10) is read before T09b (changed 2021-06-01)
    expect([newer.situacao, newer.desembargado, newer.tipo_desembargo]).toEqual(['desembargado', true, 'Parcial']);
    expect(newer.data_alteracao_t).toBe('2025-03-10 09:15:00');
    expect(rows.get('1131002')!.nome_imovel).toBe('Sítio Boa Esperança II'); // same change time: last read wins
  });

  test('the malformed row and the term without geometry are not loaded', () => {
    expect(rows.has('1126001')).toBe(false);
    expect(rows.has('1014230')).toBe(false);
  });

  test('documents: bare characters, type, HMAC-SHA256 with the configured key', () => {
    for (const t of LOADED_TERMS) {
      const raw = rawOf(t);
      const digits = raw.CPF_CNPJ_EMBARGADO.replace(/\D/g, '');
      const row = rows.get(idOf(raw as CsvRow))!;
      expect({ d: row.documento, t: row.documento_tipo, h: row.documento_hmac }, t.id).toEqual({
        d: digits, t: digits.length === 11 ? 'cpf' : 'cnpj', h: hmac(digits),
      });
    }
    expect(rows.get('1084521')!.documento).toBe('52998224725');
  });

  test('text keeps accents, quotes, semicolons and line breaks', () => {
    const raw = rawOf(termById('T01'));
    const row = rows.get('1084521')!;
    expect([row.nome_embargado, row.municipio, row.nome_imovel]).toEqual(['José Antônio da Conceição', 'Goiânia', 'Fazenda São João']);
    expect(row.descricao).toBe(raw.DES_TAD);
    expect(row.descricao).toMatch(/Cerrado; área objeto do "Auto de Infração" 9474812-E\.\nEmbargo/);
  });

  test('extra holds the workflow columns (non-empty ones), never personal data', () => {
    const workflow = new Set(WORKFLOW_COLUMNS.map((c) => c.toLowerCase()));
    for (const t of LOADED_TERMS) {
      const raw = rawOf(t);
      const row = rows.get(idOf(raw as CsvRow))!;
      const expected: Record<string, string> = Object.fromEntries(WORKFLOW_COLUMNS.filter((c) => c !== 'DAT_ULT_ALTERACAO' && raw[c] !== '').map((c) => [c.toLowerCase(), raw[c]]));
      // A date that does not parse is NULL and its text kept (contract §3: never silently nulled): T16's year 2925.
      if (t.id === 'T16') expected.data_embargo = raw.DAT_EMBARGO;
      expect(row.extra, t.id).toEqual(expected);
      for (const k of Object.keys(row.extra)) expect(workflow.has(k) || k === 'data_embargo').toBe(true);
    }
    expect(rows.get('1112209')!.extra).toMatchObject({ tipo_alteracao: 'Cancelamento', justificativa_alteracao: 'Termo cancelado por erro de preenchimento; lavrado novo termo' });
  });

  test('snapshot table: key, GiST on geom, btree on numero_tad and documento_hmac', async () => {
    const r = await db.pool.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = 'snap' AND tablename = $1 ORDER BY indexname`, [`ibama_embargos__s${main.snapshot_id}`]);
    const defs = r.rows.map((x) => x.indexdef.replace(/^CREATE (UNIQUE )?INDEX \S+ ON \S+ /, '$1'));
    expect(defs).toEqual(['USING btree (documento_hmac)', 'USING gist (geom)', 'USING btree (numero_tad)', 'UNIQUE USING btree (id_tad)']);
    const cols = await db.pool.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'serving' AND table_name = 'ibama_embargos'`);
    expect(cols.rows.map((c) => c.column_name)).toEqual(expect.arrayContaining(['numero_tad', 'data_embargo', 'situacao', 'documento', 'area_embargada_ha', 'geom', 'snapshot_id']));
  });

  test('the same bytes again: unchanged', async () => {
    const again = await run(db, IBAMA_FIXTURE_DIR);
    expect([again.status, again.snapshot_id]).toEqual(['unchanged', main.snapshot_id]);
  });

  test('a CSV cut inside a quoted WKT fails with malformed_source; the previous snapshot keeps serving', async () => {
    const dir = path.join(work, 'truncated');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), truncatedIbamaCsv());
    const o = await run(db, dir);
    expect(o.status).toBe('failed');
    expect(o.error?.code).toBe('malformed_source');
    expect(o.error?.message).toMatch(/quot/i); // csv-parse: 'Quote Not Closed'; csv-records: 'unclosed quoted field'
    const snap = await db.pool.query('SELECT status FROM etl.snapshots WHERE snapshot_id = $1', [o.snapshot_id]);
    expect(snap.rows[0].status).toBe('failed');
    const cur = await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibama-embargos'`);
    expect(cur.rows).toEqual([{ snapshot_id: main.snapshot_id }]);
    const serving = await db.pool.query('SELECT count(*)::int AS n, min(snapshot_id)::int AS a, max(snapshot_id)::int AS b FROM serving.ibama_embargos');
    expect(serving.rows[0]).toEqual({ n: 114, a: main.snapshot_id, b: main.snapshot_id });
    const left = await db.pool.query('SELECT to_regclass($1) AS t', [`snap.ibama_embargos__s${o.snapshot_id}`]);
    expect(left.rows[0].t).toBeNull();
  });
});

describe('shapefile route (adm_embargo_a zip) and a zip holding the CSV', () => {
  let shpDb: TestDb;
  let shp: RunOutcome;
  const COMPARED = [
    'numero_tad', 'serie_tad', 'data_embargo', 'situacao', 'ativo', 'status_formulario', 'cancelado', 'desembargado', 'data_desembargo',
    'documento', 'documento_tipo', 'documento_hmac', 'nome_embargado', 'cod_municipio_ibge', 'municipio', 'uf', 'area_embargada_ha',
    'nome_imovel', 'numero_auto_infracao', 'geom_origem', 'geom_problema',
  ];

  beforeAll(async () => {
    shpDb = await testDatabase();
    shp = await run(shpDb, ZIP_FILE);
  });
  afterAll(async () => {
    await shpDb.drop();
  });

  test('loads the 3 features: layer, SRID, encoding, no unknown columns', async () => {
    expect([shp.status, shp.rows_read, shp.rows_loaded, shp.rows_rejected]).toEqual(['published', 3, 3, 0]);
    const q = await reportOf(shpDb, shp.snapshot_id!);
    expect(q.facts.layers).toEqual([{ name: 'adm_embargo_a', features: 3, srid: 4674, encoding: 'UTF-8', decided_by: 'cpg' }]);
    expect(q.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false, invalid: 0, outsideBrazil: 0 });
    expect(q.facts.fields.unknown).toEqual([]);
    expect(q.facts.embargos.route).toBe('shp');
  });

  test('the same terms give the same canonical values on both routes', async () => {
    const sel = `SELECT numero_tad, ${COMPARED.filter((c) => c !== 'numero_tad').join(', ')}, area_calculada_ha, encode(ST_AsEWKB(geom), 'hex') AS g, encode(ST_AsEWKB(geom_ponto), 'hex') AS p
                   FROM serving.ibama_embargos WHERE numero_tad = ANY($1) ORDER BY numero_tad`;
    const nums = ['574812', '612290', '620044'];
    const a = (await db.pool.query(sel, [nums])).rows;
    const b = (await shpDb.pool.query(sel, [nums])).rows;
    expect(a).toHaveLength(3);
    expect(b).toHaveLength(3);
    const pick = (x: Record<string, any>) => Object.fromEntries(COMPARED.map((c) => [c, x[c]]));
    for (let i = 0; i < 3; i++) {
      expect(pick(b[i])).toEqual(pick(a[i]));
      expect(Math.abs(b[i].area_calculada_ha / a[i].area_calculada_ha - 1)).toBeLessThan(1e-9);
      const g = await db.pool.query(
        `SELECT ST_Equals(ST_GeomFromEWKB(decode($1, 'hex')), ST_GeomFromEWKB(decode($2, 'hex'))) AS same,
                ST_Distance(ST_GeomFromEWKB(decode($3, 'hex')), ST_GeomFromEWKB(decode($4, 'hex'))) AS d,
                ST_SRID(ST_GeomFromEWKB(decode($2, 'hex'))) AS srid`,
        [a[i].g, b[i].g, a[i].p, b[i].p],
      );
      expect(g.rows[0].same, a[i].numero_tad).toBe(true);
      expect(g.rows[0].d, a[i].numero_tad).toBeLessThan(1e-9); // the DMS text converts back to the CSV's decimal point
      expect(g.rows[0].srid).toBe(4326);
    }
    expect(b.map((x) => x.situacao)).toEqual(['ativo', 'ativo', 'desembargado']);
  });

  test('shapefile extras are kept, the officer and the formatted document are not', async () => {
    const r = await shpDb.pool.query(`SELECT id_tad, extra FROM serving.ibama_embargos ORDER BY id_tad`);
    expect(r.rows.map((x) => x.id_tad)).toEqual(['tad:574812/C', 'tad:612290/E', 'tad:620044/E']);
    for (const x of r.rows) expect(x.extra).toEqual({ sit_desmatamento: 'D', des_tipo_bioma: 'Cerrado' });
    const text = JSON.stringify((await shpDb.pool.query('SELECT * FROM serving.ibama_embargos')).rows);
    expect(text).not.toMatch(/Agente Ambiental|205\.?918\.?374/);
  });

  test('a zip holding the CSV is read as the CSV', async () => {
    const zip = path.join(work, 'termo_embargo_csv.zip');
    await zipFiles(zip, [{ path: CSV_FILE, name: 'termo_embargo.csv' }]);
    const o = await run(shpDb, zip);
    expect([o.status, o.as_of, o.rows_read, o.rows_loaded, o.rows_rejected]).toEqual(['published', IBAMA_RELEASE_DATE, 118, 114, 1]);
  });
});

describe('variants: legacy headers, rejections and the gate, a missing required column', () => {
  let varDb: TestDb;
  let legacy: RunOutcome;
  const logLines: string[] = [];
  const HMAC_KEY = 'chave-de-teste-hmac';

  beforeAll(async () => {
    varDb = await testDatabase({ AGRO_HMAC_KEY: HMAC_KEY });
    // Pre-2024 spellings, and the point only in DMS columns.
    const terms = IBAMA_TERMS.map((t) => ({
      ...t,
      row: { ...t.row, NUM_LONGITUDE_TAD: t.point ? toDms(t.point[0], 'lon') : t.row.NUM_LONGITUDE_TAD, NUM_LATITUDE_TAD: t.point ? toDms(t.point[1], 'lat') : t.row.NUM_LATITUDE_TAD },
    }));
    const dir = path.join(work, 'legacy');
    await writeIbamaCsv(path.join(dir, 'termo_embargo.csv'), {
      terms,
      renameColumns: {
        NOME_EMBARGADO: 'NOME_PESSOA_EMBARGADA', GEOM_AREA_EMBARGADA: 'WKT_GEOM_AREA_EMBARGADA',
        NUM_LONGITUDE_TAD: 'NUM_LONGITUDE_GMS_TAD', NUM_LATITUDE_TAD: 'NUM_LATITUDE_GMS_TAD', UF: 'SIG_UF_TAD',
      },
    });
    const log = pino({ level: 'trace' }, { write: (s: string) => void logLines.push(s) }) as unknown as Logger;
    legacy = await run(varDb, dir, {}, log);
  });
  afterAll(async () => {
    await varDb.drop();
  });

  test('legacy spellings and DMS coordinates load the same terms', async () => {
    expect([legacy.status, legacy.rows_read, legacy.rows_loaded, legacy.rows_rejected]).toEqual(['published', 118, 114, 1]);
    const r = await varDb.pool.query(`SELECT id_tad, nome_embargado, uf, geom_origem, ST_X(geom_ponto) AS x, ST_Y(geom_ponto) AS y FROM serving.ibama_embargos`);
    expect(r.rows).toHaveLength(114);
    for (const x of r.rows) {
      const m = rows.get(x.id_tad)!;
      expect([x.nome_embargado, x.uf, x.geom_origem], x.id_tad).toEqual([m.nome_embargado, m.uf, m.geom_origem]);
      if (m.px === null) expect(x.x).toBeNull();
      else expect(Math.max(Math.abs(x.x - m.px), Math.abs(x.y - m.py)), x.id_tad).toBeLessThan(1e-6); // DMS to 1/1000 s
    }
  });

  test('documento_hmac uses AGRO_HMAC_KEY when set', async () => {
    const r = await varDb.pool.query(`SELECT documento, documento_hmac FROM serving.ibama_embargos`);
    for (const x of r.rows) expect(x.documento_hmac).toBe(hmac(x.documento, HMAC_KEY));
    expect((await reportOf(varDb, legacy.snapshot_id!)).facts.embargos.hmac_key).toBe('env');
  });

  test('no document, in clear or formatted, reaches the logs or the report', async () => {
    expect(logLines.length).toBeGreaterThan(5);
    const logs = logLines.join('\n');
    const reportText = fs.readFileSync(legacy.report!, 'utf8') + JSON.stringify((await varDb.pool.query('SELECT detail FROM etl.run_stages WHERE run_id = $1', [legacy.run_id])).rows);
    for (const t of IBAMA_TERMS) {
      const doc = t.row.CPF_CNPJ_EMBARGADO;
      for (const form of [doc, doc.replace(/\D/g, '')]) {
        expect(logs.includes(form), `${t.id} in logs`).toBe(false);
        expect(reportText.includes(form), `${t.id} in report`).toBe(false);
      }
    }
  });

  test('rejections: bad WKT without a point, no key, outside Brazil; the gate blocks, --force publishes', async () => {
    const base: Partial<CsvRow> = { DES_STATUS_FORMULARIO: 'Lavrado', SIT_CANCELADO: 'N', SER_TAD: 'E', COD_MUNICIPIO: '5208707', MUNICIPIO: 'Goiânia', UF: 'GO', QTD_AREA_EMBARGADA: '1,0000', DAT_EMBARGO: '2025-05-05 00:00:00', ULTIMA_ATUALIZACAO_RELATORIO: '2026-10-28 18:56:39' };
    const extraRows: Partial<CsvRow>[] = [
      { ...base, SEQ_TAD: '1300001', NUM_TAD: '800001', GEOM_AREA_EMBARGADA: 'POLYGON ((-49.1 -16.1, -49.0 -16.1' },
      { ...base, SEQ_TAD: '1300002', NUM_TAD: '', NUM_LONGITUDE_TAD: '-49.5', NUM_LATITUDE_TAD: '-16.9' },
      { ...base, SEQ_TAD: '1300003', NUM_TAD: '800003', NUM_LONGITUDE_TAD: '9.18', NUM_LATITUDE_TAD: '45.46' },
      { ...base, SEQ_TAD: '1300004', NUM_TAD: '800004', GEOM_AREA_EMBARGADA: 'POLYGON ((9.1 45.4, 9.2 45.4, 9.2 45.5, 9.1 45.4))', NUM_LONGITUDE_TAD: '-49.5', NUM_LATITUDE_TAD: '-16.9' },
      { ...base, SEQ_TAD: '1300005', NUM_TAD: '800005', GEOM_AREA_EMBARGADA: 'LINESTRING (-49.1 -16.1, -49.0 -16.0)', NUM_LONGITUDE_TAD: '-49.05', NUM_LATITUDE_TAD: '-16.05' },
      { ...base, SEQ_TAD: '1300006', NUM_TAD: '800006', GEOM_AREA_EMBARGADA: 'POLYGON EMPTY' },
      { ...base, SEQ_TAD: '1300007.0', NUM_TAD: '800007', NUM_LONGITUDE_TAD: '-49,25', NUM_LATITUDE_TAD: '-16,75' },
    ];
    const dir = path.join(work, 'rejections');
    await writeIbamaCsv(path.join(dir, 'termo_embargo.csv'), { extraRows });
    const blocked = await run(varDb, dir);
    expect([blocked.status, blocked.rows_read, blocked.rows_loaded, blocked.rows_rejected]).toEqual(['blocked', 125, 117, 4]);
    expect(blocked.gate?.failures.map((f) => f.rule)).toEqual(['rejected_share']);
    const q = await reportOf(varDb, blocked.snapshot_id!);
    expect(q.facts.rejected).toEqual({ bad_field_count: 1, no_key: 1, bad_wkt: 1, outside_brazil: 1 });
    expect(q.facts.dropped).toEqual({ duplicate_key: 2, no_geometry: 2 });
    expect(q.facts.geometry).toMatchObject({ rejected: 3, outsideBrazil: 2, empty: 2 });
    expect(q.facts.embargos.problemas_poligono).toEqual({ bad_wkt: 2, not_polygonal: 1, polygon_outside_brazil: 1 });
    expect(q.facts.embargos.ponto_em_vez_de_poligono).toBe(3);
    const cur = await varDb.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibama-embargos'`);
    expect(cur.rows).toEqual([{ snapshot_id: legacy.snapshot_id }]);

    const forced = await run(varDb, dir, { force: true });
    expect([forced.status, forced.forced, forced.rows_loaded]).toEqual(['published', true, 117]);
    const r = await varDb.pool.query(
      `SELECT id_tad, seq_tad, geom_origem, geom_problema, ST_AsText(geom) AS wkt FROM serving.ibama_embargos WHERE id_tad LIKE '13000%' ORDER BY id_tad`,
    );
    expect(r.rows).toEqual([
      { id_tad: '1300004', seq_tad: '1300004', geom_origem: 'ponto', geom_problema: 'polygon_outside_brazil', wkt: 'POINT(-49.5 -16.9)' },
      { id_tad: '1300005', seq_tad: '1300005', geom_origem: 'ponto', geom_problema: 'not_polygonal', wkt: 'POINT(-49.05 -16.05)' },
      { id_tad: '1300007', seq_tad: '1300007', geom_origem: 'ponto', geom_problema: null, wkt: 'POINT(-49.25 -16.75)' },
    ]);
  });

  test('a missing required column blocks the run before loading', async () => {
    const before = (await varDb.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibama-embargos'`)).rows;
    const dir = path.join(work, 'no-cancel');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), ibamaCsv({ omitColumns: ['SIT_CANCELADO'] }));
    const o = await run(varDb, dir);
    expect([o.status, o.error?.code, o.rows_loaded]).toEqual(['blocked', 'required_field_missing', 0]);
    expect(o.error?.message).toMatch(/cancelado/);
    expect(o.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['cancelado'] }]);
    expect((await varDb.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibama-embargos'`)).rows).toEqual(before);
  });
});

describe('with the SICAR fixtures: embargo_ibama and the embargo overlaps', () => {
  let carDb: TestDb;
  const outcomes: RunOutcome[] = [];

  beforeAll(async () => {
    carDb = await testDatabase();
    for (const uf of ['GO', 'MT']) {
      outcomes.push(await runPipeline({ cfg: carDb.cfg, pool: carDb.pool, log: carDb.log }, sicar, { uf, source: path.join(IBAMA_FIXTURE_DIR, '..', 'sicar', uf) }));
    }
    outcomes.push(await run(carDb, IBAMA_FIXTURE_DIR));
  });
  afterAll(async () => {
    await carDb.drop();
  });

  test('GO1 (active polygon) and MT1 (active point inside) are the only embargoed properties', async () => {
    expect(outcomes.map((o) => o.status)).toEqual(['published', 'published', 'published']);
    const r = await carDb.pool.query(`SELECT car FROM serving.car_imovel WHERE embargo_ibama ORDER BY car`);
    const go1 = SICAR_FIXTURES.GO.areaImovel.find((p) => p.id === 'GO1')!.attributes.cod_imovel;
    const mt1 = SICAR_FIXTURES.MT.areaImovel.find((p) => p.id === 'MT1')!.attributes.cod_imovel;
    expect(r.rows.map((x) => x.car)).toEqual([go1, mt1].sort());
    const o = await carDb.pool.query(
      `SELECT car, feicao_id, ativo, area_sobreposta_ha FROM serving.car_sobreposicoes WHERE camada = 'embargo' ORDER BY car`,
    );
    expect(o.rows.map(({ car, feicao_id, ativo }) => ({ car, feicao_id, ativo }))).toEqual(
      [{ car: go1, feicao_id: '574812', ativo: true }, { car: mt1, feicao_id: '650377', ativo: true }].sort((a, b) => a.car.localeCompare(b.car)),
    );
    // GO1 ∩ T01 is the box lon -49.3150..-49.3050, lat -16.5750..-16.5650
    const box = await carDb.pool.query(`SELECT ST_Area(ST_MakeEnvelope(-49.315, -16.575, -49.305, -16.565, 4326)::geography) / 10000 AS ha`);
    const go = o.rows.find((x) => x.car === go1)!;
    expect(Math.abs(go.area_sobreposta_ha / box.rows[0].ha - 1)).toBeLessThan(1e-5);
    expect(o.rows.find((x) => x.car === mt1)!.area_sobreposta_ha).toBeNull();
  });
});

describe('parallel query plans', () => {
  let parDb: TestDb;
  beforeAll(async () => {
    parDb = await testDatabase();
  });
  afterAll(async () => {
    await parDb.drop();
  });

  test('the load works when every query is forced into a parallel plan (no subtransaction in a parallel query)', async () => {
    await parDb.pool.query(`DO $$ BEGIN
        EXECUTE format('ALTER DATABASE %I SET debug_parallel_query = on', current_database());
      EXCEPTION WHEN undefined_object OR invalid_parameter_value THEN
        EXECUTE format('ALTER DATABASE %I SET force_parallel_mode = on', current_database());
      END $$`);
    const pool = createPool(parDb.url, 4);
    try {
      const mode = await pool.query(`SELECT coalesce(current_setting('debug_parallel_query', true), current_setting('force_parallel_mode', true)) AS m`);
      expect(mode.rows[0].m).toBe('on');
      const o = await runPipeline({ cfg: parDb.cfg, pool, log: parDb.log }, ibamaEmbargos, { source: IBAMA_FIXTURE_DIR });
      expect([o.status, o.error, o.rows_loaded]).toEqual(['published', undefined, 114]);
      const r = await pool.query(`SELECT geom_origem, geom_problema FROM serving.ibama_embargos WHERE id_tad = '1133456'`);
      expect(r.rows).toEqual([{ geom_origem: 'ponto', geom_problema: 'bad_wkt' }]);
    } finally {
      await pool.end();
    }
  });
});

describe('issue 6: electronic-system statuses, future dates, other encodings and delimiters (fixtures/ibama-embargos/variants)', () => {
  const VARIANTS = path.join(IBAMA_FIXTURE_DIR, 'variants');
  let vDb: TestDb;
  let first: RunOutcome;
  const served = async () =>
    (await vDb.pool.query(`SELECT *, data_embargo::text AS data_embargo, data_desembargo::text AS data_desembargo, ST_AsText(geom) AS wkt FROM serving.ibama_embargos ORDER BY id_tad`)).rows.map(({ snapshot_id, ...r }) => r);
  const byTerm = async (num: string) => (await vDb.pool.query(`SELECT *, data_embargo::text AS data_embargo_t, data_desembargo::text AS data_desembargo_t FROM serving.ibama_embargos WHERE numero_tad = $1`, [num])).rows[0];
  beforeAll(async () => {
    vDb = await testDatabase();
  });
  afterAll(async () => {
    await vDb.drop();
  });

  test('the committed variants are what the generator writes', async () => {
    const dir = path.join(work, 'variants-fresh');
    for (const f of await writeIbamaVariants(dir)) {
      expect(fs.readFileSync(f).equals(fs.readFileSync(path.join(VARIANTS, path.basename(f)))), path.basename(f)).toBe(true);
    }
    // The encodings are what they say: a UTF-16LE BOM, UTF-16BE without one (NUL first), latin1 bytes for 'ã'.
    expect([...fs.readFileSync(path.join(VARIANTS, 'termo_embargo_utf16le_bom.csv')).subarray(0, 4)]).toEqual([0xff, 0xfe, 0x53, 0x00]);
    expect([...fs.readFileSync(path.join(VARIANTS, 'termo_embargo_utf16be.csv')).subarray(0, 4)]).toEqual([0x00, 0x53, 0x00, 0x45]);
    expect(fs.readFileSync(path.join(VARIANTS, 'termo_embargo_latin1_tab.csv')).includes(Buffer.from('Goi\xe2nia', 'latin1'))).toBe(true);
  });

  test('electronic terms (empty status, AIE Impresso) are active; unknown statuses are active and listed; future dates are NULL, kept and counted', async () => {
    first = await runPipeline({ cfg: vDb.cfg, pool: vDb.pool, log: vDb.log }, ibamaEmbargos, { source: path.join(VARIANTS, 'termo_embargo_regras.csv') });
    expect([first.status, first.error]).toEqual(['published', undefined]);
    expect(first.as_of).toBe(IBAMA_RELEASE_DATE);
    expect(first.rows_read).toBe(IBAMA_VARIANT_TERMS.length);

    const t17 = await byTerm('R4T8W2KZ');
    expect(t17).toMatchObject({ id_tad: 'tad:R4T8W2KZ', situacao: 'ativo', ativo: true, status_formulario: 'Impresso', area_embargada_ha: 307, tipo_area: 'Desmatamento', data_embargo_t: '2026-10-20' });
    expect(t17.extra).toMatchObject({ des_status_formulario_aie: 'Impresso' });

    const t18 = await byTerm('681204');
    expect(t18).toMatchObject({ data_embargo_t: null, ativo: true });
    expect(t18.extra).toMatchObject({ data_embargo: '2063-08-14 00:00:00' });
    const t19 = await byTerm('681377');
    expect(t19).toMatchObject({ data_desembargo_t: null, data_alteracao: null, situacao: 'desembargado', ativo: false, data_embargo_t: '2019-02-11' });
    expect(t19.extra).toMatchObject({ data_desembargo: '2090-06-30 00:00:00', data_alteracao: '2080-01-15 08:00:00' });
    expect(await byTerm('681500')).toMatchObject({ situacao: 'ativo', ativo: true, status_formulario: 'Em análise' });
    const t21 = await byTerm('681655');
    expect(t21).toMatchObject({ situacao: 'ativo', ativo: true, status_formulario: null, area_embargada_ha: null });
    expect(t21.extra).toMatchObject({ area_embargada_ha: 'não informada' }); // not a number: NULL, text kept
    // Known inactive statuses stay inactive.
    expect(await byTerm('645512')).toMatchObject({ situacao: 'substituído por outro', ativo: false });

    const q = await reportOf(vDb, first.snapshot_id!);
    expect(q.facts.dates.implausible).toEqual({ data_embargo: 1, data_desembargo: 1, data_alteracao: 1 });
    expect(q.facts.dates.unparseable).toEqual({ data_embargo: 1 }); // T16, year 2925
    expect(q.facts.fields.unparsed).toEqual({ area_embargada_ha: 1 });
    expect(q.facts.embargos.status_desconhecido).toEqual({ 'Em análise / ∅': 1, '∅ / ∅': 1 });
    expect(q.facts.notes.join('\n')).toMatch(/counted as active because their status is not known to be inactive/);
    const loaded = IBAMA_VARIANT_TERMS.filter((t) => t.role !== 'sem-geometria' && !['T09b', 'T10a'].includes(t.id));
    expect(q.facts.embargos.ativos).toBe(loaded.filter((t) => isActive(t.row)).length);
    expect(loaded.filter((t) => isActive(t.row)).map((t) => t.id)).toEqual(expect.arrayContaining(['T12', 'T17', 'T18', 'T20', 'T21']));
  });

  test.each(Object.keys(IBAMA_VARIANTS).filter((n) => n !== 'termo_embargo_regras.csv'))('%s loads the same rows (encoding and delimiter detected)', async (name) => {
    const before = await served();
    const o = await runPipeline({ cfg: vDb.cfg, pool: vDb.pool, log: vDb.log }, ibamaEmbargos, { source: path.join(VARIANTS, name) });
    expect([o.status, o.error, o.rows_read, o.rows_loaded]).toEqual(['published', undefined, first.rows_read, first.rows_loaded]);
    expect(await served()).toEqual(before);
    const v = IBAMA_VARIANTS[name as keyof typeof IBAMA_VARIANTS];
    const q = await reportOf(vDb, o.snapshot_id!);
    expect(q.facts.encoding.name).toBe({ utf8: 'UTF-8', utf16le: 'UTF-16LE', utf16be: 'UTF-16BE', latin1: 'ISO-8859-1' }[v.encoding]);
    expect(q.facts.encoding.replacementChars).toBe(0);
  });

  test('a required column missing from a UTF-16 or comma file says what was detected, CPFs masked', async () => {
    const dir = path.join(work, 'detected');
    fs.mkdirSync(dir, { recursive: true });
    const text = ibamaCsv({ terms: IBAMA_VARIANT_TERMS.slice(0, 5), bom: false, renameColumns: { NUM_TAD: 'NUMERO_DO_TERMO', NOME_IMOVEL: '529.982.247-25' }, delimiter: ',' });
    const utf16 = path.join(dir, 'utf16.csv');
    fs.writeFileSync(utf16, encodeText(text, 'utf16le', false));
    const o = await runPipeline({ cfg: vDb.cfg, pool: vDb.pool, log: vDb.log }, ibamaEmbargos, { source: utf16 });
    expect(o.status).toBe('blocked');
    expect(o.error?.code).toBe('required_field_missing');
    expect(o.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['numero_tad'], file: 'utf16.csv', encoding: 'utf16le', delimiter: ',' }]);
    expect(o.error?.message).toContain('column numero_tad not found');
    expect(o.error?.message).toContain("read as UTF-16LE (no BOM, NUL byte pattern), delimiter ','");
    expect(o.error?.message).toContain('its header has 51 column(s): ["SEQ_TAD", "DES_STATUS_FORMULARIO"');
    expect(o.error?.message).toContain('"NUMERO_DO_TERMO"');
    expect(o.error?.message).toContain('***.982.247-**');
    expect(o.error?.message).not.toContain('529.982.247-25');
    const stage = (await vDb.pool.query(`SELECT detail FROM etl.run_stages WHERE run_id = $1 AND stage = 'read'`, [o.run_id])).rows[0];
    expect(JSON.stringify(stage.detail)).not.toContain('529.982.247-25');
    // the gate rule, the report and the ledger keep the detail, masked too
    const kept = (await vDb.pool.query(`SELECT s.quality, r.error FROM etl.snapshots s JOIN etl.runs r USING (run_id) WHERE s.snapshot_id = $1`, [o.snapshot_id])).rows[0];
    expect(kept.quality.gate.failures[0].message).toContain('***.982.247-**');
    expect(JSON.stringify([kept, o.gate, fs.readFileSync(o.report!, 'utf8')])).not.toContain('529.982.247-25');
  });
});

describe('the declaration on both routes: the WKT required of a CSV only; a change time compared with as_of by its day', () => {
  let dDb: TestDb;
  beforeAll(async () => {
    dDb = await testDatabase();
  });
  afterAll(async () => {
    await dDb.drop();
  });

  test('a CSV without its WKT column is blocked before loading (the shapefile route, which has its own geometry, loads without it above)', async () => {
    const dir = path.join(work, 'no-wkt');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), ibamaCsv({ omitColumns: ['GEOM_AREA_EMBARGADA'] }));
    const o = await run(dDb, dir);
    expect([o.status, o.error?.code, o.rows_loaded]).toEqual(['blocked', 'required_field_missing', 0]);
    expect(o.error?.message).toMatch(/geom_wkt/);
    expect(o.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['geom_wkt'], forceable: false }]);
  });

  test('DAT_ULT_ALTERACAO on the release day itself, with a time, is kept; the day after is NULL with its text kept; an overflowed area is counted, not kept', async () => {
    const terms = IBAMA_TERMS.map((t) =>
      t.id === 'T01' ? { ...t, row: { ...t.row, DAT_ULT_ALTERACAO: '2026-10-28 15:30:00' } }
        : t.id === 'T02' ? { ...t, row: { ...t.row, DAT_ULT_ALTERACAO: '2026-10-29 08:00:00' } }
          : t.id === 'T06' ? { ...t, row: { ...t.row, QTD_AREA_EMBARGADA: '**********' } } : t);
    const dir = path.join(work, 'same-day');
    await writeIbamaCsv(path.join(dir, 'termo_embargo.csv'), { terms });
    const o = await run(dDb, dir);
    expect([o.status, o.as_of]).toEqual(['published', IBAMA_RELEASE_DATE]);
    expect(IBAMA_RELEASE_DATE).toBe('2026-10-28');
    const r = await dDb.pool.query(
      `SELECT numero_tad, data_alteracao::text AS t, extra->>'data_alteracao' AS raw FROM serving.ibama_embargos WHERE numero_tad = ANY($1) ORDER BY numero_tad`,
      [[termById('T01').row.NUM_TAD, termById('T02').row.NUM_TAD]],
    );
    expect(r.rows).toEqual(
      [
        { numero_tad: termById('T01').row.NUM_TAD, t: '2026-10-28 15:30:00', raw: null },
        { numero_tad: termById('T02').row.NUM_TAD, t: null, raw: '2026-10-29 08:00:00' },
      ].sort((a, b) => a.numero_tad.localeCompare(b.numero_tad)),
    );
    const facts = (await reportOf(dDb, o.snapshot_id!)).facts;
    expect(facts.dates.implausible).toEqual({ data_alteracao: 1 });
    expect(facts.fields.overflowed).toEqual({ area_embargada_ha: 1 });
    const t06 = await dDb.pool.query(`SELECT area_embargada_ha, extra ? 'area_embargada_ha' AS kept FROM serving.ibama_embargos WHERE numero_tad = $1`, [termById('T06').row.NUM_TAD]);
    expect(t06.rows).toEqual([{ area_embargada_ha: null, kept: false }]);
  });
});
