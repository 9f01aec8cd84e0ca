// Precomputed overlaps agree with a direct PostGIS computation on the unsubdivided
// layers, follow whichever side publishes, and stay consistent through rollback.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { CNUC_FIXTURE, buildCnucZip } from '../fixtures/cnuc-ucs.ts';
import { buildSicarState } from '../fixtures/sicar.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { computePair, ensureOverlaps, forgetOverlaps, missingPairs, type Overlay } from '../src/etl/overlaps.ts';
import { withTransaction } from '../src/db/pool.ts';
import { publishSnapshot, rollback } from '../src/etl/publish.ts';
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

  test('road distance is the geodesic distance to the nearest main-alignment segment (SOURCES §8.7)', async () => {
    const r = await db.pool.query(
      `SELECT r.car, r.distancia_km, (SELECT min(ST_Distance(c.geom::geography, s.geom::geography)) / 1000 FROM "current".dnit_snv s
                                       WHERE s.tipo_trecho = 'B' AND NOT etl.snv_planejada(s.superficie, s.legenda)) AS expected
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
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('cnuc-ucs')!, { source: dir, force: true, asOf: '2025-01-01' });
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

describe('two derives of the same pairs at once', () => {
  // A manual `agro publish` or `agro rollback` computes its pairs before its transaction, outside
  // any lock, as a run's derive does: two of them at once (or one beside a run) compute the same
  // pairs. Their part tables must not be each other's.
  test('both finish, and each pair is recorded once with its rows', async () => {
    const go = Number((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`)).rows[0].snapshot_id);
    const before = (await db.pool.query('SELECT layer_snapshot_id, rows FROM derived.overlap_pairs WHERE car_snapshot_id = $1 ORDER BY 1', [go])).rows;
    const overlaps = async () => Number((await db.pool.query('SELECT count(*) AS n FROM derived.car_overlaps WHERE car_snapshot_id = $1', [go])).rows[0].n);
    const rowsBefore = await overlaps();
    await forgetOverlaps(db.pool, go);
    const prospective = { dataset: 'sicar', scope: 'GO', snapshotId: go };
    const done = await Promise.allSettled([ensureOverlaps(db.pool, db.log, prospective), ensureOverlaps(db.pool, db.log, prospective)]);
    expect(done.map((d) => (d.status === 'rejected' ? String(d.reason) : 'ok'))).toEqual(['ok', 'ok']);
    expect((await db.pool.query('SELECT layer_snapshot_id, rows FROM derived.overlap_pairs WHERE car_snapshot_id = $1 ORDER BY 1', [go])).rows).toEqual(before);
    expect(await overlaps()).toBe(rowsBefore);
    const parts = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE 'ov\\_%'`);
    expect(parts.rows[0].n).toBe(0);
  }, 120_000);
});

describe('a derive that fails', () => {
  test('records no pair and leaves no part table behind', async () => {
    // a prospective indigenous-land snapshot whose table does not exist: every part fails
    const missing = 990021;
    await expect(ensureOverlaps(db.pool, db.log, { dataset: 'funai-tis', scope: '', snapshotId: missing })).rejects.toThrow(/does not exist/);
    const pairs = await db.pool.query('SELECT count(*)::int AS n FROM derived.overlap_pairs WHERE layer_snapshot_id = $1', [missing]);
    expect(pairs.rows[0].n).toBe(0);
    const parts = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE 'ov\\_%'`);
    expect(parts.rows[0].n).toBe(0);
  });
});

