// ibge-municipios end to end on the real embedded PostGIS: the committed fixture, then
// variants built by the fixture generator (encodings, drift, bad codes, duplicates, years).
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Geometry } from 'geojson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-ignore -- the shapefile package ships no type declarations
import * as shapefileUntyped from 'shapefile';
import { extractZip } from '../src/etl/archive.ts';
import { runPipeline } from '../src/etl/run.ts';
import { buildIbgeMunicipios, box, IBGE_FIXTURE, IBGE_FIXTURE_DIR, IBGE_MUNICIPIOS, ring, type IbgeFeature } from '../fixtures/ibge-municipios.ts';
import { SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { ibgeMunicipios } from '../pipelines/ibge-municipios/index.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

interface ShpSource {
  read(): Promise<{ done: boolean; value: { properties: Record<string, unknown>; geometry: Geometry | null } }>;
}
const shapefile = shapefileUntyped as unknown as { open(shp: string, dbf: string, o: { encoding: string }): Promise<ShpSource> };

let db: TestDb;
let work: string;
const FIXTURE_ZIP = path.join(IBGE_FIXTURE_DIR, 'BR_Municipios_2024.zip');

beforeAll(async () => {
  db = await testDatabase();
  work = await mkdtemp(path.join(tmpdir(), 'ibge-test-'));
});
afterAll(async () => {
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

const run = (source: string, extra: { asOf?: string; force?: boolean } = {}) =>
  runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibgeMunicipios, { source, ...extra });

async function quality(snapshotId: number, t: TestDb = db) {
  return (await t.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [snapshotId])).rows[0].quality;
}

async function servingRows() {
  return (await db.pool.query(`SELECT geocodigo, nome, uf, snapshot_id FROM serving.ibge_municipios ORDER BY geocodigo`)).rows;
}

/** A variant folder holding one zip built with these options. */
async function variant(name: string, opts: Parameters<typeof buildIbgeMunicipios>[1]): Promise<string> {
  const dir = path.join(work, name);
  await buildIbgeMunicipios(dir, opts);
  return dir;
}

const byCode = (code: string) => IBGE_FIXTURE.find((f) => f.attributes.CD_MUN === code)!;

describe('the committed fixture', () => {
  let snapshotId: number;

  it('loads every feature and publishes with the mesh year as release date', async () => {
    const out = await run(IBGE_FIXTURE_DIR);
    expect(out.error).toBeUndefined();
    expect(out).toMatchObject({ status: 'published', as_of: '2024-01-01', rows_read: 9, rows_loaded: 9, rows_rejected: 0 });
    snapshotId = out.snapshot_id!;
  });

  it('serves the 8 municipalities with their attributes and leaves Lagoa dos Patos out', async () => {
    const r = await db.pool.query(
      `SELECT geocodigo, nome, uf, cod_uf, area_oficial_km2, ano, extra, snapshot_id FROM serving.ibge_municipios ORDER BY geocodigo`,
    );
    expect(r.rows.map((x) => [x.geocodigo, x.nome, x.uf, x.cod_uf, x.area_oficial_km2, x.ano])).toEqual([
      ['3550308', 'São Paulo', 'SP', '35', 1521.202, 2024],
      ['5103403', 'Cuiabá', 'MT', '51', 4327.448, 2024],
      ['5107925', 'Sorriso', 'MT', '51', 9347.01, 2024],
      ['5108402', 'Várzea Grande', 'MT', '51', 724.279, 2024],
      ['5201405', 'Aparecida de Goiânia', 'GO', '52', 279.954, 2024],
      ['5208707', 'Goiânia', 'GO', '52', 729.296, 2024],
      ['5218805', 'Rio Verde', 'GO', '52', 8379.659, 2024],
      ['5300108', 'Brasília', 'DF', '53', 5760.784, 2024],
    ]);
    expect(r.rows.every((x) => x.snapshot_id === snapshotId)).toBe(true);
    // Mapped optional fields land in extra under their lower-cased names; unknown columns: none.
    expect(r.rows.find((x) => x.geocodigo === '5107925').extra).toEqual({
      nm_uf: 'Mato Grosso', cd_rgi: '510013', nm_rgi: 'Sorriso', cd_rgint: '5103', nm_rgint: 'Sinop',
      cd_regiao: '5', nm_regiao: 'Centro-Oeste', sigla_rg: 'CO',
    });
    const lake = await db.pool.query(`SELECT geocodigo, nome, uf, is_municipio, extra FROM "current".ibge_municipios WHERE NOT is_municipio`);
    expect(lake.rows).toEqual([
      { geocodigo: '4300002', nome: 'Lagoa dos Patos', uf: 'RS', is_municipio: false, extra: { nm_uf: 'Rio Grande do Sul', cd_regiao: '4', nm_regiao: 'Sul', sigla_rg: 'S' } },
    ]);
  });

  it('reports the non-municipality feature in the quality report', async () => {
    const q = await quality(snapshotId);
    expect(q.facts.ibge).toEqual({
      ano: 2024, ano_do_arquivo: true, municipios: 8,
      nao_municipios: [{ geocodigo: '4300002', nome: 'Lagoa dos Patos', uf: 'RS' }],
      codigos_repetidos: [],
    });
    expect(q.facts.notes).toContain(
      '1 features are not municipalities (kept in the snapshot, left out of serving.ibge_municipios and serving.ref_municipio): 4300002 Lagoa dos Patos (RS)',
    );
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.geometry).toMatchObject({ invalid: 0, repaired: 0, rejected: 0, srid: 4674, sridAssumed: false, outsideBrazil: 0 });
    expect(q.facts.fields.unknown).toEqual([]);
    expect(q.facts.fields.missingOptional).toEqual([]);
    expect(q.facts.rejected).toEqual({});
    expect(q.gate).toMatchObject({ passed: true, forced: false, failures: [] });
  });

  it('keeps the crosswalk in serving.ref_municipio with normalised names', async () => {
    const r = await db.pool.query(`SELECT geocodigo, nome_normalizado, uf, cod_municipio_rf, cod_municipio_bacen, ano FROM serving.ref_municipio ORDER BY geocodigo`);
    expect(r.rows.map((x) => [x.geocodigo, x.nome_normalizado, x.uf])).toEqual([
      ['3550308', 'SAO PAULO', 'SP'],
      ['5103403', 'CUIABA', 'MT'],
      ['5107925', 'SORRISO', 'MT'],
      ['5108402', 'VARZEA GRANDE', 'MT'],
      ['5201405', 'APARECIDA DE GOIANIA', 'GO'],
      ['5208707', 'GOIANIA', 'GO'],
      ['5218805', 'RIO VERDE', 'GO'],
      ['5300108', 'BRASILIA', 'DF'],
    ]);
    expect(r.rows.every((x) => x.cod_municipio_rf === null && x.cod_municipio_bacen === null && x.ano === 2024)).toBe(true);
    // How a name-only source resolves: its own spelling through the same normalisation.
    const hit = await db.pool.query(
      `SELECT geocodigo FROM serving.ref_municipio WHERE nome_normalizado = etl.normalize_nome($1) AND uf = $2`,
      ['SÃ£o Paulo', 'SP'],
    );
    expect(hit.rows).toEqual([]); // mojibake does not match …
    const ok = await db.pool.query(`SELECT geocodigo FROM serving.ref_municipio WHERE nome_normalizado = etl.normalize_nome($1) AND uf = $2`, ['  são   PAULO ', 'SP']);
    expect(ok.rows).toEqual([{ geocodigo: '3550308' }]); // … accents, case and spacing do not matter
    const lake = await db.pool.query(`SELECT count(*)::int AS n FROM serving.ref_municipio WHERE geocodigo = '4300002' OR nome_normalizado = 'LAGOA DOS PATOS'`);
    expect(lake.rows[0].n).toBe(0);
  });

  it('computes geodesic areas equal to PostGIS on the source file read by another reader', async () => {
    // Independent path: the `shapefile` package (not GDAL) reads the zip's members.
    const dir = path.join(work, 'independent');
    const files = await extractZip(FIXTURE_ZIP, dir);
    const shp = files.find((f) => f.endsWith('.shp'))!;
    const src = await shapefile.open(shp, shp.replace(/\.shp$/, '.dbf'), { encoding: 'utf-8' });
    const features: { code: string; name: string; geojson: string }[] = [];
    for (let r = await src.read(); !r.done; r = await src.read()) {
      features.push({ code: String(r.value.properties.CD_MUN), name: String(r.value.properties.NM_MUN), geojson: JSON.stringify(r.value.geometry) });
    }
    expect(features.map((f) => f.name)).toEqual(IBGE_FIXTURE.map((f) => f.attributes.NM_MUN));
    const expected = await db.pool.query(
      `SELECT f.code, ST_Area(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON(f.geojson), 4674), 4326)::geography) / 1e6 AS km2
         FROM jsonb_to_recordset($1::jsonb) AS f(code text, geojson text) ORDER BY f.code`,
      [JSON.stringify(features)],
    );
    const got = await db.pool.query(`SELECT geocodigo AS code, area_calculada_km2 AS km2 FROM "current".ibge_municipios ORDER BY geocodigo`);
    expect(got.rows.map((r) => r.code)).toEqual(expected.rows.map((r) => r.code));
    for (let i = 0; i < got.rows.length; i++) expect(got.rows[i].km2).toBeCloseTo(expected.rows[i].km2, 6);
    // Sanity by hand: Brasília's box is 0.98° × 0.55° at ~15.8° S ≈ 105.0 km × 60.9 km.
    const df = got.rows.find((r) => r.code === '5300108').km2;
    expect(df).toBeGreaterThan(6300);
    expect(df).toBeLessThan(6500);
  });

  it('puts the interior point inside each polygon and the SICAR properties inside their municipality', async () => {
    const inside = await db.pool.query(`SELECT count(*)::int AS n FROM "current".ibge_municipios WHERE ST_Within(ponto_interior, geom)`);
    expect(inside.rows[0].n).toBe(9);
    const props = Object.values(SICAR_FIXTURES).flatMap((s) =>
      s.areaImovel.map((p) => ({ id: p.id, code: p.attributes.cod_imovel.slice(3, 10), geojson: JSON.stringify(p.geometry) })),
    );
    const r = await db.pool.query(
      `SELECT p.id, p.code, (SELECT array_agg(m.geocodigo ORDER BY m.geocodigo) FROM serving.ibge_municipios m
                              WHERE ST_Covers(m.geom, ST_Envelope(ST_SetSRID(ST_GeomFromGeoJSON(p.geojson), 4326)))) AS found
         FROM jsonb_to_recordset($1::jsonb) AS p(id text, code text, geojson text)`,
      [JSON.stringify(props)],
    );
    expect(r.rows.length).toBe(17);
    for (const row of r.rows) expect({ id: row.id, found: row.found }).toEqual({ id: row.id, found: [row.code] });
  });

  it('has adjacent, non-overlapping polygons', async () => {
    const pairs = await db.pool.query(
      `SELECT a.geocodigo AS a, b.geocodigo AS b, ST_Touches(a.geom, b.geom) AS touches,
              ST_Area(ST_Intersection(a.geom, b.geom)) AS overlap
         FROM "current".ibge_municipios a JOIN "current".ibge_municipios b ON a.geocodigo < b.geocodigo
        WHERE ST_Intersects(a.geom, b.geom) ORDER BY 1, 2`,
    );
    expect(pairs.rows).toEqual([
      { a: '5103403', b: '5108402', touches: true, overlap: 0 },
      { a: '5201405', b: '5208707', touches: true, overlap: 0 },
    ]);
  });

  it('ends unchanged when the same bytes come again', async () => {
    const out = await run(FIXTURE_ZIP);
    expect(out).toMatchObject({ status: 'unchanged', snapshot_id: snapshotId });
  });
});

