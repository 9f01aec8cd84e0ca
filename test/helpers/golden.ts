// Golden in/out files for the pipelines (Turf's test/in → test/out): a committed fixture goes
// in; out come the snapshot's rows as GeoJSON (geometry as GeoJSON, features sorted by key,
// numbers rounded to 6 decimals) and the quality facts as JSON. Regenerate with
// UPDATE_GOLDEN=1 and review the diff: a change there is a change in what users get.
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { expect } from 'vitest';

const DECIMALS = 6;

/** Numbers rounded (stable across platforms' float noise), object keys as they come. */
function stable(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? v : Number(v.toFixed(DECIMALS));
  if (Array.isArray(v)) return v.map(stable);
  if (v && typeof v === 'object' && !(v instanceof Date)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, stable(x)]));
  if (v instanceof Date) return v.toISOString().slice(0, 10);
  return v;
}

/** The rows of a snapshot table as a FeatureCollection sorted by `key` (then by geometry, or the row, for keys several rows share). */
export async function snapshotGeoJson(db: pg.Pool, table: string, key: string): Promise<string> {
  const cols = await db.query(
    `SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
    [table],
  );
  const geoms = cols.rows.filter((c) => c.type.startsWith('geometry')).map((c) => c.attname as string);
  const main: string | undefined = geoms.includes('geom') ? 'geom' : geoms[0];
  const select = cols.rows
    .filter((c) => c.attname !== 'snapshot_id')
    .map((c) => (geoms.includes(c.attname) ? `ST_AsGeoJSON("${c.attname}", ${DECIMALS})::json AS "${c.attname}"` : `"${c.attname}"`));
  // A table without geometry (zarc_risco, car_titulares): features with a null geometry, ties broken by the whole row.
  const then = main ? `ST_AsText("${main}")` : 't::text';
  const r = await db.query(`SELECT ${select.join(', ')} FROM ${table} t ORDER BY "${key}", ${then}`);
  const features = r.rows.map((row) => {
    const { [main ?? '']: geometry = null, ...properties } = row;
    return { type: 'Feature', geometry: stable(geometry), properties: stable(properties) };
  });
  // A snapshot id inside a value (car_titulares' evidencia) depends on what ran before, like the table name.
  const id = /__s(\d+)"?$/.exec(table)?.[1];
  const text = JSON.stringify({ type: 'FeatureCollection', features }, null, 1);
  return (id ? text.replace(new RegExp(`"snapshot_id": ${id}\\b`, 'g'), '"snapshot_id": "<id>"') : text) + '\n';
}

/** Quality facts with numbers rounded and snapshot table names without their id (it depends on what ran before). */
export const factsJson = (facts: object): string => JSON.stringify(stable(facts), null, 1).replace(/__s\d+\\"/g, '__s<id>\\"') + '\n';

/**
 * Compares `actual` with the golden file, or writes it under UPDATE_GOLDEN=1. A missing file
 * fails: writing it then would pass whatever the code gives (a renamed case, an uncommitted file).
 */
export function expectGolden(file: string, actual: string): void {
  if (process.env.UPDATE_GOLDEN) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, actual);
  }
  expect(fs.existsSync(file), `${file} is missing: create it with UPDATE_GOLDEN=1 and review it`).toBe(true);
  expect(actual).toBe(fs.readFileSync(file, 'utf8'));
}

/** The rows of a snapshot table without geometry as JSON lines (snapshot_id left out), sorted by their text: one row a line. */
export async function snapshotJsonLines(db: pg.Pool, table: string): Promise<string> {
  const r = await db.query(`SELECT to_jsonb(t) - 'snapshot_id' AS row FROM ${table} t ORDER BY (to_jsonb(t) - 'snapshot_id')::text COLLATE "C"`);
  return r.rows.map((x) => JSON.stringify(stable(x.row))).join('\n') + '\n';
}
