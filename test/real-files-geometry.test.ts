// Shapefile geometry defects of real files, through a real FUNAI run against PostGIS: a
// polygon ring whose last point is not its first (PostGIS refuses it: one such record
// failed the whole load with "Polygon must have closed rings"). Both readers (the streaming
// one and GDAL's, taken for a DOS code page) close the ring, count it in the report, and the
// polygon goes through the repair like any other. And a .dbf cut short against its .shp:
// the shapes past its last record have no attributes; they were skipped without a word.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { recordInCodePage } from '../fixtures/code-pages.ts';
import { FUNAI_DBF_FIELDS, FUNAI_FIXTURE } from '../fixtures/funai-tis.ts';
import { writeLayer, type LayerFormat } from '../fixtures/readers.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'geometry-test-');

const LAYER = 'tis_poligonais';
const ROWS = FUNAI_FIXTURE.map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes } }));
/** The same rows as a DOS file writes them (CP850 bytes, for LDID 0x02): Windows text under that LDID is read by its bytes. */
const CP850_ROWS = ROWS.map((r) => ({ geometry: r.geometry, attributes: recordInCodePage(r.attributes, 'cp850') }));

/** Moves the last point of the first ring of record `n` (1-based) by `dx` degrees: the ring no longer closes. */
function openFirstRing(shp: Buffer, shx: Buffer, n: number, dx: number): void {
  const at = shx.readInt32BE(100 + 8 * (n - 1)) * 2 + 8; // record content
  const nParts = shp.readInt32LE(at + 36);
  const end = nParts > 1 ? shp.readInt32LE(at + 44 + 4) : shp.readInt32LE(at + 40);
  const last = at + 44 + 4 * nParts + 16 * (end - 1);
  shp.writeDoubleLE(shp.readDoubleLE(last) + dx, last);
}

/** Ring `ring` (0-based) of record `n` loses its closing vertex (the last point becomes a copy of the one before): open, the same shape once closed. */
function dropClosingVertex(shp: Buffer, shx: Buffer, n: number, ring: number): void {
  const at = shx.readInt32BE(100 + 8 * (n - 1)) * 2 + 8;
  const nParts = shp.readInt32LE(at + 36);
  const end = ring + 1 < nParts ? shp.readInt32LE(at + 44 + 4 * (ring + 1)) : shp.readInt32LE(at + 40);
  const xy = at + 44 + 4 * nParts;
  shp.copy(shp, xy + 16 * (end - 1), xy + 16 * (end - 2), xy + 16 * (end - 1));
}

/** The .dbf cut before its last record (header count and bytes): the .shp keeps one shape more. */
function cutLastDbfRecord(dbfPath: string): void {
  const dbf = fs.readFileSync(dbfPath);
  const records = dbf.readUInt32LE(4);
  dbf.writeUInt32LE(records - 1, 4);
  fs.writeFileSync(dbfPath, Buffer.concat([dbf.subarray(0, dbf.readUInt16LE(8) + (records - 1) * dbf.readUInt16LE(10)), Buffer.from([0x1a])]));
}

let n = 0;
async function load(f: LayerFormat, damage?: (shp: Buffer, shx: Buffer) => void, dbfDamage?: (dbf: string) => void, extra: { name: string; text: string }[] = []) {
  const work = path.join(tmp, `w${++n}`);
  const dir = path.join(tmp, `z${n}`);
  fs.mkdirSync(work);
  fs.mkdirSync(dir);
  const files = await writeLayer(work, LAYER, FUNAI_DBF_FIELDS, f.ldid === 0x02 ? CP850_ROWS : ROWS, f);
  if (damage) {
    const shp = fs.readFileSync(path.join(work, `${LAYER}.shp`));
    damage(shp, fs.readFileSync(path.join(work, `${LAYER}.shx`)));
    fs.writeFileSync(path.join(work, `${LAYER}.shp`), shp);
  }
  dbfDamage?.(path.join(work, `${LAYER}.dbf`));
  for (const e of extra) {
    fs.writeFileSync(path.join(work, e.name), e.text);
    files.push(path.join(work, e.name));
  }
  await zipFiles(path.join(dir, `${LAYER}.zip`), files.map((p) => ({ path: p, name: path.basename(p) })));
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, funaiTis, { source: dir });
  const areas = out.status === 'published' || out.status === 'unchanged'
    ? Object.fromEntries((await db.pool.query(`SELECT codigo, area_calculada_ha FROM serving.funai_tis`)).rows.map((r): [string, number] => [r.codigo, r.area_calculada_ha]))
    : ({} as Record<string, number>);
  const q: QualityReport | null = out.snapshot_id ? (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality : null;
  return { out, areas, q };
}