describe('variants', () => {
  it('is blocked before loading when CD_MUN is missing', async () => {
    const before = await servingRows();
    const out = await run(await variant('no-cd-mun', { dropFields: ['CD_MUN'] }));
    expect(out.status).toBe('blocked');
    expect(out.error?.code).toBe('required_field_missing');
    expect(out.error?.message).toMatch(/BR_Municipios_2024 has no geocodigo \(looked for cd_mun/);
    expect(out.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['geocodigo'], layer: 'BR_Municipios_2024', looked_for: { geocodigo: expect.arrayContaining(['cd_mun']) } }]);
    expect(await servingRows()).toEqual(before);
  });

  it('rejects malformed codes (never by check digit), repairs invalid polygons and blocks above 1 % rejected', async () => {
    const before = await servingRows();
    const bowtie = ring([[-468300, -240100], [-463600, -233600], [-463600, -240100], [-468300, -233600]]);
    const features: IbgeFeature[] = IBGE_FIXTURE.map((f) => (f.attributes.CD_MUN === '3550308' ? { ...f, geometry: bowtie } : f));
    const bad = (code: string, uf: 'GO' | 'RS', x: number): IbgeFeature => ({
      role: 'variant', geometry: box(x, -300000, x + 1000, -299000),
      attributes: { ...byCode('5208707').attributes, CD_MUN: code, NM_MUN: `Teste ${code}`, SIGLA_UF: uf },
    });
    // 9900001: no UF 99; 520870: six digits; 4314902 with SIGLA_UF GO: UF mismatch.
    // 5300109 (Brasília with a wrong check digit) is well-shaped and must load.
    features.push(bad('9900001', 'GO', -520000), bad('520870', 'GO', -521000), bad('4314902', 'GO', -522000));
    features.push({ ...bad('5300109', 'GO', -523000), attributes: { ...byCode('5300108').attributes, CD_MUN: '5300109', NM_MUN: 'Teste DV' } });
    const out = await run(await variant('bad-codes', { features }));
    expect(out).toMatchObject({ status: 'blocked', rows_read: 13, rows_loaded: 10, rows_rejected: 3 });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.rejected).toEqual({ bad_geocodigo: 2, uf_mismatch: 1 });
    expect(q.facts.geometry).toMatchObject({ invalid: 1, repaired: 1, rejected: 0 });
    expect(q.gate.failures.map((f: { rule: string }) => f.rule)).toEqual(['rejected_share']);
    expect(await servingRows()).toEqual(before);
  });

  it('reads a latin1 DBF under a .cpg saying UTF-8 by its bytes, and says so', async () => {
    const out = await run(await variant('lying-cpg', { encoding: 'latin1', cpg: 'UTF-8' }));
    expect(out.status).toBe('published');
    const q = await quality(out.snapshot_id!);
    expect(q.facts.encoding).toEqual({ name: 'ISO-8859-1', assumed: true, replacementChars: 0 });
    expect(q.facts.notes.find((n: string) => n.includes('.cpg says'))).toMatch(/^BR_Municipios_2024: \.cpg says UTF-8 but the DBF's bytes are not UTF-8 \(\d+ byte sequences undecodable, [1-9]\d* of them inside words; 0 multibyte\)$/);
    expect(q.facts.notes).toContain('BR_Municipios_2024: its DBF read as ISO-8859-1 (decided by the bytes)');
    const r = await db.pool.query(`SELECT nome FROM serving.ref_municipio WHERE geocodigo IN ('3550308', '5108402') ORDER BY 1`);
    expect(r.rows.map((x) => x.nome)).toEqual(['São Paulo', 'Várzea Grande']);
  });

  it('blocks a UTF-8 DBF with damaged bytes under its UTF-8 .cpg (U+FFFD in names) unless forced', async () => {
    // Every text written as its UTF-8 bytes (a latin1 writer given the bytes as latin1 letters),
    // except one name written in latin1: one undecodable sequence among the valid multibyte ones.
    const asUtf8Bytes = (v: unknown) => (typeof v === 'string' ? Buffer.from(v, 'utf8').toString('latin1') : v);
    const features = IBGE_FIXTURE.map((f) => {
      const attributes = Object.fromEntries(Object.entries(f.attributes).map(([k, v]) => [k, asUtf8Bytes(v)])) as unknown as IbgeFeature['attributes'];
      return { ...f, attributes: f.attributes.CD_MUN === '5103403' ? { ...attributes, NM_MUN: 'Cuiabá' } : attributes };
    });
    const out = await run(await variant('damaged-utf8', { encoding: 'latin1', cpg: 'UTF-8', features }));
    expect(out.status).toBe('blocked');
    const q = await quality(out.snapshot_id!);
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 1 });
    expect(q.gate.failures).toEqual([
      { rule: 'replacement_characters', message: `1 values hold U+FFFD: the DBF is not in the encoding its .cpg declares (UTF-8)`, value: 1 },
    ]);
  });

  it('detects a Latin-1 DBF without .cpg and keeps the accents', async () => {
    const out = await run(await variant('latin1-no-cpg', { encoding: 'latin1', cpg: null }));
    expect(out.status).toBe('published');
    const q = await quality(out.snapshot_id!);
    expect(q.facts.encoding).toEqual({ name: 'ISO-8859-1', assumed: true, replacementChars: 0 });
    expect(q.facts.notes).toContain('BR_Municipios_2024 has no .cpg or .cst: its DBF read as ISO-8859-1 (decided by the bytes)');
    const r = await db.pool.query(`SELECT nome, nome_normalizado FROM serving.ref_municipio WHERE geocodigo IN ('3550308', '5108402') ORDER BY 1`);
    expect(r.rows).toEqual([
      { nome: 'São Paulo', nome_normalizado: 'SAO PAULO' },
      { nome: 'Várzea Grande', nome_normalizado: 'VARZEA GRANDE' },
    ]);
  });

  it('merges features that share a code instead of dropping territory', async () => {
    const df = byCode('5300108');
    const features: IbgeFeature[] = IBGE_FIXTURE.flatMap((f) =>
      f === df
        ? [{ ...df, geometry: box(-482900, -160500, -478000, -155000) }, { ...df, geometry: box(-478000, -160500, -473100, -155000) }]
        : [f],
    );
    const out = await run(await variant('split-df', { features }));
    expect(out).toMatchObject({ status: 'published', rows_read: 10, rows_loaded: 9, rows_rejected: 0 });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.dropped).toEqual({ duplicate_geocodigo_merged: 1 });
    expect(q.facts.ibge.codigos_repetidos).toEqual([{ geocodigo: '5300108', feicoes: 2 }]);
    const halves = features.filter((f) => f.attributes.CD_MUN === '5300108').map((f) => JSON.stringify(f.geometry));
    const r = await db.pool.query(
      `SELECT ST_NumGeometries(geom) AS parts, area_calculada_km2 AS km2,
              (SELECT sum(ST_Area(ST_SetSRID(ST_GeomFromGeoJSON(h), 4326)::geography)) / 1e6 FROM unnest($1::text[]) h) AS halves
         FROM serving.ibge_municipios WHERE geocodigo = '5300108'`,
      [halves],
    );
    expect(r.rows[0].parts).toBe(1); // the two halves dissolve into one polygon …
    expect(r.rows[0].km2).toBeCloseTo(r.rows[0].halves, 6); // … holding both halves' area
  });

  it('picks the newest mesh of a folder and takes the year from the file name', async () => {
    const dir = path.join(work, 'years');
    await buildIbgeMunicipios(dir, { year: 2023, features: IBGE_MUNICIPIOS.slice(0, 7) });
    await buildIbgeMunicipios(dir, { year: 2025 });
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'published', as_of: '2025-01-01', rows_loaded: 9 });
    const r = await db.pool.query(`SELECT DISTINCT ano FROM serving.ibge_municipios`);
    expect(r.rows).toEqual([{ ano: 2025 }]);
  });

  it('uses the as-of year when the file name carries no year', async () => {
    const zip = await buildIbgeMunicipios(path.join(work, 'no-year'), { year: 2022, zipName: 'malha.zip' });
    const out = await run(zip, { asOf: '2022-08-31' });
    expect(out).toMatchObject({ status: 'published', as_of: '2022-08-31' });
    const r = await db.pool.query(`SELECT DISTINCT ano FROM serving.ibge_municipios`);
    expect(r.rows).toEqual([{ ano: 2022 }]);
    const q = await quality(out.snapshot_id!);
    expect(q.facts.ibge.ano_do_arquivo).toBe(false);
    expect(q.facts.notes).toContain('malha.zip carries no mesh year (BR_Municipios_<YYYY>.zip): ano = 2022, the as-of year');
  });
});