describe('the 1 m² rule and large features, against a direct PostGIS computation', () => {
  // A hand-made layer snapshot around one GO property P: features sharing only P's border or
  // less than 1 m² with it (no overlap), large features (> 256 vertices, cut into pieces)
  // covering P or crossing its border, a small feature crossing it and a point inside it.
  const LAYER_SNAPSHOT = 990001;
  const overlay: Overlay = { camada: 'teste', dataset: 'teste', relation: 'test_layer', idColumn: 'codigo', kind: 'area', active: 'ativo' };
  const table = `snap.test_layer__s${LAYER_SNAPSHOT}`;

  beforeAll(async () => {
    await db.pool.query(`CREATE TABLE ${table} (codigo text NOT NULL, ativo boolean NOT NULL, geom geometry(Geometry, 4326))`);
    await db.pool.query(
      `WITH p AS (SELECT geom, ST_PointOnSurface(geom) AS s, ST_StartPoint(ST_ExteriorRing(ST_GeometryN(geom, 1))) AS v
                  FROM "current".car_imovel WHERE uf = 'GO' ORDER BY etl.area_ha(geom) DESC LIMIT 1)
       INSERT INTO ${table} (codigo, ativo, geom)
       SELECT 'borda', true, ST_Difference(ST_Expand(ST_Envelope(p.geom), 0.01), p.geom) FROM p         -- shares P's whole border, no area
       UNION ALL SELECT 'lasca', true, ST_Expand(p.s, 0.000004) FROM p                                    -- inside P, ~0.8 m²
       UNION ALL SELECT 'dentro-grande', false, ST_Buffer(p.s, 1, 200) FROM p                            -- 801 vertices, covers P
       UNION ALL SELECT 'borda-grande', true, ST_Buffer(p.v, ST_Distance(p.v, p.s), 300) FROM p          -- 1,201 vertices, crosses P
       UNION ALL SELECT 'pequena', false, ST_Buffer(p.v, ST_Distance(p.v, p.s) / 2, 8) FROM p            -- 33 vertices, crosses P
       UNION ALL SELECT 'ponto', true, p.s FROM p`,
    );
    await db.pool.query(`CREATE INDEX ON ${table} USING gist (geom)`);
  });
  afterAll(async () => {
    await forgetOverlaps(db.pool, LAYER_SNAPSHOT);
    await db.pool.query(`DROP TABLE IF EXISTS ${table}`);
  });

  test('every CAR state: the pair rows are the direct ST_Intersection rows of at least 1 m²', async () => {
    const states = (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar'`)).rows.map((r) => Number(r.snapshot_id));
    for (const car of states) await withTransaction(db.pool, (c) => computePair(c, { carSnapshotId: car, layerSnapshotId: LAYER_SNAPSHOT, overlay }));
    const got = new Map(
      (await db.pool.query(`SELECT car, feicao_id, area_sobreposta_ha AS ha, percentual, ativo FROM derived.car_overlaps WHERE layer_snapshot_id = $1`, [LAYER_SNAPSHOT])).rows.map(
        (x) => [`${x.car}|${x.feicao_id}`, x],
      ),
    );
    const all = (await db.pool.query(
      `SELECT c.car, l.codigo, l.ativo, GeometryType(l.geom) = 'POINT' AS is_point, c.area_calculada_ha AS car_ha,
              ST_Area(ST_Transform(ST_Intersection(c.geom, l.geom), 10857)) / 10000 AS ha
         FROM "current".car_imovel c JOIN ${table} l ON ST_Intersects(c.geom, l.geom)`,
    )).rows;
    const want = all.filter((x) => x.is_point || x.ha >= 0.0001);
    // the border-only and sub-m² features do intersect P, and are rightly left out
    const left = all.filter((x) => !want.includes(x)).map((x) => x.codigo);
    expect(left).toContain('borda');
    expect(left).toContain('lasca');
    expect([...got.keys()].sort()).toEqual(want.map((x) => `${x.car}|${x.codigo}`).sort());
    for (const w of want) {
      const g = got.get(`${w.car}|${w.codigo}`);
      expect(g.ativo).toBe(w.ativo);
      if (w.is_point) {
        expect(g.ha).toBeNull();
        continue;
      }
      expect(Math.abs(g.ha - w.ha) / w.ha).toBeLessThan(1e-4); // 0.01 %
      // same tolerance on the share: cutting a large feature adds vertices on its edges,
      // which moves its area in EPSG:10857 by a few millionths
      const share = Math.min(1, w.ha / w.car_ha);
      expect(Math.abs(g.percentual - share) / share).toBeLessThan(1e-4);
    }
    // the large features were really cut (the crossing path), and both kinds of result are there
    const codes = new Set(want.map((x) => x.codigo));
    for (const c of ['dentro-grande', 'borda-grande', 'pequena', 'ponto']) expect(codes).toContain(c);
    expect((await db.pool.query(`SELECT max(ST_NPoints(geom)) AS n FROM ${table}`)).rows[0].n).toBeGreaterThan(256);
    expect(got.get(want.find((x) => x.codigo === 'borda-grande')!.car + '|borda-grande').percentual).toBeLessThan(1);
  });
});

describe('road distance where the nearest road in degrees is not the nearest on the ground', () => {
  // At 30° S a degree of longitude is 96.5 km and one of latitude 110.9 km: a road 0.095°
  // north of a property (10.5 km) is nearer in plain lon/lat than one 0.100° east (9.6 km),
  // which is the nearer on the ellipsoid. The KNN's first answer is the wrong one; the
  // bounded candidate search must still return the geodesic minimum.
  const CAR = 990011;
  const ROADS = 990012;
  const overlay: Overlay = { camada: 'rodovia-teste', dataset: 'teste', relation: 'test_roads', idColumn: 'codigo', kind: 'distance' };
  const car = `snap.car_imovel__s${CAR}`;
  const roads = `snap.test_roads__s${ROADS}`;

  beforeAll(async () => {
    await db.pool.query(`CREATE TABLE ${car} (LIKE snap.car_imovel__template)`);
    await db.pool.query(
      `INSERT INTO ${car} (car, uf, area_calculada_ha, geom, snapshot_id)
       SELECT x.car, 'RS', etl.area_ha(x.g), x.g, ${CAR}
       FROM (VALUES ('RS-0000001-A', ST_Multi(ST_MakeEnvelope(-51.005, -30.005, -50.995, -29.995, 4326))),
                    ('RS-0000001-B', ST_Multi(ST_MakeEnvelope(-50.705, -30.105, -50.695, -30.095, 4326)))) x(car, g)`,
    );
    await db.pool.query(`CREATE INDEX ON ${car} USING gist (geom)`);
    await db.pool.query(`CREATE TABLE ${roads} (codigo text NOT NULL, geom geometry(MultiLineString, 4326))`);
    await db.pool.query(
      `INSERT INTO ${roads} VALUES
         ('norte', ST_Multi(ST_Segmentize(ST_SetSRID(ST_MakeLine(ST_Point(-51.2, -29.9), ST_Point(-50.8, -29.9)), 4326), 0.01))),
         ('leste', ST_Multi(ST_Segmentize(ST_SetSRID(ST_MakeLine(ST_Point(-50.895, -30.2), ST_Point(-50.895, -29.8)), 4326), 0.01))),
         ('cruza', ST_Multi(ST_Segmentize(ST_SetSRID(ST_MakeLine(ST_Point(-50.7, -30.3), ST_Point(-50.7, -30.0)), 4326), 0.01)))`,
    );
  });
  afterAll(async () => {
    await forgetOverlaps(db.pool, ROADS);
    await db.pool.query(`DROP TABLE IF EXISTS ${car}, ${roads}, snap.test_roads_sub__s${ROADS}`);
  });

  test('the geodesic minimum over every road, exactly', async () => {
    await withTransaction(db.pool, (c) => computePair(c, { carSnapshotId: CAR, layerSnapshotId: ROADS, overlay }));
    const r = await db.pool.query(
      `SELECT o.car, o.feicao_id, o.distancia_km,
              (SELECT s.geom <-> c.geom FROM ${roads} s WHERE s.codigo = 'norte') < (SELECT s.geom <-> c.geom FROM ${roads} s WHERE s.codigo = 'leste') AS knn_says_norte,
              (SELECT min(ST_Distance(c.geom::geography, s.geom::geography)) / 1000 FROM ${roads} s) AS expected,
              (SELECT s.codigo FROM ${roads} s ORDER BY ST_Distance(c.geom::geography, s.geom::geography), s.codigo LIMIT 1) AS nearest
         FROM derived.car_overlaps o JOIN ${car} c ON c.car = o.car WHERE o.layer_snapshot_id = $1 ORDER BY o.car`,
      [ROADS],
    );
    expect(r.rows.map((x) => [x.car, x.feicao_id])).toEqual([['RS-0000001-A', 'leste'], ['RS-0000001-B', 'cruza']]);
    const [a, b] = r.rows;
    expect(a.knn_says_norte).toBe(true);
    expect(a.nearest).toBe('leste');
    expect(a.distancia_km).toBeCloseTo(a.expected, 6);
    expect(a.distancia_km).toBeGreaterThan(9);
    expect(b.distancia_km).toBe(0); // the road crosses the property
  });
});

describe('a rollback or manual publish computes the pairs it needs before its transaction', () => {
  // A rollback to a CAR state or layer snapshot that was never current beside today's other
  // snapshots (or a pair forgotten by a migration, as 0108 does) needs pairs computed. Inside
  // the publish transaction that held the overlaps' publish lock for the whole computation
  // (every other CAR or layer publish waited, for hours at national scale) and repeated it when
  // the view rewrite timed out. They are computed first, on the derive's two connections.
  test('the missing pairs are computed while another publisher holds the overlaps lock', async () => {
    const cnuc = findPipeline('cnuc-ucs')!;
    const dir = path.join(work, 'cnuc-v3');
    await buildCnucZip(dir, { rows: CNUC_FIXTURE.slice(1) });
    const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnuc, { source: dir, force: true, asOf: '2025-02-01' });
    expect(o.status).toBe('published');
    // the road pair of one state forgotten, as migration 0108 forgot them
    const go = Number((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`)).rows[0].snapshot_id);
    const roads = Number((await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'dnit-snv'`)).rows[0].snapshot_id);
    await db.pool.query('DELETE FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [go, roads]);
    const holder = await db.pool.connect();
    let rolled: Promise<unknown> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['publish:overlaps']);
      rolled = rollback(db.pool, cnuc, '', { lockTimeoutMs: 250, maxWaitMs: 120_000 }, db.log);
      rolled.catch(() => {});
      const deadline = Date.now() + 60_000;
      let computed = false;
      while (!computed && Date.now() < deadline) {
        computed = (await db.pool.query('SELECT 1 FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [go, roads])).rowCount === 1;
        if (!computed) await new Promise((r) => setTimeout(r, 100));
      }
      expect(computed).toBe(true);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    await rolled;
    expect(await missingPairs(db.pool)).toEqual([]);
    await expectAgreement('uc', 'cnuc_ucs', 'codigo');
  }, 120_000);

  test('agro publish of an older CAR state snapshot: its pairs with today\'s layers first', async () => {
    const sicar = findPipeline('sicar')!;
    // a conservation-unit snapshot published after that state snapshot stopped being current
    const dir = path.join(work, 'cnuc-v4');
    await buildCnucZip(dir, { rows: CNUC_FIXTURE.slice(2) });
    expect((await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline('cnuc-ucs')!, { source: dir, force: true, asOf: '2025-03-01' })).status).toBe('published');
    const older = Number(
      (await db.pool.query(`SELECT snapshot_id FROM etl.snapshots WHERE dataset = 'sicar' AND scope = 'GO' AND status = 'superseded' ORDER BY snapshot_id LIMIT 1`)).rows[0].snapshot_id,
    );
    const layers = Number((await db.pool.query(`SELECT count(*) AS n FROM etl.current WHERE dataset <> 'sicar'`)).rows[0].n);
    const pairsOf = async () => Number((await db.pool.query('SELECT count(*) AS n FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id IN (SELECT snapshot_id FROM etl.current)', [older])).rows[0].n);
    expect(await pairsOf()).toBeLessThan(layers); // the layers published since it was current
    const holder = await db.pool.connect();
    let published: Promise<unknown> | undefined;
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(hashtext($1))', ['publish:overlaps']);
      published = publishSnapshot(db.pool, sicar, older, { budget: { lockTimeoutMs: 250, maxWaitMs: 120_000 }, log: db.log });
      published.catch(() => {});
      const deadline = Date.now() + 60_000;
      while ((await pairsOf()) < layers && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(await pairsOf()).toBe(layers);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await published).toMatchObject({ status: 'published' });
    expect(await missingPairs(db.pool)).toEqual([]);
    await expectAgreement('uc', 'cnuc_ucs', 'codigo');
  }, 120_000);
});
