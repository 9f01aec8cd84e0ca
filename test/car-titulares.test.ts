// car-titulares: the operator extract (declared links) and the links inferred from IBAMA
// embargoes on current CAR properties (contract §3, SOURCES §12.1). Expectations are
// computed from the fixture descriptions (fixtures/car-titulares.ts, fixtures/sicar.ts,
// fixtures/ibama-embargos.ts) and, for overlap shares, from a direct PostGIS computation
// on the fixture geometries, never from the pipeline's own output.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BAD_CPF, buildCarTitularesFixture, CAR_TITULARES_FIXTURE_DIR, DOCS, formatCnpj, formatCpf, rowById, TITULARES_ROWS, titularesCsv, type TitularRow,
} from '../fixtures/car-titulares.ts';
import * as fx from '../fixtures/ibama-embargos.ts';
import { buildSicarState, SICAR_FIXTURES, type SicarUf } from '../fixtures/sicar.ts';
import { carTitulares } from '../pipelines/car-titulares/index.ts';
import { ibamaEmbargos as ibama } from '../pipelines/ibama-embargos/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { documentHmac, resolveHmacKey } from '../src/documents.ts';
import type { Logger } from '../src/log.ts';
import type { Pipeline } from '../src/etl/pipeline.ts';
import { rollback } from '../src/etl/publish.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROWS = TITULARES_ROWS;
const okRows = ROWS.filter((r) => r.expect === 'ok');
const count = (pred: (r: TitularRow) => boolean) => ROWS.filter(pred).length;
/** 1-based data-record number of a fixture row (header excluded). */
const recordOf = (id: string) => ROWS.findIndex((r) => r.id === id) + 1;
const distinct = <T>(xs: T[]) => [...new Set(xs)];

/** Every document of the fixture, in stored form and as written: none may leak into logs or reports. */
const ALL_DOCUMENTS = distinct([
  ...ROWS.flatMap((r) => [r.documento.trim(), r.link?.documento ?? '']),
  ...Object.values(DOCS), ...Object.values(DOCS).map((d) => (d.length === 11 ? formatCpf(d) : formatCnpj(d))), BAD_CPF,
]).filter((d) => d.length >= 11);

function leaks(text: string): string[] {
  return ALL_DOCUMENTS.filter((d) => text.includes(d));
}

interface Captured {
  log: Logger;
  text(): string;
}
function capturingLogger(): Captured {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: pino({ level: 'trace' }, stream) as unknown as Logger, text: () => lines.join('') };
}

