import { afterAll, beforeAll, expect, test } from 'vitest';
import { testDatabase, type TestDb } from './helpers/db.ts';
let db: TestDb;
beforeAll(async () => { db = await testDatabase(); });
afterAll(async () => { await db.drop(); });
test('template has postgis and helpers', async () => {
  const r = await db.pool.query(`SELECT etl.parse_date('31/02/2020') AS bad, etl.parse_date('2023-11-14') AS iso, etl.parse_date('12/10/2019') AS br, etl.parse_number('1.234,5') AS n, postgis_version() IS NOT NULL AS pg`);
  expect(r.rows[0]).toEqual({ bad: null, iso: '2023-11-14', br: '2019-10-12', n: 1234.5, pg: true });
});
