// Per-file test fixtures as vitest hooks (kept out of db.ts, which the global setup imports).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { testDatabase, type TestDb } from './db.ts';

/**
 * The test file's (or describe block's) own database and, given `tmpPrefix`, a temp folder:
 * made before its tests, dropped and removed after them; `set` receives both.
 */
export function usesTestDatabase(set: (db: TestDb, tmp: string) => void, tmpPrefix?: string): void {
  let db: TestDb | undefined;
  let tmp = '';
  beforeAll(async () => {
    db = await testDatabase();
    if (tmpPrefix) tmp = fs.mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
    set(db, tmp);
  });
  afterAll(async () => {
    await db?.drop();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });
}
