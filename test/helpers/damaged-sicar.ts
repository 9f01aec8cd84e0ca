// What a SICAR run over a state whose AREA_IMOVEL zip is damaged must leave behind: shared by
// the tests that damage it in different ways (read-once: a member damaged after download;
// read-zip-stream: a record header the streaming reader meets before the CRC).
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { runPipeline, type RunOutcome } from '../../src/etl/run.ts';
import { sicar } from '../../pipelines/sicar/index.ts';
import type { TestDb } from './db.ts';

/** A SICAR run of GO from `source`. */
export const runSicarGo = (db: TestDb, source: string): Promise<RunOutcome> => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source });

/** GO's current SICAR snapshot, or null. */
export const currentSicarGo = async (db: TestDb): Promise<number | null> =>
  (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'GO'`)).rows[0]?.snapshot_id ?? null;

/**
 * The run over `bad` fails with corrupt_archive (its message matching `message`), `before`
 * stays served, no staging table is left, the raw store distrusts the damaged
 * GO_AREA_IMOVEL.zip alone (its meta gone, so the next fetch brings the whole file again;
 * APPS keeps its); the next run over `good` recovers: unchanged, the same snapshot served.
 */
export async function expectDamagedAreaImovelRefused(db: TestDb, o: { bad: string; good: string; before: number | null; message: RegExp }): Promise<void> {
  const out = await runSicarGo(db, o.bad);
  expect(out.status).toBe('failed');
  expect(out.error?.code).toBe('corrupt_archive');
  expect(out.error?.message).toMatch(o.message);
  expect(await currentSicarGo(db)).toBe(o.before);
  const staged = await db.pool.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'stage'`);
  expect(staged.rows[0].n).toBe(0);
  const stored = fs.readdirSync(path.join(db.dataDir, 'raw', 'sicar', 'GO'), { recursive: true }).map(String);
  expect(stored.filter((n) => n.endsWith('GO_AREA_IMOVEL.zip.meta.json'))).toEqual([]);
  expect(stored.filter((n) => n.endsWith('GO_APPS.zip.meta.json')).length).toBe(1);

  const again = await runSicarGo(db, o.good);
  expect(again.status).toBe('unchanged');
  expect(again.error).toBeFalsy();
  expect(await currentSicarGo(db)).toBe(o.before);
}