describe('a polygon ring that does not close', () => {
  for (const [reader, f] of [
    ['streaming reader', { encoding: 'utf8', cpg: 'UTF-8' }],
    // A DBF that names CP850 in its LDID is read by GDAL (Node has no CP850 decoder).
    ['GDAL reader', { encoding: 'latin1', cpg: null, ldid: 0x02 }],
  ] as [string, LayerFormat][]) {
    test(`${reader}: closed on reading, counted, the land loaded at its place`, async () => {
      const want = await load(f);
      expect(want.out.status).toBe('published');
      // 1e-9 degrees: the ring closes by a segment far below a square metre.
      const got = await load(f, (shp, shx) => openFirstRing(shp, shx, 1, 1e-9));
      expect(got.out.error).toBeUndefined();
      expect(got.out).toMatchObject({ status: 'published', rows_read: want.out.rows_read, rows_loaded: want.out.rows_loaded, rows_rejected: want.out.rows_rejected });
      expect(Object.keys(got.areas).sort()).toEqual(Object.keys(want.areas).sort());
      for (const [codigo, ha] of Object.entries(want.areas)) expect(Math.abs(got.areas[codigo] - ha), codigo).toBeLessThan(1e-3);
      expect(got.q!.facts.notes.join('\n')).toMatch(/1 polygon ring\(s\) not closed in the \.shp, closed on reading/);
      expect(got.q!.facts.notes.join('\n')).toContain(reader === 'GDAL reader' ? 'read with GDAL' : 'read with the streaming shapefile reader');
    });
  }
});

describe('an open ring of a polygon with a hole', () => {
  // Record 3 of the fixture (TI 90103) is a shell with one hole. Either ring left open must keep
  // its orientation: a hole taken for an outer ring became a part of its own, and the repair
  // filled the hole (the streaming reader published 429,437 ha for 417,166, no hole).
  for (const [reader, f] of [
    ['streaming reader', { encoding: 'utf8', cpg: 'UTF-8' }],
    ['GDAL reader', { encoding: 'latin1', cpg: null, ldid: 0x02 }],
  ] as [string, LayerFormat][]) {
    for (const ring of [0, 1]) {
      test(`${reader}: the ${ring ? 'hole' : 'shell'} left open, the land keeps its hole and its area`, async () => {
        const shape = async () => (await db.pool.query(`SELECT area_calculada_ha AS ha, ST_NumInteriorRings(ST_GeometryN(geom, 1)) AS holes, ST_NumGeometries(geom) AS parts FROM serving.funai_tis WHERE codigo = '90103'`)).rows[0];
        expect((await load(f)).out.status).toBe('published');
        const want = await shape();
        expect(want.holes).toBe(1);
        const got = await load(f, (shp, shx) => dropClosingVertex(shp, shx, 3, ring));
        expect(got.out.status).toBe('published');
        const have = await shape();
        expect({ holes: have.holes, parts: have.parts }).toEqual({ holes: 1, parts: want.parts });
        expect(Math.abs(have.ha - want.ha)).toBeLessThan(1e-6 * want.ha);
        expect(got.q!.facts.notes.join('\n')).toMatch(/1 polygon ring\(s\) not closed in the \.shp, closed on reading/);
      });
    }
  }
});

