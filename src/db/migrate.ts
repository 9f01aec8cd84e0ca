// Numbered, append-only migrations from sql/NNNN_name.sql. Each runs in its own
// transaction; a session advisory lock makes concurrent `agro migrate` calls safe
// (the second waits, then finds nothing left to do).
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { SQL_DIR } from '../sql.ts';

const LOCK_KEY = 'agro.migrate';

export interface Migration {
  id: number;
  name: string;
  file: string;
}

export function listMigrations(dir = SQL_DIR): Migration[] {
  return fs
    .readdirSync(dir)
    .map((f) => /^(\d{4})_(.+)\.sql$/.exec(f))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ id: Number(m[1]), name: m[2], file: path.join(dir, m[0]) }))
    .sort((a, b) => a.id - b.id);
}

export async function migrate(pool: pg.Pool): Promise<{ applied: string[] }> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [LOCK_KEY]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS agro_meta;
      CREATE TABLE IF NOT EXISTS agro_meta.migrations (id int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await client.query('SELECT id FROM agro_meta.migrations')).rows.map((r) => r.id as number));
    for (const m of listMigrations()) {
      if (done.has(m.id)) continue;
      await client.query('BEGIN');
      try {
        await client.query(fs.readFileSync(m.file, 'utf8'));
        await client.query('INSERT INTO agro_meta.migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
        await client.query('COMMIT');
        applied.push(`${String(m.id).padStart(4, '0')}_${m.name}`);
      } catch (e) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${m.id}_${m.name} failed: ${(e as Error).message}`);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [LOCK_KEY]).catch(() => {});
    client.release();
  }
  return { applied };
}