async function quality(db: TestDb, snapshotId: number): Promise<QualityReport & { facts: QualityReport['facts'] & { titulares: any } }> {
  return (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;
}

function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// ---------------------------------------------------------------------------------

describe('car-titulares: the operator extract', () => {
  let db: TestDb;
  let out: RunOutcome;
  let logs: Captured;
  let hmacKey: string;

  beforeAll(async () => {
    db = await testDatabase();
    logs = capturingLogger();
    hmacKey = resolveHmacKey(db.cfg).key;
    out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: logs.log }, carTitulares, { source: CAR_TITULARES_FIXTURE_DIR });
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('the committed fixture is what the generator writes', () => {
    expect(fs.readFileSync(path.join(CAR_TITULARES_FIXTURE_DIR, 'titulares.csv'), 'utf8')).toBe(titularesCsv());
    expect(fs.readdirSync(CAR_TITULARES_FIXTURE_DIR)).toEqual(['titulares.csv']);
  });

  it('publishes with exact read / loaded / rejected / dropped counts', async () => {
    expect(out.status).toBe('published');
    expect(ROWS.length).toBe(316);
    expect(out.rows_read).toBe(ROWS.length);
    expect(out.rows_rejected).toBe(3);
    expect(out.rows_loaded).toBe(okRows.length);
    expect(out.rows_loaded).toBe(312);
    const q = await quality(db, out.snapshot_id!);
    expect(q.gate).toMatchObject({ passed: true, forced: false, failures: [] });
    expect(q.counts).toEqual({ read: 316, loaded: 312, rejected: 3, dropped: 1 });
    expect(q.facts.rejected).toEqual({ bad_car_number: 1, bad_document: 1, bad_vinculo: 1 });
    expect(q.facts.dropped).toEqual({ duplicate: 1 });
    expect(q.facts.titulares.registros).toEqual({
      bad_car_number: [recordOf('B03')], bad_document: [recordOf('B01')], bad_vinculo: [recordOf('B02')], duplicate: [recordOf('D01')],
    });
    expect(q.facts.fields).toEqual({ missingOptional: [], unknown: [], empty: { nome: 1 } });
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.notes).toContain(`bad_document: 1 rejected (record ${recordOf('B01')})`);
    expect(q.facts.notes).toContain(`duplicate: 1 dropped (record ${recordOf('D01')})`);
  });

  it('counts links per vinculo and document type', async () => {
    const q = await quality(db, out.snapshot_id!);
    const t = q.facts.titulares;
    const links = okRows.map((r) => r.link!);
    expect(t.por_vinculo).toEqual({
      proprietario: links.filter((l) => l.vinculo === 'proprietario').length,
      possuidor: links.filter((l) => l.vinculo === 'possuidor').length,
    });
    expect(t.por_tipo_documento).toEqual({ cpf: links.filter((l) => l.tipo_documento === 'cpf').length, cnpj: links.filter((l) => l.tipo_documento === 'cnpj').length });
    expect(t.cnpj_alfanumerico).toBe(1);
    expect(t.cars).toBe(distinct(links.map((l) => l.car)).length);
    expect(t.documentos).toBe(distinct(links.map((l) => l.documento)).length);
    expect(t.hmac_key).toBe(resolveHmacKey(db.cfg).source);
  });

  it('reports (and keeps) links whose CAR is in no current CAR snapshot: none is loaded here', async () => {
    const t = (await quality(db, out.snapshot_id!)).facts.titulares;
    const cars = distinct(okRows.map((r) => r.link!.car));
    expect(t.ufs_car_carregadas).toEqual([]);
    expect(t.car_ausente).toEqual({ vinculos: okRows.length, cars: cars.length, ufs: distinct(cars.map((c) => c.slice(0, 2))).sort() });
    const notes = (await quality(db, out.snapshot_id!)).facts.notes.join('\n');
    expect(notes).toContain(`312 links name ${cars.length} CAR numbers`);
    expect(notes).toContain('no CAR snapshot is loaded');
  });

  it('serves the normalised declared links with their evidence and HMAC', async () => {
    const r = await db.pool.query(`SELECT * FROM serving.car_titulares`);
    const key = (x: { car: string; documento: string; vinculo: string }) => `${x.car}|${x.documento}|${x.vinculo}`;
    const byKey = <T extends { car: string; documento: string; vinculo: string }>(xs: T[]) => [...xs].sort((a, b) => (key(a) < key(b) ? -1 : 1));
    const expected = okRows.map((row) => ({ ...row.link!, origem: 'declarado', snapshot_id: out.snapshot_id }));
    expect(byKey(r.rows.map(({ evidencia: _e, documento_hmac: _h, ...rest }) => rest))).toEqual(byKey(expected));
    for (const row of r.rows) {
      expect(row.evidencia).toEqual({ fonte: 'extrato do operador', snapshot_id: out.snapshot_id });
      expect(row.documento_hmac).toBe(documentHmac(row.documento, hmacKey));
    }
  });

  it('normalises each special case as the fixture describes', async () => {
    const get = async (id: string) => {
      const l = rowById(id).link!;
      return (await db.pool.query(`SELECT car, documento, tipo_documento, nome, vinculo FROM serving.car_titulares WHERE car = $1 AND documento = $2`, [l.car, l.documento])).rows;
    };
    // S04: alphanumeric CNPJ stored upper case without punctuation
    expect(await get('S04')).toEqual([{ car: SICAR_FIXTURES.GO.areaImovel.find((p) => p.id === 'GO3')!.attributes.cod_imovel, documento: '12ABC34501DE35', tipo_documento: 'cnpj', nome: 'Cooperativa Agroindustrial do Sudoeste Goiano', vinculo: 'proprietario' }]);
    // S03: 'Proprietário' accepted; S05: lower-case CAR with blanks upper-cased
    expect((await get('S03'))[0].vinculo).toBe('proprietario');
    expect((await get('S05'))[0].car).toBe(rowById('S05').car.trim().toUpperCase());
    // S09: quoted name with ';' and '"'; S10: empty name → NULL; S12: leading zero kept
    expect((await get('S09'))[0].nome).toBe('Espólio de João Batista; inventariante "Ana"');
    expect((await get('S10'))[0].nome).toBeNull();
    expect((await get('S12'))[0].documento).toMatch(/^0\d{10}$/);
    // D01 repeated S01: one link, S01's name kept; José holds GO1 and GO8
    const jose = await db.pool.query(`SELECT car, nome FROM serving.car_titulares WHERE documento = $1`, [DOCS.jose]);
    expect(jose.rows.sort((a, b) => (a.car < b.car ? -1 : 1))).toEqual([rowById('S01'), rowById('S06')].map((r) => ({ car: r.link!.car, nome: 'José Antônio da Conceição' })).sort((a, b) => (a.car < b.car ? -1 : 1)));
    // rejected rows left nothing behind
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM serving.car_titulares WHERE documento = $1 OR car = $2 OR car = $3`, [BAD_CPF, rowById('B03').car, rowById('B02').car])).rows[0].n).toBe(0);
  });

  it('never writes a document to the logs, the ledger or the quality report', async () => {
    expect(logs.text().length).toBeGreaterThan(0);
    expect(leaks(logs.text())).toEqual([]);
    expect(leaks(fs.readFileSync(out.report!, 'utf8'))).toEqual([]);
    expect(leaks(fs.readFileSync(out.report!.replace(/\.json$/, '.html'), 'utf8'))).toEqual([]);
    const ledger = await db.pool.query(
      `SELECT (SELECT json_agg(r) FROM etl.runs r)::text AS runs, (SELECT json_agg(s) FROM etl.run_stages s)::text AS stages, (SELECT json_agg(s) FROM etl.snapshots s)::text AS snaps`,
    );
    expect(leaks(ledger.rows[0].runs + ledger.rows[0].stages + ledger.rows[0].snaps)).toEqual([]);
    // the leak detector does find documents where they are
    expect(leaks(fs.readFileSync(path.join(CAR_TITULARES_FIXTURE_DIR, 'titulares.csv'), 'utf8')).length).toBeGreaterThan(300);
  });

  it('an identical extract is unchanged', async () => {
    const again = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: path.join(CAR_TITULARES_FIXTURE_DIR, 'titulares.csv') });
    expect(again.status).toBe('unchanged');
    expect(again.snapshot_id).toBe(out.snapshot_id);
  });

  it('maps by header: no BOM, other case and order, optional nome absent, unknown column not loaded, bad field count', async () => {
    const dir = tmpDir('titulares-variant-');
    try {
      const s07 = rowById('S07');
      const s08 = rowById('S08');
      const b02 = rowById('B02');
      const lines = [
        'VINCULO;Documento;CAR;email',
        `${s07.vinculo};${s07.documento};${s07.car};carlos@example.com`,
        `${s08.vinculo};${s08.documento}`, // two fields: rejected, not staged
        `${b02.vinculo};${b02.documento};${b02.car};lucas@example.com`,
        `${s08.vinculo};${s08.documento};${s08.car};`,
      ];
      fs.writeFileSync(path.join(dir, 'extrato-2026-11.csv'), lines.join('\n') + '\n');
      const r = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir, force: true });
      expect(r.status).toBe('published');
      expect(r.forced).toBe(true); // 2 of 4 rejected: the gate fails, --force publishes
      expect([r.rows_read, r.rows_loaded, r.rows_rejected]).toEqual([4, 2, 2]);
      const q = await quality(db, r.snapshot_id!);
      expect(q.facts.rejected).toEqual({ bad_field_count: 1, bad_vinculo: 1 });
      expect(q.facts.titulares.registros).toEqual({ bad_field_count: [2], bad_vinculo: [3] });
      expect(q.facts.fields.missingOptional).toEqual(['nome']);
      expect(q.facts.fields.unknown).toEqual(['email']);
      expect(q.facts.notes.join('\n')).toContain('columns not loaded (only car, documento, nome, vinculo are kept from this personal-data extract): email');
      const rows = (await db.pool.query(`SELECT car, documento, nome, vinculo, snapshot_id FROM serving.car_titulares`)).rows.sort((a, b) => (a.car < b.car ? -1 : 1));
      expect(rows).toEqual(
        [s07, s08].map((x) => ({ car: x.link!.car, documento: x.link!.documento, nome: null, vinculo: x.link!.vinculo, snapshot_id: r.snapshot_id })).sort((a, b) => (a.car < b.car ? -1 : 1)),
      );
      expect(JSON.stringify(rows)).not.toContain('example.com');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is blocked before loading when a required column is missing, and names the column', async () => {
    const dir = tmpDir('titulares-drift-');
    try {
      fs.writeFileSync(path.join(dir, 'titulares.csv'), `car;cpf;nome;vinculo\n${rowById('S01').car};${rowById('S01').documento};José;proprietario\n`);
      const r = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir });
      expect(r.status).toBe('blocked');
      expect(r.error?.code).toBe('required_field_missing');
      expect(r.gate?.failures).toMatchObject([{ rule: 'required_field_missing', forceable: false, fields: ['documento'], file: 'titulares.csv', delimiter: ';' }]);
      expect(r.error?.message).toContain('column documento not found');
      expect(r.gate?.failures[0].message).toBe(r.error?.message);
      expect(leaks(r.error!.message)).toEqual([]);
      // what was detected, so a wrong delimiter or encoding is visible at once
      expect(r.error?.message).toContain(`titulares.csv read as UTF-8 (valid UTF-8), delimiter ';'; its header has 4 column(s): ["car", "cpf", "nome", "vinculo"]`);
      // the published snapshot is untouched
      expect((await db.pool.query(`SELECT count(*)::int AS n FROM serving.car_titulares`)).rows[0].n).toBe(2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the same extract in UTF-16 (no BOM) with commas, or latin1 with tabs, loads the same links (issue 6, C.8)', async () => {
    const dir = tmpDir('titulares-utf16-');
    try {
      const before = (await db.pool.query(`SELECT car, documento, nome, vinculo FROM serving.car_titulares ORDER BY 1, 2, 4`)).rows;
      const reference = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: path.join(CAR_TITULARES_FIXTURE_DIR, 'titulares.csv') });
      expect(reference.status).toBe('published'); // the previous test published a variant: the fixture is new again
      const want = (await db.pool.query(`SELECT car, documento, nome, vinculo FROM serving.car_titulares ORDER BY 1, 2, 4`)).rows;
      expect(want).not.toEqual(before);
      for (const [name, bytes, encoding] of [
        ['utf16.csv', Buffer.from(titularesCsv({ bom: false, delimiter: ',' }), 'utf16le'), 'UTF-16LE'],
        ['latin1.csv', Buffer.from(titularesCsv({ bom: false, delimiter: '\t' }), 'latin1'), 'ISO-8859-1'],
      ] as const) {
        fs.rmSync(path.join(dir, 'titulares.csv'), { force: true });
        fs.writeFileSync(path.join(dir, 'titulares.csv'), bytes);
        const r = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir });
        expect([r.status, r.error, r.rows_read, r.rows_loaded, r.rows_rejected], name).toEqual(['published', undefined, 316, 312, 3]);
        expect((await db.pool.query(`SELECT car, documento, nome, vinculo FROM serving.car_titulares ORDER BY 1, 2, 4`)).rows, name).toEqual(want);
        expect((await quality(db, r.snapshot_id!)).facts.encoding, name).toEqual({ name: encoding, assumed: false, replacementChars: 0 });
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('asks for a source when none is given (the extract has no public source)', async () => {
    const r = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, {});
    expect(r.status).toBe('failed');
    expect(r.error?.code).toBe('usage');
  });

  it('keys documento_hmac with the configured key', async () => {
    const dir = tmpDir('titulares-key-');
    try {
      await buildCarTitularesFixture(dir, { rows: [rowById('S01'), rowById('S04')] });
      const cfg = { ...db.cfg, hmacKey: 'chave-de-teste', hmacKeySource: 'env' as const };
      const r = await runPipeline({ cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir, force: true });
      expect(r.status).toBe('published');
      const rows = (await db.pool.query(`SELECT documento, documento_hmac FROM serving.car_titulares`)).rows;
      expect(rows.map((x) => x.documento).sort()).toEqual([DOCS.cooperativa, DOCS.jose].sort());
      for (const x of rows) expect(x.documento_hmac).toBe(documentHmac(x.documento, 'chave-de-teste'));
      expect(documentHmac(DOCS.jose, 'chave-de-teste')).not.toBe(documentHmac(DOCS.jose, hmacKey));
      expect((await quality(db, r.snapshot_id!)).facts.titulares.hmac_key).toBe('env');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------------
// Inferred links: the IBAMA pipeline loads its committed fixture, then the variants below.

describe('car-titulares: links inferred from IBAMA embargoes', () => {
  let db: TestDb;
  const carSnap: Partial<Record<SicarUf, number>> = {};
  let ibamaFirst: RunOutcome;
  let ibamaVariant: RunOutcome;
  let hmacKey: string;
  const dirs: string[] = [];
  const deps = () => ({ cfg: db.cfg, pool: db.pool, log: db.log });
  const property = (id: string) => Object.values(SICAR_FIXTURES).flatMap((f) => f.areaImovel).find((p) => p.id === id)!;
  const inferred = async () =>
    (await db.pool.query(`SELECT * FROM serving.car_titulares WHERE origem = 'inferido'`)).rows.sort((a, b) => (a.car + a.documento < b.car + b.documento ? -1 : 1));

  /** Share of `prop` covered by `emb` and the overlap in ha, geodesic, straight from the fixture geometries. */
  async function overlap(prop: object, emb: object): Promise<{ share: number; ha: number }> {
    const r = await db.pool.query(
      `SELECT ST_Area(ST_Intersection(p, e)::geography) / ST_Area(p::geography) AS share, ST_Area(ST_Intersection(p, e)::geography) / 10000 AS ha
         FROM (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS p, ST_SetSRID(ST_GeomFromGeoJSON($2), 4326) AS e) g`,
      [JSON.stringify(prop), JSON.stringify(emb)],
    );
    return r.rows[0];
  }

  const box = (x0: number, y0: number, x1: number, y1: number) => ({
    type: 'Polygon' as const,
    coordinates: [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]].map(([x, y]) => [x / 1e4, y / 1e4])],
  });
  // Variant geometries (1e-4 degree), each around one SICAR fixture property:
  const COVER_GO1 = box(-493310, -165810, -493040, -165590); // all of GO1           → alta
  const WEST_OF_GO2 = box(-492910, -165910, -492750, -165690); // 60 % of GO2's box, its hole included → ~0.574 → media
  const COVER_GO8 = box(-509810, -177810, -509590, -177640); // lifted term (T06)    → no link
  const COVER_MT2 = box(-556810, -125010, -556540, -124790); // active, bad document → no link

  beforeAll(async () => {
    db = await testDatabase();
    hmacKey = resolveHmacKey(db.cfg).key;
    for (const uf of ['GO', 'MT'] as const) {
      const dir = tmpDir(`titulares-sicar-${uf}-`);
      dirs.push(dir);
      await buildSicarState(uf, dir);
      const r = await runPipeline(deps(), sicar, { uf, source: dir });
      if (r.status !== 'published') throw new Error(`sicar ${uf}: ${r.status} ${r.message ?? r.error?.message}`);
      carSnap[uf] = r.snapshot_id!;
    }
  });
  afterAll(async () => {
    await db?.drop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('with the IBAMA fixture and no extract loaded: the point-only term T04 inside MT1 gives one low-confidence link', async () => {
    ibamaFirst = await runPipeline(deps(), ibama, { source: path.join(ROOT_DIR, 'fixtures', 'ibama-embargos') });
    expect(ibamaFirst.status).toBe('published');
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.snapshots WHERE dataset = 'car-titulares'`)).rows[0].n).toBe(0);
    const t04 = fx.termById('T04').row;
    const doc = t04.CPF_CNPJ_EMBARGADO.replace(/\D/g, '');
    expect(await inferred()).toEqual([
      {
        car: property('MT1').attributes.cod_imovel,
        documento: doc,
        tipo_documento: 'cpf',
        nome: t04.NOME_EMBARGADO,
        vinculo: null,
        origem: 'inferido',
        evidencia: {
          fonte: 'embargo IBAMA', numero_tad: t04.NUM_TAD, data_embargo: t04.DAT_EMBARGO.slice(0, 10),
          area_sobreposta_ha: null, percentual: null,
          ibama_snapshot_id: ibamaFirst.snapshot_id, car_snapshot_id: carSnap.MT, confianca: 'baixa',
        },
        documento_hmac: documentHmac(doc, hmacKey),
        snapshot_id: ibamaFirst.snapshot_id,
      },
    ]);
  });

  it('T01 crosses GO1 but covers only a fifth of it: an overlap, no inferred link', async () => {
    const t01 = fx.termById('T01');
    const expected = await overlap(property('GO1').geometry, t01.geometry!);
    expect(expected.share).toBeCloseTo(0.2, 3); // 0.0100° × 0.0100° of a 0.0250° × 0.0200° property
    const ov = await db.pool.query(`SELECT percentual, ativo FROM serving.car_sobreposicoes WHERE car = $1 AND camada = 'embargo' AND feicao_id = $2`, [property('GO1').attributes.cod_imovel, t01.row.NUM_TAD]);
    expect(ov.rows).toHaveLength(1);
    expect(ov.rows[0].ativo).toBe(true);
    expect(ov.rows[0].percentual).toBeCloseTo(expected.share, 5);
    expect((await inferred()).filter((r) => r.car === property('GO1').attributes.cod_imovel)).toEqual([]);
  });

  it('a variant IBAMA release: ≥ 90 % → alta, ≥ 50 % → media; lifted terms and invalid documents give nothing', async () => {
    const dir = tmpDir('titulares-ibama-');
    dirs.push(dir);
    const withGeometry = (t: (typeof fx.IBAMA_TERMS)[number], g: ReturnType<typeof box>, overrides: Record<string, string> = {}) => ({
      ...t, geometry: g, row: { ...t.row, GEOM_AREA_EMBARGADA: fx.toWkt(g), EMBARGA_POLIGONO: 'S', ...overrides },
    });
    const changed: Record<string, ReturnType<typeof withGeometry>> = {
      T01: withGeometry(fx.termById('T01'), COVER_GO1),
      T02: withGeometry(fx.termById('T02'), WEST_OF_GO2),
      T06: withGeometry(fx.termById('T06'), COVER_GO8),
      F000: withGeometry(fx.termById('F000'), COVER_MT2, { CPF_CNPJ_EMBARGADO: '123.456.789-00' }),
    };
    await fx.writeIbamaCsv(path.join(dir, 'termo_embargo.csv'), { terms: fx.IBAMA_TERMS.map((t) => changed[t.id] ?? t) });
    ibamaVariant = await runPipeline(deps(), ibama, { source: dir });
    expect(ibamaVariant.status).toBe('published');
    const sid = ibamaVariant.snapshot_id!;

    // The overlaps exist for all four; the lifted one is inactive.
    const ov = await db.pool.query(
      `SELECT feicao_id, car, ativo, percentual FROM serving.car_sobreposicoes WHERE camada = 'embargo' AND feicao_id = ANY($1) ORDER BY feicao_id`,
      [Object.values(changed).map((t) => t.row.NUM_TAD)],
    );
    expect(ov.rows.map((r) => [r.feicao_id, r.car, r.ativo])).toEqual(
      [
        [changed.T01.row.NUM_TAD, property('GO1').attributes.cod_imovel, true],
        [changed.T02.row.NUM_TAD, property('GO2').attributes.cod_imovel, true],
        [changed.T06.row.NUM_TAD, property('GO8').attributes.cod_imovel, false],
        [changed.F000.row.NUM_TAD, property('MT2').attributes.cod_imovel, true],
      ].sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
    );

    const go1 = await overlap(property('GO1').geometry, COVER_GO1);
    const go2 = await overlap(property('GO2').geometry, WEST_OF_GO2);
    expect(go1.share).toBeCloseTo(1, 9);
    expect(go2.share).toBeCloseTo(0.00027 / 0.00047, 3); // planar: (0.015×0.02 − hole 0.006×0.005) / (0.025×0.02 − hole)

    const rows = await inferred();
    const byCar = new Map(rows.map((r) => [r.car, r]));
    expect(rows.map((r) => r.car).sort()).toEqual([property('GO1'), property('GO2'), property('MT1')].map((p) => p.attributes.cod_imovel).sort());

    const t01 = changed.T01.row;
    const l1 = byCar.get(property('GO1').attributes.cod_imovel)!;
    expect(l1).toMatchObject({ documento: DOCS.jose, tipo_documento: 'cpf', nome: t01.NOME_EMBARGADO, vinculo: null, origem: 'inferido', snapshot_id: sid });
    expect(l1.documento_hmac).toBe(documentHmac(DOCS.jose, hmacKey));
    expect(l1.evidencia).toMatchObject({ fonte: 'embargo IBAMA', numero_tad: t01.NUM_TAD, data_embargo: t01.DAT_EMBARGO.slice(0, 10), ibama_snapshot_id: sid, car_snapshot_id: carSnap.GO, confianca: 'alta', percentual: 1 });
    expect(l1.evidencia.area_sobreposta_ha).toBeCloseTo(go1.ha, 3);

    const t02 = changed.T02.row;
    const l2 = byCar.get(property('GO2').attributes.cod_imovel)!;
    expect(l2).toMatchObject({ documento: t02.CPF_CNPJ_EMBARGADO.replace(/[./-]/g, ''), tipo_documento: 'cnpj', nome: t02.NOME_EMBARGADO, vinculo: null });
    expect(l2.evidencia).toMatchObject({ numero_tad: t02.NUM_TAD, confianca: 'media', ibama_snapshot_id: sid, car_snapshot_id: carSnap.GO });
    expect(l2.evidencia.percentual).toBeCloseTo(go2.share, 5);
    expect(l2.evidencia.area_sobreposta_ha).toBeCloseTo(go2.ha, 3);

    const l3 = byCar.get(property('MT1').attributes.cod_imovel)!;
    expect(l3.evidencia).toMatchObject({ confianca: 'baixa', ibama_snapshot_id: sid, car_snapshot_id: carSnap.MT, percentual: null, area_sobreposta_ha: null });
  });

  it('the extract joins the inferred links in serving.car_titulares; the same person matches on documento_hmac', async () => {
    const out = await runPipeline(deps(), carTitulares, { source: CAR_TITULARES_FIXTURE_DIR });
    expect(out.status).toBe('published');
    const go1 = property('GO1').attributes.cod_imovel;
    const rows = (await db.pool.query(`SELECT documento, vinculo, origem, documento_hmac, snapshot_id FROM serving.car_titulares WHERE car = $1 ORDER BY origem, documento`, [go1])).rows;
    expect(rows.map((r) => [r.origem, r.documento, r.vinculo, r.snapshot_id])).toEqual([
      ['declarado', DOCS.boaVista, 'possuidor', out.snapshot_id],
      ['declarado', DOCS.jose, 'proprietario', out.snapshot_id],
      ['inferido', DOCS.jose, null, ibamaVariant.snapshot_id],
    ]);
    expect(rows[1].documento_hmac).toBe(rows[2].documento_hmac);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM serving.car_titulares WHERE origem = 'inferido'`)).rows[0].n).toBe(3);

    // With GO and MT loaded, the links on other CARs are reported (and kept).
    const t = (await quality(db, out.snapshot_id!)).facts.titulares;
    const loadedCars = new Set((['GO', 'MT'] as const).flatMap((uf) => SICAR_FIXTURES[uf].areaImovel.filter((p) => p.attributes.cod_estado === uf).map((p) => p.attributes.cod_imovel)));
    const absent = okRows.filter((r) => !loadedCars.has(r.link!.car));
    expect(t.ufs_car_carregadas).toEqual(['GO', 'MT']);
    expect(t.car_ausente).toEqual({
      vinculos: absent.length,
      cars: distinct(absent.map((r) => r.link!.car)).length,
      ufs: distinct(absent.map((r) => r.link!.car.slice(0, 2))).sort(),
    });
    expect(absent.map((r) => r.id).filter((id) => !id.startsWith('F'))).toEqual(['S10', 'S11']);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM serving.car_titulares WHERE origem = 'declarado'`)).rows[0].n).toBe(okRows.length);
  });

  it('inferred links follow the current IBAMA snapshot (nothing is stored): a rollback takes them back', async () => {
    const back = await rollback(db.pool, ibama, '');
    expect(back).toEqual({ from: ibamaVariant.snapshot_id, to: ibamaFirst.snapshot_id });
    const rows = await inferred();
    expect(rows.map((r) => [r.car, r.evidencia.confianca, r.snapshot_id])).toEqual([[property('MT1').attributes.cod_imovel, 'baixa', ibamaFirst.snapshot_id]]);
  });
});
