// The ICMBio embargo pipeline on the generated fixture (fixtures/icmbio-embargos.ts): load,
// unchanged on the same bytes, documents bare, typed and keyed by HMAC and never in the
// logs or the report, the damaged rows counted (no key rejected, a date that is no date and
// one after the release), duplicates and repeated numbers, and with the SICAR fixtures the
// precomputed overlap (camada 'embargo_icmbio') of E01 with DF1.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildIcmbioZip, ICMBIO_DOCS, ICMBIO_FIXTURE, ICMBIO_RELEASE_DATE, icmbioRow } from '../fixtures/icmbio-embargos.ts';
import { SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { icmbioEmbargos, type IcmbioFacts } from '../pipelines/icmbio-embargos/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { DEV_HMAC_KEY } from '../src/config.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

type Report = QualityReport & { facts: QualityReport['facts'] & { icmbio: IcmbioFacts } };

const ROOT = path.resolve(__dirname, '..');
const FIXTURE_DIR = path.join(ROOT, 'fixtures', 'icmbio-embargos');
const ZIP = path.join(FIXTURE_DIR, 'embargos_icmbio.zip');
const hmac = (doc: string) => crypto.createHmac('sha256', DEV_HMAC_KEY).update(doc).digest('hex');

let db: TestDb;
let work: string;
let main: RunOutcome;
let report: Report;
let logged = '';
const rows = new Map<string, Record<string, any>>();

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'icmbio-test-'));
  // Every log line of the load, to check no document reaches it.
  const log = pino({ level: 'trace' }, { write: (s: string) => void (logged += s) });
  main = await runPipeline({ cfg: db.cfg, pool: db.pool, log }, icmbioEmbargos, { source: FIXTURE_DIR, asOf: ICMBIO_RELEASE_DATE });
  report = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [main.snapshot_id])).rows[0].quality;
  for (const r of (await db.pool.query('SELECT *, ST_AsText(geom) AS wkt FROM serving.icmbio_embargos')).rows) rows.set(r.id_embargo, r);
});
afterAll(async () => {
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('the committed fixture', () => {
  test('is exactly what the generator writes', async () => {
    const again = await buildIcmbioZip(work);
    expect(fs.readFileSync(again).equals(fs.readFileSync(ZIP))).toBe(true);
  });

  test('loads and publishes: every row read, the row without num_emb rejected, the copy of a key dropped', () => {
    expect(main.status).toBe('published');
    expect(report.counts.read).toBe(ICMBIO_FIXTURE.length);
    expect(report.counts.rejected).toBe(1);
    expect(report.facts.rejected).toMatchObject({ no_key: 1 });
    expect(report.facts.dropped).toMatchObject({ duplicate_key: 1 });
    expect(rows.size).toBe(ICMBIO_FIXTURE.length - 2);
    expect(report.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: false });
  });

  test('key num_emb/serie: the same number in two series is two embargoes, counted; the copy read last wins', () => {
    expect(rows.get('10700/A')!.observacao).toBe('Retificado: área recalculada');
    expect(rows.get('10700/C')).toMatchObject({ numero_embargo: '10700', serie_embargo: 'C', documento: null });
    expect(report.facts.icmbio.numero_repetido).toBe(2);
  });

  test('documents: bare digits, type, HMAC with the configured key; a CPF that lost its leading zero is completed', () => {
    expect(rows.get('10452/A')).toMatchObject({ documento: ICMBIO_DOCS.cpf, documento_tipo: 'cpf', documento_hmac: hmac(ICMBIO_DOCS.cpf), nome_autuado: 'Sebastião Ferreira da Conceição' });
    expect(rows.get('10588/B')).toMatchObject({ documento: ICMBIO_DOCS.cnpj, documento_tipo: 'cnpj', documento_hmac: hmac(ICMBIO_DOCS.cnpj), uf: 'CE' });
    expect(rows.get('10611/A')).toMatchObject({ documento: ICMBIO_DOCS.cpfZero, documento_tipo: 'cpf' });
    expect(report.facts.icmbio.documentos).toMatchObject({ zeros_completados: 1, ausente: 1, outro: 0, mascarado: 0 });
    expect(report.facts.icmbio.documentos.cpf + report.facts.icmbio.documentos.cnpj + 1).toBe(rows.size);
  });

  test('no document, in clear, formatted or as its HMAC, and no embargoed name reaches the logs or the report', () => {
    const text = logged + JSON.stringify(report);
    for (const r of ICMBIO_FIXTURE.filter((x) => x.attributes.cpf_cnpj)) {
      expect(text).not.toContain(String(r.attributes.cpf_cnpj));
      expect(text).not.toContain(String(r.attributes.autuado));
    }
    expect(text).not.toContain(ICMBIO_DOCS.cpfZero);
    // Nor its HMAC (with the development key, trying every CPF finds the document again).
    for (const r of rows.values()) if (r.documento_hmac) expect(text).not.toContain(r.documento_hmac);
  });

  test('dates: a date that is no date and one after the release are NULL and counted, the first kept raw in extra', () => {
    expect(rows.get('10452/A')!.data_embargo).toBe('2021-03-14');
    expect(rows.get('10588/B')!.data_embargo).toBe('2022-07-05');
    expect(rows.get('10790/A')).toMatchObject({ data_embargo: null, extra: { data_embargo: '31/02/2023' } });
    expect(rows.get('10801/A')).toMatchObject({ data_embargo: null, extra: { data_embargo: '15/08/2031' } });
    expect(report.facts.dates).toMatchObject({ unparseable: { data_embargo: 1 }, implausible: { data_embargo: 1 } });
  });

  test('geometry: MultiPolygon 4326, the bow-tie repaired into its two triangles, the multipolygon keeps both parts', () => {
    for (const r of rows.values()) expect(r.wkt).toMatch(/^MULTIPOLYGON/);
    expect(rows.get('10745/A')!.wkt.match(/\(\(/g)).toHaveLength(2);
    expect(rows.get('10588/B')!.wkt.match(/\(\(/g)).toHaveLength(2);
    expect(report.facts.geometry.repaired).toBeGreaterThanOrEqual(1);
    expect(rows.get('10452/A')!.area_calculada_ha).toBeGreaterThan(0);
  });

  test('the same bytes again: unchanged', async () => {
    const again = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, icmbioEmbargos, { source: ZIP, asOf: ICMBIO_RELEASE_DATE });
    expect(again.status).toBe('unchanged');
  });

  test('an unknown column of a new export (a responsible person\'s name) stays out of the report\'s examples: the relation holds personal data', async () => {
    const dir = fs.mkdtempSync(path.join(work, 'extra-column-'));
    const rows = ICMBIO_FIXTURE.map((r) => ({ ...r, attributes: { ...r.attributes, nome_resp: 'Maria Aparecida Responsável' } }));
    await buildIcmbioZip(dir, { rows, extraFields: [{ name: 'nome_resp', type: 'C', length: 60 }] });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, icmbioEmbargos, { source: dir, asOf: ICMBIO_RELEASE_DATE, force: true });
    const q = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
    expect(Object.keys(q.facts.examples ?? {}).length).toBeGreaterThan(0);
    // Before the fix: every example showed it under extra.
    expect(JSON.stringify(q)).not.toContain('Maria Aparecida');
    expect(q.facts.fields.unknown).toContain('nome_resp');
  });

  /** The report's document classes of the fixture with E01's cpf_cnpj written as `doc`. */
  const documentClasses = async (name: string, doc: string) => {
    const dir = fs.mkdtempSync(path.join(work, `${name}-`));
    const rows = ICMBIO_FIXTURE.map((r) => (r.id === 'E01' ? { ...r, attributes: { ...r.attributes, cpf_cnpj: doc } } : r));
    await buildIcmbioZip(dir, { rows });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, icmbioEmbargos, { source: dir, asOf: ICMBIO_RELEASE_DATE, force: true });
    return ((await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality as Report).facts.icmbio.documentos;
  };

  test("a document written without a digit ('n/d') is counted as neither CPF nor CNPJ (outro), not as absent", async () => {
    expect(await documentClasses('no-digit', 'n/d')).toMatchObject({ ausente: 1, outro: 1 }); // the fixture's absent one, and this
  });

  test('a document cell of a no-break space is blank: absent, not outro', async () => {
    expect(await documentClasses('nbsp-doc', '\u00a0')).toMatchObject({ ausente: 2, outro: 0 }); // the fixture's absent one, and this
  });

  test('a zip without num_emb is blocked before loading', async () => {
    const dir = fs.mkdtempSync(path.join(work, 'no-key-'));
    await buildIcmbioZip(dir, { dropFields: ['num_emb'] });
    const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, icmbioEmbargos, { source: dir, asOf: ICMBIO_RELEASE_DATE, force: true });
    expect(out.status).toBe('blocked');
  });
});

describe('with the SICAR fixtures: the embargo_icmbio overlaps', () => {
  let carDb: TestDb;
  const outcomes: RunOutcome[] = [];
  beforeAll(async () => {
    carDb = await testDatabase();
    for (const uf of ['DF', 'GO']) {
      outcomes.push(await runPipeline({ cfg: carDb.cfg, pool: carDb.pool, log: carDb.log }, sicar, { uf, source: path.join(ROOT, 'fixtures', 'sicar', uf) }));
    }
    outcomes.push(await runPipeline({ cfg: carDb.cfg, pool: carDb.pool, log: carDb.log }, icmbioEmbargos, { source: ZIP, asOf: ICMBIO_RELEASE_DATE }));
  });
  afterAll(async () => {
    await carDb?.drop();
  });

  test('E01 crosses DF1: its overlap row is the only one, with the intersected area; IBAMA\'s embargo_ibama is untouched', async () => {
    expect(outcomes.map((o) => o.status)).toEqual(['published', 'published', 'published']);
    const df1 = SICAR_FIXTURES.DF.areaImovel.find((p) => p.id === 'DF1')!.attributes.cod_imovel;
    const o = await carDb.pool.query(`SELECT car, feicao_id, ativo, area_sobreposta_ha FROM serving.car_sobreposicoes WHERE camada = 'embargo_icmbio'`);
    expect(o.rows.map(({ car, feicao_id, ativo }) => ({ car, feicao_id, ativo }))).toEqual([{ car: df1, feicao_id: `${icmbioRow('E01').attributes.num_emb}/A`, ativo: null }]);
    const box = await carDb.pool.query(`SELECT ST_Area(ST_MakeEnvelope(-47.61, -15.925, -47.595, -15.915, 4326)::geography) / 10000 AS ha`);
    expect(Math.abs(o.rows[0].area_sobreposta_ha / box.rows[0].ha - 1)).toBeLessThan(1e-5);
    const ibama = await carDb.pool.query(`SELECT count(*)::int AS n FROM serving.car_imovel WHERE embargo_ibama IS NOT NULL`);
    expect(ibama.rows[0].n).toBe(0);
  });
});
