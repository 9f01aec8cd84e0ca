// Contract §2: a source without a required column (here SICAR's key, cod_imovel) is a
// quality-gate refusal, not a crash: `agro run` ends `blocked` with exit 3, the gate names
// the missing field and the spellings looked for, the current snapshot keeps serving, and
// --force cannot override it (no row can be loaded without its key).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildSicarState } from '../fixtures/sicar.ts';
import type { SnapshotRow } from '../src/etl/catalog.ts';
import { retentionPlan } from '../src/etl/publish.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
let db: TestDb;
let work: string;

function agro(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir, LOG_LEVEL: 'warn' },
    encoding: 'utf8',
    timeout: 120_000,
  });
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  expect(lines, r.stdout + r.stderr).toHaveLength(1);
  return { code: r.status, json: JSON.parse(lines[0]) };
}

const current = async () => (await db.pool.query(`SELECT snapshot_id FROM etl.current WHERE dataset = 'sicar' AND scope = 'DF'`)).rows[0]?.snapshot_id ?? null;
const served = async () => (await db.pool.query(`SELECT car, snapshot_id FROM serving.car_imovel WHERE uf = 'DF' ORDER BY car`)).rows;

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'required-field-'));
  await buildSicarState('DF', path.join(work, 'DF'));
  await buildSicarState('DF', path.join(work, 'DF-nokey'), { dropFields: ['cod_imovel'] });
});
afterAll(async () => {
  await db.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('agro run with a source missing a required column', () => {
  test('ends blocked (exit 3), names the field, keeps the current snapshot; --force does not override it', async () => {
    const good = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF'), '--json');
    expect(good.code).toBe(0);
    const sid = good.json.snapshot_id;
    const before = await served();
    expect(before.length).toBeGreaterThan(0);

    const r = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-nokey'), '--json');
    expect(r.code).toBe(3);
    const o = r.json;
    expect(o).toMatchObject({ status: 'blocked', forced: false, rows_loaded: 0, error: { code: 'required_field_missing' } });
    expect(o.gate.passed).toBe(false);
    expect(o.gate.failures).toHaveLength(1);
    const rule = o.gate.failures[0];
    expect(rule).toMatchObject({ rule: 'required_field_missing', forceable: false, fields: ['car'] });
    // the spellings looked for, and where
    expect(rule.looked_for.car).toContain('cod_imovel');
    expect(rule.message).toMatch(/DF_AREA_IMOVEL.* has no car \(looked for cod_imovel/);
    expect(o.error.message).toBe(rule.message);
    expect(o.snapshot_id).not.toBe(sid);
    expect(await current()).toBe(sid);
    expect(await served()).toEqual(before);

    // the ledger and the listings say blocked, with the code
    const ledger = (await db.pool.query(`SELECT status, error_code FROM etl.runs WHERE run_id = $1`, [o.run_id])).rows[0];
    expect(ledger).toEqual({ status: 'blocked', error_code: 'required_field_missing' });
    const runs = agro('runs', 'sicar', '--json').json.runs;
    expect(runs[0]).toMatchObject({ run_id: o.run_id, status: 'blocked', error_code: 'required_field_missing' });
    const snaps = agro('snapshots', 'sicar', '--uf', 'DF', '--json').json.snapshots;
    expect(snaps.find((s: { snapshot_id: number }) => s.snapshot_id === o.snapshot_id)).toMatchObject({ status: 'blocked' });
    // the quality report records the rule
    const rep = agro('report', `r${o.run_id}`, '--json');
    expect(rep.code).toBe(0);
    expect(rep.json).toMatchObject({ snapshot_id: o.snapshot_id, counts: { loaded: 0 }, gate: { passed: false, forced: false, failures: [{ rule: 'required_field_missing', fields: ['car'] }] } });
    expect(fs.existsSync(o.report)).toBe(true);
    const html = path.join(work, 'blocked.html');
    expect(agro('report', `r${o.run_id}`, '--format', 'html', '--out', html, '--json').code).toBe(0);
    expect(fs.readFileSync(html, 'utf8')).toMatch(/required_field_missing: a required field is missing from the source/);

    // --force: still blocked, exit 3, saying why; nothing published
    const f = agro('run', 'sicar', '--uf', 'DF', '--source', path.join(work, 'DF-nokey'), '--force', '--json');
    expect(f.code).toBe(3);
    expect(f.json).toMatchObject({ status: 'blocked', forced: false, gate: { passed: false, forced: false }, error: { code: 'required_field_missing' } });
    expect(f.json.message).toMatch(/--force cannot override this rule: no row can be loaded without car/);
    expect(await current()).toBe(sid);
    expect(await served()).toEqual(before);
    const forcedRun = (await db.pool.query(`SELECT status FROM etl.runs WHERE run_id = $1`, [f.json.run_id])).rows[0];
    expect(forcedRun.status).toBe('blocked');

    // retention ran: of the two tableless blocked snapshots, only the latest is left
    const blockedLeft = (await db.pool.query(`SELECT snapshot_id FROM etl.snapshots WHERE dataset = 'sicar' AND uf = 'DF' AND status = 'blocked' ORDER BY snapshot_id`)).rows.map((x) => x.snapshot_id);
    expect(blockedLeft).toEqual([f.json.snapshot_id]);

    // nor can the blocked snapshot be published by hand
    const pub = agro('publish', String(f.json.snapshot_id), '--force', '--json');
    expect(pub.code).toBe(3);
    expect(pub.json.error).toMatchObject({ code: 'quality_gate', message: expect.stringMatching(/cannot be forced/) });
    expect(await current()).toBe(sid);
    expect(await served()).toEqual(before);
  });
});

describe('retention and a blocked snapshot that cannot be forced', () => {
  const snap = (id: number, status: SnapshotRow['status'], failures: object[] = [], current = false): SnapshotRow => ({
    snapshot_id: id, dataset: 'sicar', uf: 'DF', scope: 'DF', as_of: `2026-01-${String(id).padStart(2, '0')}`, status, rows: 1, source_sha256: null, source: {},
    tables: status === 'blocked' && failures.length && (failures[0] as { forceable?: boolean }).forceable === false ? [] : [`snap.car_imovel__s${id}`],
    quality: { gate: { passed: failures.length === 0, forced: false, failures } }, forced: false, kept: false, run_id: id, created_at: new Date(), published_at: null, rolled_back_at: null, is_current: current,
  });
  const drop = { rule: 'row_drop', message: 'rows dropped 30 % against the current snapshot' };
  const missing = { rule: 'required_field_missing', message: 'DF_AREA_IMOVEL has no car', forceable: false };

  test('the latest blocked snapshot a --force can publish stays beside a later one that cannot be forced', () => {
    const plan = retentionPlan([snap(1, 'published', [], true), snap(2, 'blocked', [drop]), snap(3, 'blocked', [missing])], { keep: 3, rollbackTo: null });
    expect([...plan.keep].sort()).toEqual([1, 2, 3]);
    // two forceable blocked snapshots: only the latest one, as before
    const plain = retentionPlan([snap(1, 'published', [], true), snap(2, 'blocked', [drop]), snap(3, 'blocked', [drop])], { keep: 3, rollbackTo: null });
    expect([...plain.keep].sort()).toEqual([1, 3]);
    // several unforceable ones: the latest of them and the latest forceable one
    const many = retentionPlan([snap(1, 'published', [], true), snap(2, 'blocked', [drop]), snap(3, 'blocked', [missing]), snap(4, 'blocked', [missing])], { keep: 3, rollbackTo: null });
    expect([...many.keep].sort()).toEqual([1, 2, 4]);
  });
});
