// A zip is inflated once from download to staging: the download checks only what needs no
// inflating (signature, central directory, declared sizes), the read step inflates each
// layer member once, checking its CRC and the bound as it streams. A damaged member still
// fails the run (corrupt_archive) before anything is published, and the damaged file is
// not answered from the raw store again. The layers the engine opens from a zip are staged
// by the streaming shapefile reader, and the result says so.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import { ShapefileWriter, zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { buildReceitaMonth } from '../fixtures/receita-cnpj.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import { DEFAULT_ZIP_LIMITS } from '../src/etl/archive.ts';
import { fetchSource } from '../src/etl/download.ts';
import { emptySinkStats, readZipCsv } from '../src/etl/zip-csv-stream.ts';
import { layersFromZip } from '../src/etl/layers.ts';
import { runPipeline } from '../src/etl/run.ts';
import { stageLayers } from '../src/etl/stage-vector.ts';
import { openLayer } from '../src/etl/vector-reader.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';
import { currentSicarGo, expectDamagedAreaImovelRefused, runSicarGo } from './helpers/damaged-sicar.ts';
import { countInflations } from './helpers/inflations.ts';

let db: TestDb;
let work: string;
let goDir: string;

const run = (source: string) => runSicarGo(db, source);
const currentId = () => currentSicarGo(db);

/** Flips a byte in the middle of `member`'s stored data (local header walked, not guessed). */
function damageMember(zip: Buffer, member: string): Buffer {
  const out = Buffer.from(zip);
  for (let off = 0; out.readUInt32LE(off) === 0x04034b50; ) {
    const compressed = out.readUInt32LE(off + 18);
    const nameLen = out.readUInt16LE(off + 26);
    const extraLen = out.readUInt16LE(off + 28);
    const data = off + 30 + nameLen + extraLen;
    if (out.toString('latin1', off + 30, off + 30 + nameLen) === member) {
      out[data + Math.floor(compressed / 2)] ^= 0xff;
      return out;
    }
    off = data + compressed;
  }
  throw new Error(`${member} not found`);
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'read-once-'));
  goDir = path.join(work, 'GO');
  await buildSicarState('GO', goDir);
});

afterAll(async () => {
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('each zip inflated once', () => {
  test('a SICAR load inflates every layer member of every zip exactly once, and nothing else', async () => {
    const seen = await countInflations(async () => expect((await run(goDir)).status).toBe('published'));
    const zips = fs.readdirSync(goDir).filter((f) => f.endsWith('.zip')).sort();
    expect(zips.length).toBe(4);
    expect([...new Set([...seen.keys()].map((k) => k.split(':')[0]))].sort()).toEqual(zips);
    for (const [key, times] of seen) expect(times, key).toBe(1);
    for (const key of seen.keys()) expect(key).toMatch(/\.(shp|shx|dbf|prj|cpg|cst)$/i);
    expect([...seen.keys()].filter((k) => k.startsWith('GO_AREA_IMOVEL.zip:') && /\.(shp|dbf)$/.test(k)).length).toBeGreaterThanOrEqual(4);
  });

  test('the download step inflates nothing: a damaged member passes it and the read step fails the run with corrupt_archive, publishing nothing', async () => {
    const before = await currentId();
    expect(before).not.toBeNull();
    const bad = path.join(work, 'bad');
    fs.mkdirSync(bad, { recursive: true });
    for (const f of fs.readdirSync(goDir)) fs.copyFileSync(path.join(goDir, f), path.join(bad, f));
    const zip = fs.readFileSync(path.join(goDir, 'GO_AREA_IMOVEL.zip'));
    fs.writeFileSync(path.join(bad, 'GO_AREA_IMOVEL.zip'), damageMember(zip, 'GO_AREA_IMOVEL_1.shp'));

    const raw = path.join(work, 'raw');
    const fetched = await countInflations(async () => {
      const f = await fetchSource(path.join(bad, 'GO_AREA_IMOVEL.zip'), { destDir: raw, userAgent: 'test', expect: 'zip' });
      expect(f?.size).toBe(zip.length);
    });
    expect([...fetched.keys()]).toEqual([]);

    // The damaged file is distrusted; the next run with good bytes recovers (the same source as the snapshot still serving).
    await expectDamagedAreaImovelRefused(db, { bad, good: goDir, before, message: /GO_AREA_IMOVEL(_1\.shp|\.zip)/ });
  });
});

describe('a damaged member of a streamed zip (Receita: the CSV members are read straight from the zip)', () => {
  test('fails the run with corrupt_archive, the month before stays served, and the stored zip is distrusted', async () => {
    const root = path.join(work, 'cnpj');
    await buildReceitaMonth(root, '2026-10', 'base');
    const runCnpj = () => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: root });
    const first = await runCnpj();
    expect(first.status).toBe('published');

    await buildReceitaMonth(root, '2026-11', 'next');
    const socios = path.join(root, '2026-11', 'Socios3.zip');
    const zip = fs.readFileSync(socios);
    const member = zip.toString('latin1', 30, 30 + zip.readUInt16LE(26));
    fs.writeFileSync(socios, damageMember(zip, member));
    const out = await runCnpj();
    expect(out.status).toBe('failed');
    expect(out.error?.code).toBe('corrupt_archive');
    expect((await db.pool.query(`SELECT snapshot_id::int AS id FROM etl.current WHERE dataset = 'receita-cnpj'`)).rows[0].id).toBe(first.snapshot_id);
    // Its meta is gone (the next fetch brings the whole file again); the good zips keep theirs.
    const stored = fs.readdirSync(path.join(db.dataDir, 'raw'), { recursive: true }).map(String).filter((n) => n.includes('2026-11'));
    expect(stored.filter((n) => n.endsWith('Socios3.zip.meta.json'))).toEqual([]);
    // Every other zip keeps its trust, also those whose COPY the failure stopped mid-stream.
    const zips = fs.readdirSync(path.join(root, '2026-11')).filter((n) => n.endsWith('.zip'));
    expect(zips.length).toBe(37);
    expect(stored.filter((n) => n.endsWith('.zip.meta.json')).length).toBe(36);
  }, 120_000);

  test('a COPY that fails while a zip streams into it leaves the zip trusted, and its own error comes back', async () => {
    const root = path.join(work, 'cnpj-copy');
    await buildReceitaMonth(root, '2026-10', 'base');
    const raw = path.join(work, 'raw-copy');
    const f = await fetchSource(path.join(root, '2026-10', 'Socios0.zip'), { destDir: raw, userAgent: 'test', expect: 'zip' });
    const meta = () => fs.readdirSync(raw, { recursive: true }).map(String).filter((n) => n.endsWith('Socios0.zip.meta.json'));
    expect(meta().length).toBe(1);
    const out = new Writable({ highWaterMark: 16, write: (_c, _e, cb) => cb(new Error('COPY failed: duplicate key')) });
    const read = readZipCsv(f!.path, { pick: () => true, fieldCount: 11, onRecord: (x) => `${x.join('\t')}\n`, out, stats: emptySinkStats() });
    await expect(read).rejects.toThrow(/duplicate key/);
    expect(meta().length).toBe(1);
  });
});

