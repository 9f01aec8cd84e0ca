// The SICAR pipeline on the fixture states: mapping, repair, dedup, theme areas,
// per-state snapshots, and a golden file of the normalised output
// (regenerate with UPDATE_GOLDEN=1 and review the diff).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildLayerZip } from '../fixtures/readers.ts';
import { GO9, SICAR_FIXTURES, THEME_FIELDS, buildSicarMunicipalGo, buildSicarState, carNumber, municipalAppsRows, type MunicipalThemeRow, type SicarUf } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { expectGolden } from './helpers/golden.ts';

let db: TestDb;
let work: string;
const outcomes: Partial<Record<SicarUf, RunOutcome>> = {};

const run = (uf: string, source: string, extra = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf, source, ...extra });
const byRole = (uf: SicarUf, role: string) => SICAR_FIXTURES[uf].areaImovel.filter((r) => r.role === role);

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'sicar-test-'));
  for (const uf of ['GO', 'MT', 'DF'] as const) {
    const dir = path.join(work, uf);
    await buildSicarState(uf, dir);
    outcomes[uf] = await run(uf, dir);
  }
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

async function report(snapshotId: number, d: TestDb = db): Promise<QualityReport> {
  const r = await d.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId]);
  return r.rows[0].quality;
}

describe('GO: split layer, latin1 without .cpg, repair, duplicates, neighbour state', () => {
  test('run outcome counts every row', () => {
    const o = outcomes.GO!;
    expect(o.status).toBe('published');
    expect(o.rows_read).toBe(SICAR_FIXTURES.GO.areaImovel.length);
    // one neighbour-state row dropped, one duplicate resolved
    expect(o.rows_loaded).toBe(SICAR_FIXTURES.GO.areaImovel.length - 2);
    expect(o.rows_rejected).toBe(0);
    expect(Object.keys(o.stages)).toEqual(['download', 'read', 'normalise', 'index', 'quality', 'derive', 'publish']);
  });

  test('both parts of the split layer are read', async () => {
    const q = await report(outcomes.GO!.snapshot_id!);
    expect(q.facts.layers.filter((l) => l.name.startsWith('GO_AREA_IMOVEL_')).map((l) => l.name)).toEqual(['GO_AREA_IMOVEL_1', 'GO_AREA_IMOVEL_2']);
    expect(q.facts.dropped).toEqual({ other_state: 1, duplicate_car: 1 });
    expect(q.facts.geometry).toMatchObject({ invalid: 1, repaired: 1, rejected: 0, srid: 4674, sridAssumed: false });
    expect(q.facts.dates.placeholders).toEqual({ dat_criaca: 1 });
    expect(q.facts.encoding).toMatchObject({ name: 'ISO-8859-1', assumed: true, replacementChars: 0 });
    expect(q.gate.passed).toBe(true);
  });

  test('attributes are mapped and decoded from latin1', async () => {
    const rows = (await db.pool.query(`SELECT car, municipio, condicao, uf, cod_municipio_ibge FROM serving.car_imovel WHERE uf = 'GO'`)).rows;
    const names = new Set(rows.map((r) => r.municipio));
    expect(names).toEqual(new Set(['Goiânia', 'Rio Verde']));
    for (const r of rows) expect(r.cod_municipio_ibge).toBe(r.car.slice(3, 10));
    expect(rows.some((r) => /análise/.test(r.condicao))).toBe(true);
  });

  test('neighbour-state row is not published under GO', async () => {
    const [n] = byRole('GO', 'neighbour-state');
    const r = await db.pool.query('SELECT uf FROM serving.car_imovel WHERE car = $1', [n.attributes.cod_imovel]);
    expect(r.rows).toEqual([]);
  });

  test('duplicate CAR resolves to the most recently updated copy', async () => {
    const [newer] = byRole('GO', 'duplicate-new');
    const r = await db.pool.query(
      `SELECT data_atualizacao::text AS d, area_calculada_ha, ST_Area(ST_GeomFromGeoJSON($2)::geography) / 10000 AS expected
         FROM serving.car_imovel WHERE car = $1`,
      [newer.attributes.cod_imovel, JSON.stringify(newer.geometry)],
    );
    expect(r.rows).toHaveLength(1);
    const [d, m, y] = newer.attributes.dat_atuali.split('/');
    expect(r.rows[0].d).toBe(`${y}-${m}-${d}`);
    // EPSG:10857 (equal-area) against the geodesic area: within 5 m² on ~600 ha.
    expect(r.rows[0].area_calculada_ha).toBeCloseTo(r.rows[0].expected, 3);
  });

  test('geometry: multipart kept, hole kept, bow-tie repaired into valid polygons, all MultiPolygon 4326', async () => {
    const q = async (role: string) =>
      (await db.pool.query(`SELECT ST_NumGeometries(geom) AS parts, ST_NRings(geom) AS rings, ST_IsValid(geom) AS valid, ST_SRID(geom) AS srid, GeometryType(geom) AS type FROM serving.car_imovel WHERE car = $1`, [byRole('GO', role)[0].attributes.cod_imovel])).rows[0];
    expect(await q('multipart')).toMatchObject({ parts: 2, rings: 2, valid: true, srid: 4326, type: 'MULTIPOLYGON' });
    expect(await q('hole')).toMatchObject({ parts: 1, rings: 2, valid: true });
    const bow = await q('bowtie');
    expect(bow.valid).toBe(true);
    expect(bow.parts).toBe(2); // the structure method keeps both lobes
    const all = await db.pool.query(`SELECT count(*) FILTER (WHERE NOT ST_IsValid(geom) OR ST_SRID(geom) <> 4326) AS bad FROM serving.car_imovel`);
    expect(all.rows[0].bad).toBe(0);
  });

  test('equal-area hectares match an independent geodesic computation from the fixture geometry', async () => {
    for (const row of SICAR_FIXTURES.GO.areaImovel.filter((r) => !['bowtie', 'neighbour-state', 'duplicate-old'].includes(r.role))) {
      const r = await db.pool.query(
        `SELECT area_calculada_ha, area_total_ha, ST_Area(ST_GeomFromGeoJSON($2)::geography) / 10000 AS expected FROM serving.car_imovel WHERE car = $1`,
        [row.attributes.cod_imovel, JSON.stringify(row.geometry)],
      );
      // EPSG:10857 (equal-area) against the geodesic area: within 5 m² on ~600 ha.
    expect(r.rows[0].area_calculada_ha).toBeCloseTo(r.rows[0].expected, 3);
      expect(r.rows[0].area_total_ha).toBeCloseTo(row.attributes.num_area, 4);
    }
  });

  test('theme areas: union of detailed codes, APP_TOTAL not double counted, NULL-free when the theme was loaded', async () => {
    const fx = SICAR_FIXTURES.GO;
    for (const p of fx.areaImovel.filter((r) => r.role !== 'neighbour-state')) {
      const car = p.attributes.cod_imovel;
      const details = (theme: string) =>
        fx.themeRows.filter((t) => t.theme === theme && t.attributes.cod_imovel === car && !t.attributes.cod_tema.endsWith('_TOTAL') && (theme !== 'APPS' || t.attributes.cod_tema.startsWith('APP_')));
      const expected = async (theme: string) => {
        const polys = details(theme).map((t) => JSON.stringify(t.geometry));
        if (polys.length === 0) return 0;
        const r = await db.pool.query(`SELECT ST_Area(ST_Union(ST_GeomFromGeoJSON(g))::geography) / 10000 AS ha FROM unnest($1::text[]) g`, [polys]);
        return r.rows[0].ha as number;
      };
      const got = (await db.pool.query('SELECT app_ha, reserva_legal_ha, area_consolidada_ha FROM serving.car_imovel WHERE car = $1', [car])).rows[0];
      expect(got.app_ha).toBeCloseTo(await expected('APPS'), 4);
      expect(got.reserva_legal_ha).toBeCloseTo(await expected('RESERVA_LEGAL'), 4);
      expect(got.area_consolidada_ha).toBeCloseTo(await expected('AREA_CONSOLIDADA'), 4);
    }
    // The summed detailed polygons overlap: naive summing would exceed the union.
    const [p] = byRole('GO', 'apps-detailed');
    const naive = fx.themeRows.filter((t) => t.attributes.cod_imovel === p.attributes.cod_imovel && t.theme === 'APPS').reduce((a, t) => a + t.attributes.num_area, 0);
    const got = (await db.pool.query('SELECT app_ha FROM serving.car_imovel WHERE car = $1', [p.attributes.cod_imovel])).rows[0];
    expect(got.app_ha).toBeLessThan(naive * 0.75);
  });

  test('status and type are mapped as the contract says', async () => {
    const r = await db.pool.query(`SELECT DISTINCT situacao, tipo FROM serving.car_imovel WHERE uf = 'GO'`);
    for (const x of r.rows) {
      expect(['ativo', 'pendente', 'cancelado', 'suspenso']).toContain(x.situacao);
      expect(['imovel_rural', 'assentamento', 'territorio_tradicional']).toContain(x.tipo);
    }
    const codes = new Set(SICAR_FIXTURES.GO.areaImovel.map((r) => r.attributes.ind_status));
    const mapped = new Set(r.rows.map((x) => x.situacao));
    expect(mapped.size).toBe(codes.size);
  });

  test('golden output (test/golden/sicar-GO.geojson)', async () => {
    const r = await db.pool.query(
      `SELECT json_build_object('type', 'FeatureCollection', 'features', json_agg(json_build_object(
         'type', 'Feature', 'geometry', ST_AsGeoJSON(geom, 7)::json,
         'properties', json_build_object('car', car, 'uf', uf, 'cod_municipio_ibge', cod_municipio_ibge, 'municipio', municipio,
            'situacao', situacao, 'tipo', tipo, 'condicao', condicao, 'modulos_fiscais', modulos_fiscais,
            'area_total_ha', area_total_ha, 'area_calculada_ha', round(area_calculada_ha::numeric, 4),
            'app_ha', round(app_ha::numeric, 4), 'reserva_legal_ha', round(reserva_legal_ha::numeric, 4),
            'area_consolidada_ha', round(area_consolidada_ha::numeric, 4), 'data_inscricao', data_inscricao,
            'data_atualizacao', data_atualizacao, 'centroid', ST_AsGeoJSON(centroid, 7)::json)) ORDER BY car)) AS fc
         FROM serving.car_imovel WHERE uf = 'GO'`,
    );
    const actual = JSON.stringify(r.rows[0].fc, null, 1) + '\n';
    expectGolden(path.join(__dirname, 'golden', 'sicar-GO.geojson'), actual);
  });
});

