// Precomputed overlaps agree with a direct PostGIS computation on the unsubdivided
// layers, follow whichever side publishes, and stay consistent through rollback.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CNUC_FIXTURE, buildCnucZip } from '../fixtures/cnuc-ucs.ts';
import { buildSicarState } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { missingPairs } from '../src/etl/overlaps.ts';
import { rollback } from '../src/etl/publish.ts';
import { runPipeline, type RunOutcome } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const FIXTURES = path.resolve(__dirname, '../fixtures');
let db: TestDb;
let work: string;

async function run(name: string, source: string, extra: Record<string, unknown> = {}): Promise<RunOutcome> {
  const p = findPipeline(name);
  if (!p) throw new Error(`pipeline ${name} is not registered`);
  const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, p, { source, ...extra });
  if (o.status !== 'published') throw new Error(`${name}: ${o.status} ${JSON.stringify(o.error ?? o.gate)}`);
  return o;
}

/** Direct overlap of the current properties with a current layer: one ST_Intersection per pair, no subdivision. */
async function direct(relation: string, id: string, where = 'true') {
  const r = await db.pool.query(
    `SELECT c.car, l.${id}::text AS fid, ST_Area(ST_Transform(ST_Intersection(c.geom, l.geom), 10857)) / 10000 AS ha, c.area_calculada_ha AS car_ha
       FROM "current".car_imovel c JOIN "current".${relation} l ON ST_Intersects(c.geom, l.geom) WHERE ${where}`,
  );
  return new Map(r.rows.filter((x) => x.ha >= 0.0001).map((x) => [`${x.car}|${x.fid}`, { ha: x.ha as number, share: Math.min(1, x.ha / x.car_ha) }]));
}

async function served(camada: string) {
  const r = await db.pool.query(`SELECT car, feicao_id, area_sobreposta_ha, percentual FROM derived.current_overlaps WHERE camada = $1`, [camada]);
  return new Map(r.rows.map((x) => [`${x.car}|${x.feicao_id}`, { ha: x.area_sobreposta_ha as number, share: x.percentual as number }]));
}

async function expectAgreement(camada: string, relation: string, id: string, where?: string) {
  const want = await direct(relation, id, where);
  const got = await served(camada);
  expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
  for (const [k, w] of want) {
    const g = got.get(k)!;
    expect(Math.abs(g.ha - w.ha) / w.ha).toBeLessThan(1e-4); // 0.01 %
    expect(g.share).toBeCloseTo(w.share, 6);
  }
  return want.size;
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'overlaps-'));
  await run('ibge-municipios', path.join(FIXTURES, 'ibge-municipios'));
  await run('dnit-snv', path.join(FIXTURES, 'dnit-snv'));
  await run('funai-tis', path.join(FIXTURES, 'funai-tis'));
  await run('cnuc-ucs', path.join(FIXTURES, 'cnuc-ucs'));
  await run('incra-quilombos', path.join(FIXTURES, 'incra-quilombos'));
  for (const uf of ['GO', 'MT', 'DF'] as const) {
    const dir = path.join(work, uf);
    await buildSicarState(uf, dir);
    await run('sicar', dir, { uf });
  }
}, 300_000);
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('overlaps of the fixture states with every layer', () => {
  test('conservation units, indigenous lands and quilombola areas agree with a direct computation', async () => {
    expect(await expectAgreement('uc', 'cnuc_ucs', 'codigo')).toBeGreaterThan(0);
    expect(await expectAgreement('ti', 'funai_tis', 'codigo')).toBeGreaterThan(0);
    expect(await expectAgreement('quilombo', 'incra_quilombos', 'codigo')).toBeGreaterThan(0);
  });

  test('municipality shares: each property lies in the municipality of its CAR number', async () => {
    await expectAgreement('municipio', 'ibge_municipios', 'geocodigo', 'l.is_municipio');
    const r = await db.pool.query(
      `SELECT c.car, c.cod_municipio_ibge, m.geocodigo, m.percentual FROM serving.car_imovel c
         JOIN serving.car_municipios m ON m.car = c.car ORDER BY m.percentual DESC`,
    );
    const top = new Map<string, { cod: string; geo: string; share: number }>();
    for (const x of r.rows) if (!top.has(x.car)) top.set(x.car, { cod: x.cod_municipio_ibge, geo: x.geocodigo, share: x.percentual });
    expect(top.size).toBe(Number((await db.pool.query('SELECT count(*) AS n FROM serving.car_imovel')).rows[0].n));
    for (const t of top.values()) expect(t.geo).toBe(t.cod);
  });

  test('road distance is the geodesic distance to the nearest segment', async () => {
    const r = await db.pool.query(
      `SELECT r.car, r.distancia_km, (SELECT min(ST_Distance(c.geom::geography, s.geom::geography)) / 1000 FROM "current".dnit_snv s) AS expected
         FROM serving.car_rodovias r JOIN "current".car_imovel c ON c.car = r.car`,
    );
    expect(r.rowCount).toBe(Number((await db.pool.query('SELECT count(*) AS n FROM serving.car_imovel')).rows[0].n));
    for (const x of r.rows) expect(x.distancia_km).toBeCloseTo(x.expected, 6);
  });

  test('serving.car_imovel.sobreposicao_ucs carries the contract fields', async () => {
    const r = await db.pool.query(`SELECT car, sobreposicao_ucs FROM serving.car_imovel WHERE jsonb_array_length(sobreposicao_ucs) > 0`);
    expect(r.rowCount).toBeGreaterThan(0);
    for (const row of r.rows) {
      for (const u of row.sobreposicao_ucs) {
        expect(Object.keys(u).sort()).toEqual(['area_sobreposta_ha', 'categoria', 'cnuc', 'esfera', 'grupo', 'nome', 'percentual']);
        expect(u.percentual).toBeGreaterThan(0);
        expect(u.percentual).toBeLessThanOrEqual(1);
      }
    }
    // embargo_ibama stays NULL while no IBAMA snapshot is published
    const e = await db.pool.query(`SELECT count(*) FILTER (WHERE embargo_ibama IS NOT NULL) AS n FROM serving.car_imovel`);
    expect(e.rows[0].n).toBe(0);
  });
});