/** Writes `text` right-aligned over field `name` of record `n` (0-based) of a .dbf. */
function setDbfCell(dbfPath: string, n: number, name: string, text: string): void {
  const dbf = fs.readFileSync(dbfPath);
  let at = 1;
  for (let p = 32; dbf[p] !== 0x0d; p += 32) {
    const len = dbf[p + 16];
    if (dbf.toString('latin1', p, p + 11).replace(/\0.*$/, '') === name) {
      dbf.write(text.padStart(len, ' '), dbf.readUInt16LE(8) + n * dbf.readUInt16LE(10) + at, len, 'latin1');
      return fs.writeFileSync(dbfPath, dbf);
    }
    at += len;
  }
  throw new Error(`no field ${name}`);
}

describe('numeric DBF cells that are not plain numbers', () => {
  // Brazilian tools write a decimal comma (and thousands points) into N fields. GDAL read such a
  // cell as far as it parses: FUNAI published 5000 ha for '5000,75', 1.234 ha for '1.234.567,5'
  // and 0 for 'n/d', nothing counted; the streaming reader kept the text for the SQL conversions.
  for (const [reader, f] of [
    ['streaming reader', { encoding: 'utf8', cpg: 'UTF-8' }],
    ['GDAL reader', { encoding: 'latin1', cpg: null, ldid: 0x02 }],
  ] as [string, LayerFormat][]) {
    test(`${reader}: '5000,75' and '1.234.567,5' are read as Brazilian numbers, 'n/d' kept in extra and counted`, async () => {
      const got = await load(f, undefined, (dbf) => {
        setDbfCell(dbf, 0, 'superficie', '5000,75');
        setDbfCell(dbf, 1, 'superficie', '1.234.567,5');
        setDbfCell(dbf, 2, 'superficie', 'n/d');
      });
      expect(got.out.status).toBe('published');
      const rows = (await db.pool.query(`SELECT codigo, area_declarada_ha AS ha, extra->>'area_declarada_ha' AS raw FROM serving.funai_tis WHERE codigo IN ('90101', '90102', '90103') ORDER BY codigo`)).rows;
      expect(rows).toEqual([{ codigo: '90101', ha: 5000.75, raw: null }, { codigo: '90102', ha: 1234567.5, raw: null }, { codigo: '90103', ha: null, raw: 'n/d' }]);
      expect(got.q!.facts.notes.join('\n')).toMatch(/3 numeric\/date value\(s\) that were not numbers\/dates, kept as written/);
      expect(got.q!.facts.fields.unparsed).toEqual({ area_declarada_ha: 1 });
    });
  }
});

test('a .dbf shorter than its .shp: the shapes without a record are counted and block the load; the last good snapshot stays', async () => {
  const f: LayerFormat = { encoding: 'utf8', cpg: 'UTF-8' };
  const good = await load(f);
  expect(good.out.status).toBe('published');
  const got = await load(f, undefined, cutLastDbfRecord);
  expect(got.out.status).toBe('blocked');
  expect(got.out.gate?.failures.map((x) => x.rule)).toEqual(['shapes_without_record']);
  expect(got.out.gate?.failures[0]).toMatchObject({ value: 1, threshold: 0 });
  expect(got.q!.facts.notes.join('\n')).toMatch(/1 shape\(s\) after the \.dbf's last record/);
  const now = Object.fromEntries((await db.pool.query(`SELECT codigo, area_calculada_ha FROM serving.funai_tis`)).rows.map((r): [string, number] => [r.codigo, r.area_calculada_ha]));
  expect(now).toEqual(good.areas);
});

test('an empty .prj says no more than a missing one: SIRGAS 2000 assumed and noted, the lands at their place', async () => {
  const want = await load({ encoding: 'utf8', cpg: 'UTF-8' });
  const got = await load({ encoding: 'utf8', cpg: 'UTF-8', prj: null }, undefined, undefined, [{ name: `${LAYER}.prj`, text: '  \r\n' }]);
  expect(got.out.error).toBeUndefined();
  expect(got.out.status).toBe('published');
  expect(got.q!.facts.geometry).toMatchObject({ srid: 4674, sridAssumed: true });
  expect(got.q!.facts.notes).toContain('a layer had no .prj: EPSG:4674 (SIRGAS 2000) assumed');
  expect(got.areas).toEqual(want.areas);
});
