// The `agro` command as operators script it: --json prints exactly one JSON object on
// stdout, exit codes 0 / 1 / 2 / 3, logs on stderr.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;

function agro(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info' },
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, json: () => JSON.parse(r.stdout) };
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-'));
  await buildSicarState('DF', path.join(work, 'DF'));
  await buildSicarState('DF', path.join(work, 'DF-half'), { filter: (_r, i) => i === 0 });
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('agro', () => {
  test('usage errors exit 2', () => {
    expect(agro().code).toBe(2);
    expect(agro('run').code).toBe(2);
    expect(agro('run', 'nope').code).toBe(2);
    const r = agro('run', 'sicar', '--source', work, '--json');
    expect(r.code).toBe(2);
    expect(r.json()).toEqual({ error: { code: 'usage', message: expect.stringMatching(/--uf/) } });
    expect(agro('run', 'sicar', '--uf', 'DF', '--as-of', '2024-13-45').code).toBe(2);
    expect(agro('frobnicate').code).toBe(2);
  });

  test('db url prints the DATABASE_URL when set', () => {
    const r = agro('db', 'url', '--json');
    expect(r.code).toBe(0);
    expect(r.json()).toEqual({ url: db.url });
  });

  test('run --json prints one object with the contract fields; logs go to stderr', () => {
    const r = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF'), '--as-of', '2026-11-15', '--json');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    const o = r.json();
    for (const k of ['run_id', 'pipeline', 'status', 'snapshot_id', 'rows_read', 'rows_loaded', 'rows_rejected', 'duration_ms', 'stages']) expect(o).toHaveProperty(k);
    expect(o).toMatchObject({ pipeline: 'sicar', status: 'published', as_of: '2026-11-15', rows_read: 3, rows_loaded: 3, rows_rejected: 0 });
    expect(Object.keys(o.stages)).toContain('normalise');
    expect(r.stderr).toMatch(/stage done/);
  });

  test('an unchanged source exits 0 with status unchanged', () => {
    const r = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF'), '--json');
    expect(r.code).toBe(0);
    expect(r.json().status).toBe('unchanged');
  });

  test('a blocked load exits 3; --force exits 0; snapshots lists both; report renders', () => {
    const blocked = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-half'), '--json');
    expect(blocked.code).toBe(3);
    expect(blocked.json()).toMatchObject({ status: 'blocked', gate: { passed: false } });
    const forced = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-half'), '--force', '--json');
    expect(forced.code).toBe(0);
    expect(forced.json()).toMatchObject({ status: 'published', forced: true });

    const list = agro('snapshots', 'sicar', '--uf', 'DF', '--json').json().snapshots;
    expect(list.map((s: { status: string }) => s.status)).toEqual(['current', 'blocked', 'superseded']);
    const rep = agro('report', String(forced.json().snapshot_id), '--json').json();
    expect(rep).toMatchObject({ dataset: 'sicar', uf: 'DF', gate: { passed: false, forced: true } });
    const html = path.join(work, 'r.html');
    expect(agro('report', `r${forced.json().run_id}`, '--format', 'html', '--out', html).code).toBe(0);
    expect(fs.readFileSync(html, 'utf8')).toMatch(/published with --force/);
  });

  test('rollback and publish repoint; a failing source exits 1', () => {
    const rb = agro('rollback', 'sicar', '--uf', 'DF', '--json');
    expect(rb.code).toBe(0);
    const { snapshot_id, from_snapshot_id } = rb.json();
    expect(agro('publish', String(from_snapshot_id), '--json').code).toBe(0);
    expect(agro('snapshots', 'sicar', '--json').json().snapshots.find((s: { status: string }) => s.status === 'current').snapshot_id).toBe(from_snapshot_id);
    expect(snapshot_id).not.toBe(from_snapshot_id);
    fs.mkdirSync(path.join(work, 'broken'));
    fs.writeFileSync(path.join(work, 'broken', 'DF_AREA_IMOVEL.zip'), '<html>502 Bad Gateway</html>');
    const bad = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'broken'), '--json');
    expect(bad.code).toBe(1);
    expect(bad.json()).toMatchObject({ status: 'failed', error: { code: 'html_instead_of_archive' } });
  });
});
