// The two shapefile readers side by side on the same layers (tests of the streaming reader
// against GDAL's): staged into two tables, then compared row by row.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { stageShapefiles } from '../../src/etl/read/shp-stream.ts';
import { stageLayers, type FieldSpec } from '../../src/etl/stage-vector.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { testDatabase, type TestDb } from './db.ts';

/** What a reader test file works with: its own database, one connection of it, a temp folder. */
export interface ReaderTestContext {
  db: TestDb;
  client: pg.PoolClient;
  tmp: string;
}

export async function openReaderContext(prefix: string): Promise<ReaderTestContext> {
  const db = await testDatabase();
  return { db, client: await db.pool.connect(), tmp: fs.mkdtempSync(path.join(os.tmpdir(), prefix)) };
}

export async function closeReaderContext(c: Partial<ReaderTestContext>): Promise<void> {
  c.client?.release();
  await c.db?.drop();
  if (c.tmp) fs.rmSync(c.tmp, { recursive: true, force: true });
}

let n = 0;

/**
 * Stages the layers with GDAL's reader (table `a`) and the streaming one (table `b`). The one
 * known difference is normalised first: the GDAL reader puts a date field that lands in
 * `extra` as gdal-async's {year, month, day} object; the streaming reader as 'YYYY-MM-DD',
 * as in columns.
 */
export async function stageWithBothReaders(client: pg.ClientBase, layers: VectorLayer[], specs: FieldSpec[]) {
  const a = `gdal_${++n}`, b = `shp_${n}`;
  const ra = await stageLayers(client, a, layers.map((l) => ({ ...l, reader: 'gdal' as const })), specs);
  await client.query(`
    UPDATE ${a} SET extra = (
      SELECT jsonb_object_agg(k, CASE WHEN jsonb_typeof(v) = 'object' AND v ? 'year'
        THEN to_jsonb(lpad(v->>'year', 4, '0') || '-' || lpad(v->>'month', 2, '0') || '-' || lpad(v->>'day', 2, '0')) ELSE v END)
      FROM jsonb_each(extra) AS e(k, v))
    WHERE extra IS NOT NULL`);
  const rb = await stageShapefiles(client, b, layers, specs);
  return { a, b, ra, rb };
}

/** Rows of `b` that differ from `a` (whole row as text: every column, geometry as hex EWKB), both ways; at most 5. */
export async function rowDifferences(client: pg.ClientBase, a: string, b: string): Promise<unknown[]> {
  const r = await client.query(
    `SELECT a.src_seq AS a_seq, b.src_seq AS b_seq, to_jsonb(a) - 'geom' AS a, to_jsonb(b) - 'geom' AS b,
            ST_AsText(a.geom) AS a_geom, ST_AsText(b.geom) AS b_geom
       FROM ${a} a FULL JOIN ${b} b USING (src_seq)
      WHERE a.src_seq IS NULL OR b.src_seq IS NULL OR a::text IS DISTINCT FROM b::text
      ORDER BY src_seq LIMIT 5`,
  );
  return r.rows;
}