describe('MT and DF', () => {
  test('MT: UTF-8 via .cpg, only APPS loaded so the other theme areas are NULL', async () => {
    expect(outcomes.MT!.status).toBe('published');
    const r = await db.pool.query(`SELECT DISTINCT municipio, app_ha IS NOT NULL AS app, reserva_legal_ha IS NULL AS rl_null, area_consolidada_ha IS NULL AS ac_null FROM serving.car_imovel WHERE uf = 'MT'`);
    expect(r.rows.map((x) => x.municipio).sort()).toEqual(['Cuiabá', 'Sorriso']);
    for (const x of r.rows) expect(x).toMatchObject({ app: true, rl_null: true, ac_null: true });
    const q = await report(outcomes.MT!.snapshot_id!);
    expect(q.facts.encoding).toMatchObject({ name: 'UTF-8', assumed: false });
  });

  test('DF: no .prj, EPSG:4674 assumed and reported', async () => {
    const q = await report(outcomes.DF!.snapshot_id!);
    expect(q.facts.geometry.sridAssumed).toBe(true);
    expect(q.facts.notes.join('\n')).toMatch(/no \.prj: EPSG:4674/);
    const r = await db.pool.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE uf = 'DF'`);
    expect(r.rows[0].n).toBe(SICAR_FIXTURES.DF.areaImovel.length);
  });

  test('each state has its own snapshot; loading MT did not touch GO', async () => {
    const r = await db.pool.query(`SELECT uf, snapshot_id FROM serving.snapshots WHERE dataset = 'sicar' AND status = 'current' ORDER BY uf`);
    expect(r.rows).toEqual([
      { uf: 'DF', snapshot_id: outcomes.DF!.snapshot_id },
      { uf: 'GO', snapshot_id: outcomes.GO!.snapshot_id },
      { uf: 'MT', snapshot_id: outcomes.MT!.snapshot_id },
    ]);
    const per = await db.pool.query(`SELECT uf, min(snapshot_id) AS a, max(snapshot_id) AS b FROM serving.car_imovel GROUP BY uf ORDER BY uf`);
    for (const x of per.rows) expect(x.a).toBe(x.b);
  });

  test('reloading GO with one property fewer replaces GO only', async () => {
    const dir = path.join(work, 'GO-v2');
    const removed = SICAR_FIXTURES.GO.areaImovel.find((r) => r.role === 'plain')!;
    await buildSicarState('GO', dir, { filter: (r) => r !== removed });
    const mtBefore = (await db.pool.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE uf = 'MT'`)).rows[0].n;
    const o = await run('GO', dir);
    expect(o.status).toBe('published');
    expect(o.rows_loaded).toBe(outcomes.GO!.rows_loaded - 1);
    const q = await report(o.snapshot_id!);
    expect(q.change).toMatchObject({ previous_snapshot_id: outcomes.GO!.snapshot_id, added: 0, removed: 1 });
    expect((await db.pool.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE car = $1`, [removed.attributes.cod_imovel])).rows[0].n).toBe(0);
    expect((await db.pool.query(`SELECT count(*) AS n FROM serving.car_imovel WHERE uf = 'MT'`)).rows[0].n).toBe(mtBefore);
    // The previous GO snapshot stays queryable through its own table.
    const prev = await db.pool.query(`SELECT count(*) AS n FROM snap."car_imovel__s${outcomes.GO!.snapshot_id}"`);
    expect(prev.rows[0].n).toBe(outcomes.GO!.rows_loaded);
  });

  test('an unchanged source ends unchanged and creates nothing', async () => {
    const before = (await db.pool.query(`SELECT count(*) AS n FROM etl.snapshots`)).rows[0].n;
    const o = await run('MT', path.join(work, 'MT'));
    expect(o.status).toBe('unchanged');
    expect(o.snapshot_id).toBe(outcomes.MT!.snapshot_id);
    expect((await db.pool.query(`SELECT count(*) AS n FROM etl.snapshots`)).rows[0].n).toBe(before);
  });
});

describe('issue 6: a GO theme in the older per-municipality layout (IDF, NOM_TEMA, NUM_AREA; no cod_imovel)', () => {
  const DIR = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'fixtures', 'sicar-municipal', 'GO');
  let mdb: TestDb;
  beforeAll(async () => {
    mdb = await testDatabase();
  });
  afterAll(async () => {
    await mdb.drop();
  });
  const runM = (source: string) => runPipeline({ cfg: mdb.cfg, pool: mdb.pool, log: mdb.log }, sicar, { uf: 'GO', source });

  test('the committed fixture is what the generator writes', async () => {
    const fresh = path.join(work, 'municipal-fresh');
    for (const z of await buildSicarMunicipalGo(fresh)) {
      expect(fs.readFileSync(z).equals(fs.readFileSync(path.join(DIR, path.basename(z)))), path.basename(z)).toBe(true);
    }
  });

  test('the properties load; each theme polygon is linked to the one property containing its point-on-surface; none or several → counted, not linked', async () => {
    const out = await runM(DIR);
    expect([out.status, out.error]).toEqual(['published', undefined]);
    const rows = municipalAppsRows();
    const linked = rows.filter((r): r is MunicipalThemeRow & { expect: { car: string } } => 'car' in r.expect);
    // car_tema holds exactly the linked polygons, under the property the fixture says.
    const tema = await mdb.pool.query(
      `SELECT car, cod_tema, nome_tema, area_ha, extra, ST_AsGeoJSON(geom) AS gj FROM serving.car_temas WHERE tema_base = 'APPS' ORDER BY (extra->>'idf')::int`,
    );
    expect(tema.rows.map((r) => r.car)).toEqual(linked.map((r) => r.expect.car));
    expect(tema.rows.every((r) => r.cod_tema === null)).toBe(true);
    expect(tema.rows[0]).toMatchObject({ nome_tema: linked[0].nom_tema, extra: { idf: 1 } });
    // app_ha equals the union of each property's APP polygons (the APP_TOTAL copy is not double counted).
    for (const car of [...new Set(linked.map((r) => r.expect.car))]) {
      const polys = linked.filter((r) => r.expect.car === car).map((r) => JSON.stringify(r.geometry));
      const want = (await mdb.pool.query(`SELECT ST_Area(ST_Union(ST_GeomFromGeoJSON(g))::geography) / 10000 AS ha FROM unnest($1::text[]) g`, [polys])).rows[0].ha;
      const got = (await mdb.pool.query(`SELECT app_ha FROM serving.car_imovel WHERE car = $1`, [car])).rows[0].app_ha;
      expect(got).toBeCloseTo(want, 4);
    }
    // The ambiguous polygon lies in GO8 ∩ GO9: neither gets it; the theme was loaded, so their app_ha is 0, not NULL.
    const go8 = SICAR_FIXTURES.GO.areaImovel.find((r) => r.id === 'GO8')!.attributes.cod_imovel;
    const others = await mdb.pool.query(`SELECT car, app_ha, reserva_legal_ha FROM serving.car_imovel WHERE car = ANY($1)`, [[go8, GO9.attributes.cod_imovel]]);
    expect(others.rows.map((r) => r.app_ha)).toEqual([0, 0]);
    expect(others.rows.find((r) => r.car === go8)!.reserva_legal_ha).toBeGreaterThan(0); // current-layout themes load as usual
    expect((await mdb.pool.query(`SELECT count(*)::int AS n FROM serving.car_imovel`)).rows[0].n).toBe(8);

    const q = await report(out.snapshot_id!, mdb);
    const f = q.facts as QualityReport['facts'] & { temas_sem_imovel: Record<string, unknown> };
    expect(f.temas_sem_imovel).toEqual({
      APPS: { layers: ['APP_5208707', 'APP_5218805'], vinculados: linked.length, sem_imovel: 1, ambiguos: 1, regra: expect.stringContaining('point-on-surface') },
    });
    expect(f.dropped).toMatchObject({ 'apps:not_linked_no_property': 1, 'apps:not_linked_ambiguous': 1 });
    expect(f.fields.unknown).toContain('idf');
    expect(f.notes.join('\n')).toMatch(/APPS: 2 layer\(s\) without cod_imovel .* 6 polygon\(s\) linked to a property, 1 inside none, 1 inside several/);
    expect(q.gate.passed).toBe(true);
  });

  test('the counts add up over the properties: theme polygons not linked are listed by reason, not counted as dropped properties', async () => {
    const fresh = await testDatabase();
    try {
      const out = await runPipeline({ cfg: fresh.cfg, pool: fresh.pool, log: fresh.log }, sicar, { uf: 'GO', source: DIR });
      expect([out.status, out.error]).toEqual(['published', undefined]);
      // GO's 10 AREA_IMOVEL rows: 8 loaded, the neighbour state's and the older copy dropped.
      expect([out.rows_read, out.rows_loaded, out.rows_rejected, out.rows_dropped]).toEqual([10, 8, 0, 2]);
      const q = await report(out.snapshot_id!, fresh);
      expect(q.counts).toEqual({ read: 10, loaded: 8, rejected: 0, dropped: 2 });
      expect(q.counts.read).toBe(q.counts.loaded + q.counts.rejected + q.counts.dropped);
      // The two APPS polygons that no single property holds are still in the report, under their theme.
      expect(q.facts.dropped).toEqual({ other_state: 1, duplicate_car: 1, 'apps:not_linked_no_property': 1, 'apps:not_linked_ambiguous': 1 });
    } finally {
      await fresh.drop();
    }
  });

  test('a theme none of whose polygons can be linked is skipped with a note; its areas are NULL', async () => {
    const dir = path.join(work, 'municipal-unlinkable');
    await buildSicarMunicipalGo(dir, municipalAppsRows().filter((r) => !('car' in r.expect)));
    const out = await runM(dir);
    expect([out.status, out.error]).toEqual(['published', undefined]);
    const r = await mdb.pool.query(`SELECT count(*) FILTER (WHERE app_ha IS NULL)::int AS app_null, count(*) FILTER (WHERE reserva_legal_ha IS NULL)::int AS rl_null, count(*)::int AS n FROM serving.car_imovel`);
    expect(r.rows[0]).toEqual({ app_null: 8, rl_null: 0, n: 8 });
    const q = await report(out.snapshot_id!, mdb);
    expect(q.facts.notes.join('\n')).toContain('APPS: no polygon of its layers without cod_imovel could be linked to a property; the theme is skipped and apps areas are NULL');
  });

  test('a theme whose older-layout layers are present but hold no polygon is loaded: its areas are 0 for every property, not NULL', async () => {
    const dir = path.join(work, 'municipal-empty');
    await buildSicarMunicipalGo(dir, [], ['5208707', '5218805']);
    const out = await runM(dir);
    expect([out.status, out.error]).toEqual(['published', undefined]);
    const r = await mdb.pool.query(`SELECT count(*) FILTER (WHERE app_ha = 0)::int AS app_zero, count(*) FILTER (WHERE reserva_legal_ha IS NULL)::int AS rl_null, count(*)::int AS n FROM serving.car_imovel`);
    expect(r.rows[0]).toEqual({ app_zero: 8, rl_null: 0, n: 8 });
    const q = await report(out.snapshot_id!, mdb);
    expect(q.facts.notes.join('\n')).not.toContain('APPS: no polygon of its layers without cod_imovel could be linked');
    // As an empty layer of the current layout (cod_imovel, cod_tema) reads.
    fs.rmSync(path.join(dir, 'GO_APPS.zip'));
    const fx = SICAR_FIXTURES.GO;
    await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', THEME_FIELDS, [], { encoding: fx.encoding, cpg: fx.cpg, prj: fx.prj });
    const current = await runM(dir);
    expect([current.status, current.error]).toEqual(['published', undefined]);
    const c = await mdb.pool.query(`SELECT count(*) FILTER (WHERE app_ha = 0)::int AS app_zero, count(*)::int AS n FROM serving.car_imovel`);
    expect(c.rows[0]).toEqual({ app_zero: 8, n: 8 });
    // The theme absent (no GO_APPS.zip): not loaded, its areas NULL.
    fs.rmSync(path.join(dir, 'GO_APPS.zip'));
    const absent = await runM(dir);
    expect([absent.status, absent.error]).toEqual(['published', undefined]);
    const a = await mdb.pool.query(`SELECT count(*) FILTER (WHERE app_ha IS NULL)::int AS app_null, count(*)::int AS n FROM serving.car_imovel`);
    expect(a.rows[0]).toEqual({ app_null: 8, n: 8 });
  });

  test('contract §3: a date after the release date is NULL, its text kept in extra and counted', async () => {
    const dir = path.join(work, 'future-date');
    const go10 = {
      ...GO9, id: 'GO10',
      geometry: { type: 'Polygon' as const, coordinates: [[[-50.9, -17.9], [-50.89, -17.9], [-50.89, -17.89], [-50.9, -17.89], [-50.9, -17.9]]] },
      attributes: { ...GO9.attributes, cod_imovel: carNumber('GO', '5218805', 'GO10'), dat_criaca: '02/09/2019', dat_atuali: '15/03/2071' },
    };
    await buildSicarState('GO', dir, { themes: [], extraAreaImovel: [go10] });
    const out = await runM(dir);
    expect([out.status, out.error]).toEqual(['published', undefined]);
    const r = (await mdb.pool.query(`SELECT data_inscricao::text, data_atualizacao, extra FROM serving.car_imovel WHERE car = $1`, [go10.attributes.cod_imovel])).rows[0];
    expect(r).toEqual({ data_inscricao: '2019-09-02', data_atualizacao: null, extra: { data_atualizacao: '15/03/2071' } });
    const q = await report(out.snapshot_id!, mdb);
    expect(q.facts.dates.implausible).toEqual({ dat_atuali: 1 });
    expect(q.facts.dates.unparseable).toEqual({});
  });

  test('a current-layout theme layer with cod_imovel but no cod_tema still blocks the run (schema drift)', async () => {
    const dir = path.join(work, 'municipal-drift');
    await buildSicarState('GO', dir, { dropFields: ['cod_tema'], themes: ['APPS'] });
    const out = await runM(dir);
    expect(out.status).toBe('blocked');
    expect(out.error).toMatchObject({ code: 'required_field_missing' });
    expect(out.error?.message).toMatch(/GO_APPS \(APPS\) has cod_imovel but no cod_tema/);
    expect(out.gate?.failures).toMatchObject([{ rule: 'required_field_missing', fields: ['cod_tema'], layer: 'GO_APPS' }]);
  });
});