describe('the official list (IBGE localidades API, SOURCES §9.7)', () => {
  /** An item as GET /api/v1/localidades/municipios writes it (new municipalities come with microrregiao null). */
  const apiItem = (id: string, nome: string, uf: string | null) => ({
    id: Number(id), nome,
    microrregiao: uf ? { id: 0, nome: 'x', mesorregiao: { id: 0, nome: 'x', UF: { id: Number(id.slice(0, 2)), sigla: uf, nome: 'x' } } } : null,
  });
  const listed = IBGE_MUNICIPIOS.map((f) => apiItem(f.attributes.CD_MUN, f.attributes.NM_MUN, f.attributes.SIGLA_UF));
  // Created in 2023 and absent from the meshes (SOURCES §9.6); the code is the fixture's.
  const NEW = apiItem('5101837', 'Boa Esperança do Norte', null);

  async function withList(name: string, list: unknown, opts: Parameters<typeof buildIbgeMunicipios>[1] = {}): Promise<string> {
    const dir = await variant(name, opts);
    await writeFile(path.join(dir, 'municipios.json'), typeof list === 'string' ? list : JSON.stringify(list));
    return dir;
  }

  it('a listed code the mesh lacks is served with a NULL geometry (ref_municipio too); read = loaded + rejected + dropped', async () => {
    const out = await run(await withList('official', [...listed, NEW]));
    expect(out.error).toBeUndefined();
    expect(out).toMatchObject({ status: 'published', rows_read: 10, rows_loaded: 10, rows_rejected: 0, rows_dropped: 0 });
    const r = await db.pool.query(
      `SELECT geocodigo, nome, uf, cod_uf, area_oficial_km2, area_calculada_km2, ponto_interior, geom, extra FROM serving.ibge_municipios WHERE geocodigo = '5101837'`,
    );
    expect(r.rows).toEqual([{
      geocodigo: '5101837', nome: 'Boa Esperança do Norte', uf: 'MT', cod_uf: '51', area_oficial_km2: null, area_calculada_km2: null,
      ponto_interior: null, geom: null, extra: { sem_malha: true },
    }]);
    expect((await servingRows()).map((x) => x.geocodigo)).toEqual([...IBGE_MUNICIPIOS.map((f) => f.attributes.CD_MUN), '5101837'].sort());
    const ref = await db.pool.query(`SELECT geocodigo FROM serving.ref_municipio WHERE nome_normalizado = etl.normalize_nome($1) AND uf = 'MT'`, ['Boa Esperanca do Norte']);
    expect(ref.rows).toEqual([{ geocodigo: '5101837' }]);
    const q = await quality(out.snapshot_id!);
    expect(q.facts.lista_oficial).toEqual({
      fonte: 'municipios.json', municipios: 9,
      sem_malha: [{ geocodigo: '5101837', nome: 'Boa Esperança do Norte', uf: 'MT' }],
      fora_da_lista: [],
    });
    expect(q.facts.ibge.nao_municipios).toEqual([{ geocodigo: '4300002', nome: 'Lagoa dos Patos', uf: 'RS' }]);
    expect(q.facts.notes.join('\n')).toContain('1 official municipalities are not in the mesh (served with a NULL geometry): 5101837 Boa Esperança do Norte (MT)');
    expect(q.gate.passed).toBe(true);
  });

  it('a listed code whose only mesh feature is rejected stays served with a NULL geometry (ref_municipio too), like one the mesh lacks', async () => {
    // Sorriso drawn at 10°E 10°N: rejected (outside_brazil). 1 of 5,570 in a real mesh is under the
    // 1 % rejected gate (forced here: 1 of 9), and the official code must not leave the crosswalk.
    const features = IBGE_FIXTURE.map((f) => (f.attributes.CD_MUN === '5107925' ? { ...f, geometry: box(100000, 100000, 101000, 101000) } : f));
    const out = await run(await withList('rejected-listed', listed, { features }), { force: true });
    expect(out).toMatchObject({ status: 'published', rows_rejected: 1 });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.rejected).toEqual({ outside_brazil: 1 });
    const r = await db.pool.query(`SELECT geocodigo, nome, uf, geom FROM serving.ibge_municipios WHERE geocodigo = '5107925'`);
    expect(r.rows).toEqual([{ geocodigo: '5107925', nome: 'Sorriso', uf: 'MT', geom: null }]);
    const ref = await db.pool.query(`SELECT geocodigo FROM serving.ref_municipio WHERE nome_normalizado = etl.normalize_nome('Sorriso') AND uf = 'MT'`);
    expect(ref.rows).toEqual([{ geocodigo: '5107925' }]);
    expect(q.facts.lista_oficial.sem_malha).toEqual([{ geocodigo: '5107925', nome: 'Sorriso', uf: 'MT' }]);
  });

  it('a mesh feature with a municipality-shaped code the list lacks is not a municipality: reported, and over 1 % of them block', async () => {
    const sorriso = byCode('5107925');
    const stray: IbgeFeature = { ...sorriso, role: 'variant', attributes: { ...sorriso.attributes, CD_MUN: '5199999', NM_MUN: 'Área em litígio' }, geometry: box(-552000, -130000, -551000, -129000) };
    const dir = await withList('unlisted', listed, { features: [...IBGE_FIXTURE, stray] });
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'blocked', rows_read: 10, rows_loaded: 10 });
    expect(out.gate?.failures.map((f) => f.rule)).toEqual(['official_list_mismatch']);
    const q = await quality(out.snapshot_id!);
    expect(q.facts.lista_oficial.fora_da_lista).toEqual([{ geocodigo: '5199999', nome: 'Área em litígio', uf: 'MT' }]);
    expect(q.facts.ibge.nao_municipios).toEqual([{ geocodigo: '4300002', nome: 'Lagoa dos Patos', uf: 'RS' }, { geocodigo: '5199999', nome: 'Área em litígio', uf: 'MT' }]);
    const forced = await run(dir, { force: true });
    expect(forced.status).toBe('published');
    expect((await servingRows()).map((x) => x.geocodigo)).not.toContain('5199999');
    const cur = await db.pool.query(`SELECT is_municipio FROM "current".ibge_municipios WHERE geocodigo = '5199999'`);
    expect(cur.rows).toEqual([{ is_municipio: false }]);
  });

  it('a list of another shape fails the run, naming the file; the current snapshot stays', async () => {
    const before = (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibge-municipios'`)).rows[0].snapshot_id;
    for (const [name, list] of [['list-html', '<html>Serviço indisponível</html>'], ['list-object', { erro: 'indisponível' }], ['list-items', [...listed, { id: 'x', nome: '' }]]] as const) {
      const out = await run(await withList(name, list));
      expect(out.status, name).toBe('failed');
      expect(out.error?.code, name).toBe('malformed_source');
      expect(out.error?.message, name).toContain('municipios.json');
    }
    expect((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'ibge-municipios'`)).rows[0].snapshot_id).toBe(before);
  });

  it('the list is part of the source: the same mesh and list (any key order, spacing, item order) end unchanged; a list-only change loads; an unreachable list with the same mesh is unchanged', async () => {
    const zip = await buildIbgeMunicipios(path.join(work, 'remote-list'), {});
    // What the localidades API answers on each request: the body is built then (a new fetch each run).
    let answer: () => string | null = () => JSON.stringify(listed);
    const server = http.createServer((req, res) => {
      const body = req.url === '/api/v1/localidades/municipios' ? answer() : null;
      if (req.url === '/BR_Municipios_2024.zip') {
        res.setHeader('content-type', 'application/zip');
        res.end(readFileSync(zip));
      } else if (body !== null) {
        res.setHeader('content-type', 'application/json');
        res.end(body);
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const fresh = await testDatabase();
    try {
      const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const cfg = { ...fresh.cfg, sources: { ...fresh.cfg.sources, 'ibge-localidades': `${base}/api/v1/localidades/municipios` } };
      const go = () => runPipeline({ cfg, pool: fresh.pool, log: fresh.log }, ibgeMunicipios, { source: `${base}/BR_Municipios_2024.zip` });
      const served = async () => (await fresh.pool.query(`SELECT geocodigo FROM serving.ibge_municipios ORDER BY 1`)).rows.map((r) => r.geocodigo);
      const first = await go();
      expect(first).toMatchObject({ status: 'published', rows_loaded: 9 });
      expect(await served()).not.toContain('5101837');
      const sources = async (sid: number) => (await fresh.pool.query(`SELECT source FROM etl.snapshots WHERE snapshot_id = $1`, [sid])).rows[0].source;
      expect((await sources(first.snapshot_id!)).parts).toEqual([expect.objectContaining({ name: 'municipios.json', uri: `${base}/api/v1/localidades/municipios`, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) })]);
      // The same list again, then written otherwise: keys and items in another order, indented.
      expect(await go()).toMatchObject({ status: 'unchanged', snapshot_id: first.snapshot_id });
      answer = () => JSON.stringify([...listed].reverse().map((m) => Object.fromEntries(Object.entries(m).reverse())), null, 2);
      expect(await go()).toMatchObject({ status: 'unchanged', snapshot_id: first.snapshot_id });
      // Only the list changes (a new municipality): a new snapshot, with it served.
      answer = () => JSON.stringify([...listed, NEW]);
      const second = await go();
      expect(second).toMatchObject({ status: 'published', rows_loaded: 10 });
      expect(second.snapshot_id).not.toBe(first.snapshot_id);
      expect(await served()).toContain('5101837');
      expect((await quality(second.snapshot_id!, fresh)).facts.lista_oficial).toMatchObject({ municipios: 9, sem_malha: [{ geocodigo: '5101837', nome: 'Boa Esperança do Norte', uf: 'MT' }] });
      expect(await go()).toMatchObject({ status: 'unchanged', snapshot_id: second.snapshot_id });
      // The API down, the mesh the same: nothing new was read; the list-joined snapshot stays.
      answer = () => null;
      const down = await go();
      expect(down).toMatchObject({ status: 'unchanged', snapshot_id: second.snapshot_id });
      expect(down.message).toMatch(/municipios\.json could not be read/);
      expect(await served()).toContain('5101837');
    } finally {
      server.close();
      await fresh.drop();
    }
  });

  it('a downloaded mesh takes the list from the configured URL; an unreachable list is a note, the mesh still loads', async () => {
    const zip = await buildIbgeMunicipios(path.join(work, 'remote'), {});
    let listStatus = 200;
    const server = http.createServer((req, res) => {
      if (req.url === '/BR_Municipios_2024.zip') {
        res.setHeader('content-type', 'application/zip');
        res.end(readFileSync(zip));
      } else if (req.url === '/api/v1/localidades/municipios' && listStatus === 200) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify([...listed, NEW]));
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
      const cfg = { ...db.cfg, sources: { ...db.cfg.sources, 'ibge-localidades': `${base}/api/v1/localidades/municipios` } };
      const out = await runPipeline({ cfg, pool: db.pool, log: db.log }, ibgeMunicipios, { source: `${base}/BR_Municipios_2024.zip`, force: true });
      expect(out).toMatchObject({ status: 'published', rows_loaded: 10 });
      expect((await quality(out.snapshot_id!)).facts.lista_oficial).toMatchObject({ fonte: `${base}/api/v1/localidades/municipios`, municipios: 9 });
      listStatus = 404;
      // Another mesh (a feature less), the list gone: loaded, told apart by code shape, said so.
      await rm(path.join(work, 'remote'), { recursive: true });
      await buildIbgeMunicipios(path.join(work, 'remote'), { features: IBGE_FIXTURE.filter((f) => f.attributes.CD_MUN !== '3550308') });
      const again = await runPipeline({ cfg, pool: db.pool, log: db.log }, ibgeMunicipios, { source: `${base}/BR_Municipios_2024.zip`, force: true });
      expect(again).toMatchObject({ status: 'published', rows_loaded: 8 });
      const q = await quality(again.snapshot_id!);
      expect(q.facts.lista_oficial).toMatchObject({ fonte: null, municipios: 0, sem_malha: [] });
      expect(q.facts.notes.join('\n')).toMatch(/no official municipality list \(.*HTTP 404.*\): municipalities told apart by their code/);
      expect((await servingRows()).map((x) => x.geocodigo)).not.toContain('4300002');
    } finally {
      server.close();
    }
  });
});