describe('the read path behind stageLayers', () => {
  test('layers from a zip go through the streaming reader, which counts overflowed cells and deleted records as it reads; a layer opened with GDAL alone stays on GDAL', async () => {
    const base = path.join(work, 'ovf', 'camada');
    fs.mkdirSync(path.dirname(base), { recursive: true });
    const w = await ShapefileWriter.open({ basePath: base, shapeType: 'point', encoding: 'latin1', cpg: 'ISO-8859-1', fields: [{ name: 'nome', type: 'C', length: 20 }, { name: 'area', type: 'N', length: 6, decimals: 1 }] });
    for (let k = 0; k < 4; k++) await w.write({ type: 'Point', coordinates: [-50 - k, -10] }, { nome: `Fazenda São ${k}`, area: k + 0.5 });
    const { files } = await w.close();
    const dbf = fs.readFileSync(`${base}.dbf`);
    const header = dbf.readUInt16LE(8), rec = dbf.readUInt16LE(10);
    dbf.write('******', header + 21, 'latin1'); // record 1: area overflowed
    dbf.write('******', header + rec + 21, 'latin1'); // record 2 too
    dbf[header + 3 * rec] = 0x2a; // record 4 deleted
    fs.writeFileSync(`${base}.dbf`, dbf);
    const zip = path.join(work, 'ovf', 'camada.zip');
    await zipFiles(zip, files.map((f) => ({ path: f, name: path.basename(f) })));
    const specs = [{ name: 'nome', aliases: ['nome'] }, { name: 'area', aliases: ['area'] }];

    const layers = await layersFromZip(zip, path.join(work, 'ovf-work'), { srid: 4674, limits: DEFAULT_ZIP_LIMITS });
    expect(layers.map((l) => l.reader)).toEqual(['shp-stream']);
    const client = await db.pool.connect();
    try {
      const r = await stageLayers(client, 'ovf_stream', layers, specs);
      expect(r).toMatchObject({ reader: 'shp-stream', rows: 3, deleted: 1, unparsed: 0, overflowed: { camada: { area: 2 } } });
      const rows = (await client.query(`SELECT nome, area FROM ovf_stream ORDER BY src_seq`)).rows;
      expect(rows).toEqual([{ nome: 'Fazenda São 0', area: null }, { nome: 'Fazenda São 1', area: null }, { nome: 'Fazenda São 2', area: '2.5' }]);

      const g = await stageLayers(client, 'ovf_gdal', [openLayer(`${base}.shp`, { srid: 4674 })], specs);
      expect(g).toMatchObject({ reader: 'gdal', rows: 3, overflowed: null });
      expect((await client.query(`SELECT nome, area FROM ovf_gdal ORDER BY src_seq`)).rows).toEqual(rows);
    } finally {
      client.release();
    }
  });
});
