// The dead-run cleanup ends what the dead process left running on the server, found by the
// session name the run recorded: pid, host and a token drawn when the process started. A live
// process that got the same pid on the same host (a restarted container) is not touched.
import os from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { sessionName } from '../src/db/pool.ts';
import { cleanupDeadRuns } from '../src/etl/run.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(() => db.drop());

const session = async (name: string) => {
  const c = new pg.Client({ connectionString: db.url, application_name: name });
  c.on('error', () => {});
  await c.connect();
  return c;
};
const alive = (c: pg.Client) => c.query('SELECT 1').then(() => true, () => false);

test("a dead run's sessions are ended; a live process with the same pid and host, another token, is not", async () => {
  expect(sessionName()).toMatch(new RegExp(`^agro ${process.pid}@.* [0-9a-f]{8}$`));
  const pid = 4242;
  const dead = sessionName(pid, os.hostname(), 'deadbeef');
  const run = (await db.pool.query(
    `INSERT INTO etl.runs (pipeline, scope, options, pid, host, session) VALUES ('funai-tis', '', '{}', $1, $2, $3) RETURNING run_id`,
    [pid, os.hostname(), dead],
  )).rows[0].run_id;
  const left = await session(dead);
  const namesake = await session(sessionName(pid, os.hostname(), 'cafebabe'));
  try {
    expect(await cleanupDeadRuns({ cfg: db.cfg, pool: db.pool, log: db.log })).toEqual([run]);
    expect(await alive(left)).toBe(false);
    expect(await alive(namesake)).toBe(true);
    expect((await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [run])).rows[0].status).toBe('killed');
  } finally {
    await left.end().catch(() => {});
    await namesake.end().catch(() => {});
  }
});