describe('recomputed when either side publishes', () => {
  test('a new layer snapshot computes its pairs; rollback brings back the old figures', async () => {
    const before = await served('uc');
    const pairsBefore = (await db.pool.query(`SELECT count(*) AS n FROM derived.overlap_pairs`)).rows[0].n;
    // The same units but the one with the most overlap rows: a different snapshot.
    const counts = new Map<string, number>();
    for (const k of before.keys()) counts.set(k.split('|')[1], (counts.get(k.split('|')[1]) ?? 0) + 1);
    const busiest = [...counts].sort((a, b) => b[1] - a[1])[0][0];
    const dir = path.join(work, 'cnuc-v2');
    await buildCnucZip(dir, { rows: CNUC_FIXTURE.filter((r) => r.attributes.cd_cnuc !== busiest) });
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('cnuc-ucs')!, { source: dir, force: true, asOf: '2030-01-01' });
    expect(o.status).toBe('published');
    expect([...(await served('uc')).keys()].some((k) => k.endsWith(`|${busiest}`))).toBe(false);
    const states = Number((await db.pool.query(`SELECT count(*) AS n FROM etl.current WHERE dataset = 'sicar'`)).rows[0].n);
    const pairsAfter = (await db.pool.query(`SELECT count(*) AS n FROM derived.overlap_pairs`)).rows[0].n;
    expect(pairsAfter - pairsBefore).toBe(states);
    await expectAgreement('uc', 'cnuc_ucs', 'codigo');
    await rollback(db.pool, findPipeline('cnuc-ucs')!, '');
    expect(await served('uc')).toEqual(before);
    expect(await missingPairs(db.pool)).toEqual([]);
  });

  test('a new CAR state snapshot computes only its own pairs', async () => {
    const pairsBefore = Number((await db.pool.query(`SELECT count(*) AS n FROM derived.overlap_pairs`)).rows[0].n);
    const layers = Number((await db.pool.query(`SELECT count(*) AS n FROM etl.current WHERE dataset <> 'sicar'`)).rows[0].n);
    const dir = path.join(work, 'GO-v2');
    await buildSicarState('GO', dir, { filter: (r) => r.role !== 'plain' });
    await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('sicar')!, { uf: 'GO', source: dir, force: true });
    const pairsAfter = Number((await db.pool.query(`SELECT count(*) AS n FROM derived.overlap_pairs`)).rows[0].n);
    expect(pairsAfter - pairsBefore).toBe(layers);
    await expectAgreement('uc', 'cnuc_ucs', 'codigo');
    await expectAgreement('quilombo', 'incra_quilombos', 'codigo');
  });
});
