// agro started from another folder than the checkout (a crontab starts it in $HOME, systemd in
// /): its default data folder and schedule file are still the checkout's. They were the working
// directory's: `agro run` from $HOME initialised a second embedded cluster under ~/.data and
// loaded there, while `agro serve` from the checkout served the first one.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';

const ROOT = path.resolve(__dirname, '..');
const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-elsewhere-'));
afterAll(() => fs.rmSync(elsewhere, { recursive: true, force: true }));

test('from another working directory, agro db status names the checkout\'s .data and creates nothing there', () => {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'silent' };
  for (const k of ['DATABASE_URL', 'AGRO_DATA_DIR', 'AGRO_DB_PORT', 'AGRO_SCHEDULE_FILE']) delete env[k];
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'db', 'status', '--json'], { cwd: elsewhere, env, encoding: 'utf8', timeout: 60_000 });
  expect([0, 1], r.stderr).toContain(r.status); // 1: the checkout's cluster is stopped (tests on a DATABASE_URL)
  expect(JSON.parse(r.stdout).dataDir).toBe(path.join(ROOT, '.data', 'pg', 'data'));
  expect(fs.readdirSync(elsewhere)).toEqual([]);
});

test('the defaults are the checkout\'s; a relative path given in the environment is the caller\'s', () => {
  const defaults = loadConfig({}, elsewhere);
  expect(defaults.dataDir).toBe(path.join(ROOT, '.data'));
  expect(defaults.scheduleFile).toBe(path.join(ROOT, 'agro.schedule.json'));
  const given = loadConfig({ AGRO_DATA_DIR: 'mine', AGRO_SCHEDULE_FILE: 'jobs.json' }, elsewhere);
  expect(given.dataDir).toBe(path.join(elsewhere, 'mine'));
  expect(given.scheduleFile).toBe(path.join(elsewhere, 'jobs.json'));
});
