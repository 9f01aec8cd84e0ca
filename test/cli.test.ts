// The `agro` command as operators script it: --json prints exactly one JSON object on
// stdout, exit codes 0 / 1 / 2 / 3, logs on stderr.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import { loadConfig } from '../src/config.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;

function agro(...args: string[]) {
  return agroEnv({}, ...args);
}

function agroEnv(env: Record<string, string>, ...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'info', ...env },
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
  await buildSicarState('DF', path.join(work, 'DF-half2'), { filter: (_r, i) => i === 0, mtime: new Date(2024, 5, 1) });
  await buildSicarState('DF', path.join(work, 'DF-full2'), { mtime: new Date(2024, 5, 2) });
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

/** With --json, stdout is exactly one JSON object, whatever happened. */
function oneObject(r: { stdout: string }) {
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  expect(lines, r.stdout).toHaveLength(1);
  const o = JSON.parse(lines[0]);
  expect(typeof o === 'object' && o !== null && !Array.isArray(o)).toBe(true);
  return o;
}

describe('--json is strict (issue 6 B.5): one JSON object on stdout on every path', () => {
  const usage = (...args: string[]) => {
    const r = agro(...args);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
    const o = oneObject(r);
    expect(o).toEqual({ error: { code: 'usage', message: expect.any(String) } });
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    return o.error.message as string;
  };

  test('usage errors', () => {
    expect(usage('--json')).toMatch(/missing <command>/);
    expect(usage('--json', '--bogus')).toMatch(/--bogus/);
    expect(usage('frobnicate', '--json')).toMatch(/unknown command "frobnicate"/);
    expect(usage('run', '--json')).toMatch(/missing <pipeline>/);
    expect(usage('run', 'nope', '--json')).toMatch(/unknown pipeline/);
    expect(usage('run', 'sicar', '--uf', '--json')).toMatch(/--uf/); // parseArgs: --uf needs a value
    expect(usage('db', 'frobnicate', '--json')).toMatch(/db start\|stop/);
    expect(usage('publish', 'abc', '--json')).toMatch(/snapshot id/);
    expect(usage('report', '--json')).toMatch(/run id or a snapshot id/);
    expect(usage('report', '1', '--format', 'pdf', '--json')).toMatch(/json or html/);
    expect(usage('nightly', '--sources', 'elsewhere', '--json')).toMatch(/official or fixtures/);
    const badConfig = agroEnv({ AGRO_RETENTION: 'three' }, 'snapshots', '--json');
    expect(badConfig.code).toBe(2);
    expect(oneObject(badConfig)).toEqual({ error: { code: 'usage', message: expect.stringMatching(/configuration: AGRO_RETENTION: not a number: three/) } });
    // Below a setting's floor is refused, naming it (it was clamped without a word: 0 retries ran 1, -3 too).
    for (const [name, value, floor] of [['AGRO_DOWNLOAD_RETRIES', '0', 1], ['AGRO_RETENTION', '-2', 1], ['AGRO_API_POOL', '0', 1], ['AGRO_SICAR_WFS_PAGE_SIZE', '0', 1], ['AGRO_CNPJ_BACKOFF_MS', '-5', 0],
      // 0 disabled the share's PROPFIND timeout (req.setTimeout(0)) and made every transfer 'too slow'
      ['AGRO_CNPJ_STALL_TIMEOUT_MS', '0', 100]] as const) {
      const low = agroEnv({ [name]: value }, 'snapshots', '--json');
      expect(low.code, name).toBe(2);
      expect(oneObject(low).error.message).toBe(`usage error: configuration: ${name} must be at least ${floor}: ${value}`);
      // the environment is wrong, not the command: no usage text
      expect(low.stderr, name).not.toMatch(/usage: agro/);
    }
    // LOG_LEVEL (contract §1) is configuration too: a level the logger does not know is a usage
    // error naming it, one JSON object, exit 2 (it was pino's stack trace, exit 1, nothing on stdout).
    const badLevel = agroEnv({ LOG_LEVEL: 'verbose' }, 'snapshots', '--json');
    expect(badLevel.code, badLevel.stderr).toBe(2);
    expect(oneObject(badLevel)).toEqual({ error: { code: 'usage', message: expect.stringMatching(/LOG_LEVEL must be one of .*info.*: verbose/) } });
    expect(badLevel.stderr).not.toMatch(/\n\s+at /);
    // LOG_FORMAT too: a typo (or any value but json) silently meant auto.
    const badFormat = agroEnv({ LOG_FORMAT: 'jsn' }, 'snapshots', '--json');
    expect(badFormat.code, badFormat.stderr).toBe(2);
    expect(oneObject(badFormat)).toEqual({ error: { code: 'usage', message: 'usage error: configuration: LOG_FORMAT must be json or auto: jsn' } });
    expect(loadConfig({ LOG_FORMAT: ' JSON ' }).logFormat).toBe('json');
    expect(loadConfig({ LOG_FORMAT: 'Auto' }).logFormat).toBe('auto');
    expect(loadConfig({ LOG_FORMAT: '' }).logFormat).toBe('auto');
  }, 300_000);

  test('AGRO_SICAR_UFS naming something that is not a state is a configuration error before anything runs', async () => {
    // It surfaced only when the night reached SICAR: the layers had loaded, then the whole night ended
    // in a usage error (no summary, later pipelines not started); `schedule --check` counted it a run.
    const before = (await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n;
    for (const args of [['nightly', '--json'], ['schedule', '--check', '--json']]) {
      const r = agroEnv({ AGRO_SICAR_UFS: 'GO, mt,XX' }, ...args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(oneObject(r)).toEqual({ error: { code: 'usage', message: expect.stringMatching(/AGRO_SICAR_UFS: "XX" is not a Brazilian state/) } });
    }
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n).toBe(before);
    // Spaces and case are forgiven, as before.
    expect(oneObject(agroEnv({ AGRO_SICAR_UFS: 'GO, mt' }, 'schedule', '--check', '--json')).jobs.find((j: { job: string }) => j.job === 'sicar-nightly').runs).toBe(2);
    // A value that names no state (a stray comma, spaces) is a typo too: it planned no SICAR run at
    // all, the night silently loading no state; a state named twice is loaded once.
    for (const v of [',', ' ', ' , ']) {
      const r = agroEnv({ AGRO_SICAR_UFS: v }, 'schedule', '--check', '--json');
      expect(r.code, `${JSON.stringify(v)}: ${r.stdout}`).toBe(2);
      expect(oneObject(r)).toEqual({ error: { code: 'usage', message: expect.stringMatching(/AGRO_SICAR_UFS names no state/) } });
    }
    expect(oneObject(agroEnv({ AGRO_SICAR_UFS: 'GO,go' }, 'schedule', '--check', '--json')).jobs.find((j: { job: string }) => j.job === 'sicar-nightly').runs).toBe(1);
  }, 300_000);

  test('--uf with a dataset that is not loaded per state is refused, not ignored', async () => {
    const before = (await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n;
    const dir = path.join(ROOT, 'fixtures/ibge-municipios');
    // run/backfill loaded the whole country and printed "uf": null; rollback said "ibge-municipios GO
    // has no published snapshot" (exit 1); snapshots listed nothing: each a usage error now.
    expect(usage('run', 'ibge-municipios', '--source', dir, '--uf', 'GO', '--json')).toMatch(/--uf: ibge-municipios is not loaded per state/);
    expect(usage('backfill', 'ibge-municipios', '--source', dir, '--as-of', '2024-06-01', '--uf', 'GO', '--json')).toMatch(/--uf/);
    expect(usage('rollback', 'ibge-municipios', '--uf', 'GO', '--json')).toMatch(/--uf/);
    expect(usage('snapshots', 'ibge-municipios', '--uf', 'GO', '--json')).toMatch(/--uf/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n).toBe(before);
  }, 300_000);

  test('--source with a scheme other than file:// and http(s):// is a usage error, not a relative path', async () => {
    // `--source ftp://host/x.zip` was read as the local path ./ftp:/host/x.zip: a failed run, exit 1,
    // "source not found: <cwd>/ftp:/host/x.zip". Contract §1: a local path, a file:// or an http(s):// URL.
    const before = (await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n;
    expect(usage('run', 'ibge-municipios', '--source', 'ftp://example.org/BR_Municipios_2024.zip', '--json')).toMatch(/--source takes a path, a file:\/\/ or an http\(s\):\/\/ URL, not ftp:\/\//);
    expect(usage('backfill', 'ibge-municipios', '--source', 's3://bucket/ibge/', '--as-of', '2024-06-01', '--json')).toMatch(/not s3:\/\//);
    const list = path.join(work, 'series-ftp.txt');
    fs.writeFileSync(list, `2024-06-01 ${path.join(ROOT, 'fixtures/ibge-municipios')}\n2024-07-01 ftp://example.org/ibge/\n`);
    expect(usage('backfill', 'ibge-municipios', '--series-file', list, '--json')).toMatch(/line 2: .*not ftp:\/\//);
    // The configured source too (AGRO_SOURCE_<PIPELINE>): a configuration error before anything runs.
    const configured = agroEnv({ AGRO_SOURCE_IBGE_MUNICIPIOS: 'ftp://example.org/ibge/' }, 'run', 'ibge-municipios', '--json');
    expect(configured.code, configured.stderr).toBe(2);
    expect(oneObject(configured)).toEqual({ error: { code: 'usage', message: expect.stringMatching(/AGRO_SOURCE_IBGE_MUNICIPIOS takes a path, a file:\/\/ or an http\(s\):\/\/ URL, not ftp:\/\//) } });
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n).toBe(before);
  }, 300_000);

  test('a source given as a bare argument is refused, not ignored (the run would have gone to the official source)', async () => {
    const before = (await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n;
    const dir = path.join(ROOT, 'fixtures/ibge-municipios');
    expect(usage('run', 'ibge-municipios', dir, '--json')).toMatch(new RegExp(`unexpected argument "${dir}".*--source`));
    expect(usage('backfill', 'ibge-municipios', dir, '--as-of', '2024-06-01', '--json')).toMatch(/unexpected argument/);
    expect(usage('run', 'sicar', 'GO', '--json')).toMatch(/unexpected argument "GO".*--uf/);
    expect(usage('snapshots', 'sicar', 'GO', '--json')).toMatch(/unexpected argument "GO"/);
    expect(usage('rollback', 'sicar', 'GO', '--json')).toMatch(/unexpected argument "GO"/);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM etl.runs`)).rows[0].n).toBe(before);
  }, 300_000);

  test('C.8: an impossible --as-of date and an unknown --uf are usage errors that say why', () => {
    expect(usage('run', 'sicar', '--uf', 'DF', '--as-of', '2026-02-30', '--json')).toMatch(/--as-of must be a calendar date \(yyyy-mm-dd\), got "2026-02-30"/);
    expect(usage('backfill', 'sicar', '--uf', 'DF', '--as-of', '2025-04-31', '--source', work, '--json')).toMatch(/calendar date/);
    const uf = usage('run', 'sicar', '--uf', 'XX', '--source', work, '--json');
    expect(uf).toMatch(/--uf "XX" is not a Brazilian state/);
    expect(uf).toMatch(/known: AC, AL, .*TO/);
    expect(usage('snapshots', '--uf', 'ZZ', '--json')).toMatch(/"ZZ" is not a Brazilian state/);
    const plain = agro('run', 'sicar', '--uf', 'DF', '--as-of', '2026-02-30');
    expect(plain.code).toBe(2);
    expect(plain.stderr).toMatch(/calendar date/);
    expect(plain.stderr).not.toMatch(/\n\s+at /);
  }, 300_000);

  test('help, report formats, not-found and an unreachable database', () => {
    const help = agro('--help', '--json');
    expect(help.code).toBe(0);
    expect(oneObject(help).usage).toMatch(/^usage: agro/);

    const id = String(oneObject(agro('snapshots', 'sicar', '--json')).snapshots[0].snapshot_id);
    const html = agro('report', id, '--format', 'html', '--json');
    expect(html.code).toBe(0);
    expect(oneObject(html)).toEqual({ snapshot_id: Number(id), format: 'html', html: expect.stringMatching(/^<!doctype html>/) });
    const out = path.join(work, 'report.html');
    const written = agro('report', id, '--format', 'html', '--out', out, '--json');
    expect(oneObject(written)).toEqual({ snapshot_id: Number(id), format: 'html', out });
    expect(fs.readFileSync(out, 'utf8')).toMatch(/^<!doctype html>/);
    expect(oneObject(agro('report', id, '--json')).snapshot_id).toBe(Number(id));

    const missing = agro('report', '999999', '--json');
    expect(missing.code).toBe(1);
    expect(oneObject(missing)).toEqual({ error: { code: 'snapshot_not_found', message: expect.stringMatching(/999999/) } });
    const noSnap = agro('publish', '999999', '--json');
    expect(noSnap.code).toBe(1);
    expect(oneObject(noSnap).error.code).toBe('snapshot_not_found');

    // A port nothing listens on (the test's own, never the shared cluster's).
    const down = agroEnv({ DATABASE_URL: 'postgres://agro@127.0.0.1:9/agro' }, 'snapshots', '--json');
    expect(down.code).toBe(1);
    expect(oneObject(down)).toEqual({ error: { code: 'database_unavailable', message: expect.any(String) } });
  }, 300_000);

  test('report of a snapshot whose run failed before its quality stage says which run and why', () => {
    // Deflate data damaged inside the zip: the download passes, the read fails after the snapshot was created.
    const dir = path.join(work, 'ibge-damaged');
    fs.mkdirSync(dir, { recursive: true });
    const zip = fs.readFileSync(path.join(ROOT, 'fixtures/ibge-municipios/BR_Municipios_2024.zip'));
    for (let i = 200; i < 260; i++) zip[i] ^= 0x55;
    fs.writeFileSync(path.join(dir, 'BR_Municipios_2024.zip'), zip);
    const failed = agro('run', 'ibge-municipios', '--source', dir, '--json').json();
    expect(failed).toMatchObject({ status: 'failed', snapshot_id: expect.any(Number), error: { code: 'corrupt_archive' } });
    const r = agro('report', `s${failed.snapshot_id}`, '--json');
    expect(r.code).toBe(1);
    expect(oneObject(r).error).toEqual({
      code: 'snapshot_not_found',
      message: expect.stringContaining(`no quality report for s${failed.snapshot_id} (run ${failed.run_id} ended failed before its quality stage: the archive is corrupt`),
    });
  }, 300_000);

  test('report --out into a folder that does not exist, or onto a folder: a usage error naming the file, no stack trace', () => {
    const id = String(oneObject(agro('snapshots', 'sicar', '--json')).snapshots[0].snapshot_id);
    for (const out of [path.join(work, 'no-such-folder', 'r.html'), work]) {
      const r = agro('report', id, '--format', 'html', '--out', out, '--json');
      expect(r.code).toBe(2);
      expect(oneObject(r)).toEqual({ error: { code: 'usage', message: expect.stringContaining(`--out ${out}: cannot write the report`) } });
      expect(r.stderr).not.toMatch(/\n\s+at |unexpected error|"stack"/);
    }
  }, 300_000);
});

describe('publish <id> of a blocked snapshot (issue 6 C.2)', () => {
  test('refused without --force, naming the failed rules (exit 3); --force publishes; keep exempts from retention', () => {
    expect(oneObject(agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-full2'), '--json')).status).toBe('published');
    const blocked = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-half2'), '--json');
    expect(blocked.code).toBe(3);
    const id = String(oneObject(blocked).snapshot_id);
    const current = () => oneObject(agro('snapshots', 'sicar', '--uf', 'DF', '--json')).snapshots.find((s: { status: string }) => s.status === 'current').snapshot_id;
    const before = current();

    const refused = agro('publish', id, '--json');
    expect(refused.code).toBe(3);
    expect(oneObject(refused)).toMatchObject({ error: { code: 'quality_gate', message: expect.stringMatching(/row_drop: rows dropped/) } });
    expect(current()).toBe(before);

    const forced = agro('publish', id, '--force', '--json');
    expect(forced.code).toBe(0);
    expect(oneObject(forced)).toEqual({ snapshot_id: Number(id), published: true, status: 'published', forced: true });
    expect(current()).toBe(Number(id));

    const kept = agro('keep', String(before), '--json');
    expect(kept.code).toBe(0);
    expect(oneObject(kept)).toEqual({ snapshot_id: before, kept: true });
    expect(oneObject(agro('snapshots', 'sicar', '--uf', 'DF', '--json')).snapshots.find((s: { snapshot_id: number }) => s.snapshot_id === before).kept).toBe(true);
  }, 300_000);
});
