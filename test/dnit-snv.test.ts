// dnit-snv end to end on the real embedded PostGIS: the committed version 202507A, then
// variants (no .prj, version picking, broken segments, the WebDAV listing).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Geometry } from 'geojson';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-ignore -- the shapefile package ships no type declarations
import * as shapefileUntyped from 'shapefile';
import { extractZip } from '../src/etl/archive.ts';
import { runPipeline } from '../src/etl/run.ts';
import { buildDnitSnv, SNV_FIXTURE, SNV_FIXTURE_DIR, type SnvSegment } from '../fixtures/dnit-snv.ts';
import { dnitSnv, newestVersion, snvVersion, versionDate } from '../pipelines/dnit-snv/index.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

interface ShpSource {
  read(): Promise<{ done: boolean; value: { properties: Record<string, unknown>; geometry: Geometry | null } }>;
}
const shapefile = shapefileUntyped as unknown as { open(shp: string, dbf: string, o: { encoding: string }): Promise<ShpSource> };

let db: TestDb;
let work: string;
const FIXTURE_ZIP = path.join(SNV_FIXTURE_DIR, '202507A.zip');

beforeAll(async () => {
  db = await testDatabase();
  work = await mkdtemp(path.join(tmpdir(), 'snv-test-'));
});
afterAll(async () => {
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

const run = (source: string, extra: { asOf?: string; force?: boolean } = {}) =>
  runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, dnitSnv, { source, ...extra });

async function quality(snapshotId: number) {
  return (await db.pool.query(`SELECT quality FROM etl.snapshots WHERE snapshot_id = $1`, [snapshotId])).rows[0].quality;
}

async function current() {
  return (await db.pool.query(`SELECT snapshot_id, versao, count(*)::int AS n FROM serving.dnit_snv GROUP BY 1, 2`)).rows;
}

/** Geodesic km of every segment of a version zip, read with the `shapefile` package (not GDAL) and measured by PostGIS. */
async function independentLengths(zip: string): Promise<Map<string, number>> {
  const files = await extractZip(zip, path.join(work, `independent-${path.basename(zip)}`));
  const shp = files.find((f) => f.endsWith('.shp'))!;
  const src = await shapefile.open(shp, shp.replace(/\.shp$/, '.dbf'), { encoding: 'utf-8' });
  const rows: { codigo: string; geojson: string }[] = [];
  for (let r = await src.read(); !r.done; r = await src.read()) rows.push({ codigo: String(r.value.properties.vl_codigo), geojson: JSON.stringify(r.value.geometry) });
  const q = await db.pool.query(
    `SELECT f.codigo, ST_Length(ST_Transform(ST_SetSRID(ST_GeomFromGeoJSON(f.geojson), 4674), 4326)::geography) / 1000 AS km
       FROM jsonb_to_recordset($1::jsonb) AS f(codigo text, geojson text)`,
    [JSON.stringify(rows)],
  );
  return new Map(q.rows.map((r) => [r.codigo, r.km]));
}

describe('version names', () => {
  it('parses versions and release dates, and picks the lexicographic maximum', () => {
    expect(snvVersion('202507a.zip')).toBe('202507A');
    expect(snvVersion('SNV_202507A.zip')).toBeNull();
    expect(versionDate('202507A')).toBe('2025-07-01');
    expect(versionDate('202513A')).toBeNull();
    expect(newestVersion(['201912A.zip', '202507B.zip', 'notas.txt', '202507A.zip', '202501C.zip', 'SNV_2026.zip'])).toBe('202507B.zip');
    expect(newestVersion(['x.zip'])).toBeNull();
  });
});

describe('the committed version 202507A', () => {
  let snapshotId: number;

  it('loads every segment and publishes with the version month as release date', async () => {
    const out = await run(SNV_FIXTURE_DIR);
    expect(out.error).toBeUndefined();
    expect(out).toMatchObject({ status: 'published', as_of: '2025-07-01', rows_read: 11, rows_loaded: 11, rows_rejected: 0 });
    snapshotId = out.snapshot_id!;
  });

  it('serves the segments with canonical names, padded BR numbers and the version', async () => {
    const r = await db.pool.query(
      `SELECT codigo, br, uf, km_inicial, km_final, extensao_km, tipo_trecho, nome_tipo_trecho, superficie, legenda,
              jurisdicao, unidade_local, versao, extra, snapshot_id, GeometryType(geom) AS type, ST_SRID(geom) AS srid
         FROM serving.dnit_snv ORDER BY codigo`,
    );
    expect(r.rows.map((x) => x.codigo)).toEqual([
      '040BDF0010', '060BGO0130', '060BGO0150', '060BGO0250', '153BGO0530', '153BGO0550', '153CGO0540',
      '163AMT0635', '163BMT0630', '364BMT0310', '364VMT0315',
    ]);
    expect(r.rows.find((x) => x.codigo === '040BDF0010')).toMatchObject({
      br: '040', uf: 'DF', km_inicial: 0, tipo_trecho: 'B', nome_tipo_trecho: 'Trecho principal', superficie: 'DUP',
      legenda: 'Rodovia duplicada', jurisdicao: 'Federal', unidade_local: 'Brasília', versao: '202507A', extra: null,
      snapshot_id: snapshotId, type: 'MULTILINESTRING', srid: 4326,
    });
    expect(r.rows.find((x) => x.codigo === '153BGO0530').extra).toEqual({ ds_coinc: '060BGO0140' });
    // Every row against the fixture's description.
    for (const s of SNV_FIXTURE) {
      const a = s.attributes;
      expect(r.rows.find((x) => x.codigo === a.vl_codigo)).toMatchObject({
        br: String(a.vl_br).padStart(3, '0'), uf: a.sg_uf, km_inicial: a.vl_km_inic, km_final: a.vl_km_fina, extensao_km: a.vl_extensa,
        tipo_trecho: a.sg_tipo_tr, superficie: a.ds_superfi, unidade_local: a.ul, versao: '202507A',
      });
    }
  });

  it('keeps only main alignments in serving.dnit_snv_principal', async () => {
    const r = await db.pool.query(`SELECT codigo FROM serving.dnit_snv_principal ORDER BY codigo`);
    expect(r.rows.map((x) => x.codigo)).toEqual(['040BDF0010', '060BGO0130', '060BGO0150', '060BGO0250', '153BGO0530', '153BGO0550', '163BMT0630', '364BMT0310']);
  });

  it('computes geodesic lengths equal to PostGIS on the file read by another reader, and close to the spherical ones', async () => {
    const expected = await independentLengths(FIXTURE_ZIP);
    const r = await db.pool.query(`SELECT codigo, extensao_calculada_km FROM serving.dnit_snv`);
    expect(r.rows.length).toBe(expected.size);
    for (const row of r.rows) expect(row.extensao_calculada_km).toBeCloseTo(expected.get(row.codigo)!, 9);
    // Declared lengths of the faithful segments are spherical: within 0.6 % of the ellipsoid.
    for (const s of SNV_FIXTURE.filter((x) => !x.declaredOffBy)) {
      const calc = r.rows.find((x) => x.codigo === s.attributes.vl_codigo).extensao_calculada_km;
      expect(Math.abs(calc - s.attributes.vl_extensa) / s.attributes.vl_extensa).toBeLessThan(0.006);
    }
    // By hand: BR-163 in Sorriso runs 0.3° of latitude (~33.2 km) with 0.02° of longitude drift.
    const br163 = r.rows.find((x) => x.codigo === '163BMT0630').extensao_calculada_km;
    expect(br163).toBeGreaterThan(33.1);
    expect(br163).toBeLessThan(33.4);
  });

  it('reports the observed surfaces and the segments whose length differs by more than 10 %', async () => {
    const q = await quality(snapshotId);
    const lengths = await independentLengths(FIXTURE_ZIP);
    const gap = (codigo: string) => {
      const declared = SNV_FIXTURE.find((s) => s.attributes.vl_codigo === codigo)!.attributes.vl_extensa;
      const calc = lengths.get(codigo)!;
      return { codigo, extensao_km: declared, extensao_calculada_km: Math.round(calc * 1000) / 1000, diferenca: Math.round(((calc - declared) / declared) * 1e4) / 1e4 };
    };
    expect(q.facts.snv).toEqual({
      versao: '202507A',
      superficies: [
        { superficie: 'DUP', trechos: 6 },
        { superficie: 'EOD', trechos: 1 },
        { superficie: 'LEN', trechos: 1 },
        { superficie: 'PAV', trechos: 3 },
      ],
      extensao_divergente: { limite: 0.1, total: 2, sem_extensao_declarada: 0, trechos: [gap('060BGO0250'), gap('163AMT0635')] },
      codigos_repetidos: [],
    });
    expect(q.facts.snv.extensao_divergente.trechos.map((t: { diferenca: number }) => Math.round(t.diferenca * 100) / 100)).toEqual([-0.2, 0.43]);
    expect(q.facts.notes).toContain('superficie values in 202507A: DUP (6), EOD (1), LEN (1), PAV (3)');
    expect(q.facts.notes.some((n: string) => n.startsWith('2 segments differ from their declared vl_extensa by more than 10 % (kept as published): 060BGO0250 '))).toBe(true);
    // Reported, never overwritten.
    const kept = await db.pool.query(`SELECT extensao_km FROM serving.dnit_snv WHERE codigo = '060BGO0250'`);
    expect(kept.rows[0].extensao_km).toBe(SNV_FIXTURE.find((s) => s.attributes.vl_codigo === '060BGO0250')!.attributes.vl_extensa);
    expect(q.facts.geometry).toMatchObject({ invalid: 0, repaired: 0, rejected: 0, srid: 4674, sridAssumed: false, outsideBrazil: 0 });
    expect(q.facts.encoding).toEqual({ name: 'UTF-8', assumed: false, replacementChars: 0 });
    expect(q.facts.fields).toMatchObject({ unknown: [], missingOptional: [] });
    expect(q.facts.layers).toEqual([{ name: 'SNV_202507A', features: 11, srid: 4674, encoding: 'UTF-8', decided_by: 'cpg' }]);
  });

  it('puts roads near the SICAR properties they were drawn for', async () => {
    // BR-163 passes between MT1 (east edge -55.72) and MT2 (west edge -55.68): under 2 km from MT1.
    const r = await db.pool.query(
      `SELECT min(ST_Distance(geom::geography, ST_SetSRID(ST_MakePoint(-55.72, -12.54), 4326)::geography)) / 1000 AS km
         FROM serving.dnit_snv_principal WHERE br = '163'`,
    );
    expect(r.rows[0].km).toBeLessThan(2);
  });
});

describe('variants', () => {
  it('fails clearly, loading nothing, when the shapefile has no .prj', async () => {
    const before = await current();
    const dir = path.join(work, 'no-prj');
    await buildDnitSnv(dir, { versao: '202508A', prj: null });
    const out = await run(dir);
    expect(out.status).toBe('failed');
    expect(out.error).toEqual({
      code: 'missing_layer_part',
      message: 'a shapefile part is missing: SNV_202508A.shp in 202508A.zip has no .prj: the SNV coordinate system is not guessed (SOURCES §8.3)',
    });
    expect(await current()).toEqual(before);
    const snap = await db.pool.query(`SELECT status, tables FROM etl.snapshots WHERE snapshot_id = $1`, [out.snapshot_id]);
    expect(snap.rows[0].status).toBe('failed');
    const left = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'snap' AND tablename = $1`, [`dnit_snv__s${out.snapshot_id}`]);
    expect(left.rows[0].n).toBe(0);
  });

  it('rejects segments without code, with a collapsed line or outside Brazil', async () => {
    const broken: SnvSegment[] = [
      ...SNV_FIXTURE,
      { geometry: { type: 'LineString', coordinates: [[-49.3, -16.7], [-49.3, -16.7]] }, attributes: { ...SNV_FIXTURE[0].attributes, vl_codigo: '060BGO9990' } },
      { geometry: { type: 'LineString', coordinates: [[10.0, 45.0], [10.1, 45.1]] }, attributes: { ...SNV_FIXTURE[0].attributes, vl_codigo: '060BGO9991' } },
      { geometry: SNV_FIXTURE[1].geometry, attributes: { ...SNV_FIXTURE[1].attributes, vl_codigo: '' } },
    ];
    const dir = path.join(work, 'broken');
    await buildDnitSnv(dir, { versao: '202509A', segments: broken });
    const out = await run(dir, { force: true });
    expect(out).toMatchObject({ status: 'published', forced: true, rows_read: 14, rows_loaded: 11, rows_rejected: 3 });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.rejected).toEqual({ geometry_empty_after_repair: 1, outside_brazil: 1, no_codigo: 1 });
    expect(q.facts.geometry).toMatchObject({ invalid: 1, repaired: 0, rejected: 1, outsideBrazil: 1 });
    expect(q.gate.failures.map((f: { rule: string }) => f.rule)).toEqual(['rejected_share']);
  });

  it('vl_br written as text: a number or BR-NNN is padded; anything else takes the BR of the code, its text kept in extra and counted', async () => {
    const [a, b, c, d] = SNV_FIXTURE;
    const segments: SnvSegment[] = [
      { ...a, attributes: { ...a.attributes, vl_br: 'BR-060' } },
      { ...b, attributes: { ...b.attributes, vl_br: ' 60' } },
      { ...c, attributes: { ...c.attributes, vl_br: '' } },
      { ...d, attributes: { ...d.attributes, vl_br: '153/060' } },
      ...SNV_FIXTURE.slice(4).map((s) => ({ ...s, attributes: { ...s.attributes, vl_br: String(s.attributes.vl_br) } })),
    ];
    const dir = path.join(work, 'br-text');
    await buildDnitSnv(dir, { versao: '202510A', segments, fields: [{ name: 'vl_br', type: 'C', length: 7 }] });
    const out = await run(dir, { force: true });
    expect(out).toMatchObject({ status: 'published', rows_loaded: SNV_FIXTURE.length, rows_rejected: 0 });
    const r = await db.pool.query(`SELECT codigo, br, extra FROM serving.dnit_snv WHERE codigo = ANY($1)`, [[a, b, c, d].map((s) => s.attributes.vl_codigo)]);
    const got = Object.fromEntries(r.rows.map((x) => [x.codigo, [x.br, x.extra?.br ?? null]]));
    expect(got).toEqual({
      [a.attributes.vl_codigo]: ['060', null],
      [b.attributes.vl_codigo]: ['060', null],
      [c.attributes.vl_codigo]: ['060', null],
      [d.attributes.vl_codigo]: ['153', '153/060'],
    });
    const q = await quality(out.snapshot_id!);
    expect(q.facts.fields.unparsed).toEqual({ br: 1 });
  });

  it('picks the newest version of a folder, searching the zip recursively', async () => {
    const dir = path.join(work, 'versions');
    await buildDnitSnv(dir, { versao: '202501A', segments: SNV_FIXTURE.slice(0, 4) });
    await buildDnitSnv(dir, { versao: '202510B', subfolder: 'dados/SNV' });
    await buildDnitSnv(dir, { versao: '202510A', segments: SNV_FIXTURE.slice(0, 3) });
    await buildDnitSnv(dir, { versao: '202409C' });
    await writeFile(path.join(dir, 'leia-me.txt'), 'not a version');
    const out = await run(dir);
    expect(out).toMatchObject({ status: 'published', as_of: '2025-10-01', rows_loaded: 11 });
    expect(await current()).toEqual([{ snapshot_id: out.snapshot_id, versao: '202510B', n: 11 }]);
  });

  it('lists the DNIT WebDAV folder and downloads the newest version with the share token', async () => {
    const zip202511 = await readFile(await buildDnitSnv(path.join(work, 'dav'), { versao: '202511A' }));
    const seen: { method: string; url: string; auth?: string; depth?: string }[] = [];
    const server = http.createServer((req, res) => {
      seen.push({ method: req.method!, url: req.url!, auth: req.headers.authorization, depth: req.headers.depth as string | undefined });
      if (req.headers.authorization !== `Basic ${Buffer.from('tok3n:').toString('base64')}`) {
        res.writeHead(401).end();
        return;
      }
      const folder = '/dav/SNV%20Bases%20Geom%C3%A9tricas%20(2013-Atual)%20(SHP)/';
      if (req.method === 'PROPFIND' && req.url === folder) {
        const entry = (href: string) => `<d:response><d:href>${href}</d:href><d:propstat><d:prop/></d:propstat></d:response>`;
        res.writeHead(207, { 'content-type': 'application/xml; charset=utf-8' });
        res.end(`<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">${[folder, `${folder}202507A.zip`, `${folder}202511A.zip`, `${folder}201912A.zip`, `${folder}Dicion%C3%A1rio.pdf`].map(entry).join('')}</d:multistatus>`);
        return;
      }
      if (req.method === 'GET' && req.url === `${folder}202511A.zip`) {
        res.writeHead(200, { 'content-type': 'application/zip', 'content-length': zip202511.length });
        res.end(zip202511);
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const folder = `http://tok3n:@127.0.0.1:${port}/dav/SNV%20Bases%20Geom%C3%A9tricas%20(2013-Atual)%20(SHP)/`;
      const out = await run(folder);
      expect(out).toMatchObject({ status: 'published', as_of: '2025-11-01', rows_loaded: 11 });
      expect(await current()).toEqual([{ snapshot_id: out.snapshot_id, versao: '202511A', n: 11 }]);
      expect(seen.map((s) => [s.method, s.depth])).toEqual([['PROPFIND', '1'], ['GET', undefined]]);

      const moved = await run(folder.replace('tok3n', 'expiredT0ken'));
      expect(moved.status).toBe('failed');
      expect(moved.error?.code).toBe('source_not_found');
      expect(moved.error?.message).toMatch(/HTTP 401 on PROPFIND: the share token or folder has moved/);
      expect(moved.error?.message).not.toMatch(/expiredT0ken/);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
