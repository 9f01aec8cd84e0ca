// The quality report tells the truth about the snapshot it describes: every number in it is
// counted again here, independently, on the snapshot's tables (real PostGIS, real files).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, buildSicarState, SICAR_FIXTURES, THEME_FIELDS, type SicarPropertyRow } from '../fixtures/sicar.ts';
import { brazilDateTime } from '../src/dates.ts';
import { carTitulares } from '../pipelines/car-titulares/index.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { zarc } from '../pipelines/zarc/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'report-truth-');

const qualityOf = async (snapshotId: number): Promise<QualityReport> =>
  (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [snapshotId])).rows[0].quality;

/** Per key of `extra` that is also a column left NULL: how many rows of the table keep its source text. */
async function keptRaw(table: string): Promise<Record<string, number>> {
  const r = await db.pool.query(
    `SELECT k, count(*)::int AS n FROM ${table} t, jsonb_object_keys(t.extra) k
      WHERE EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = k AND NOT attisdropped)
        AND (to_jsonb(t) -> k) = 'null'::jsonb GROUP BY 1`,
    [table],
  );
  return Object.fromEntries(r.rows.map((x) => [x.k, x.n]));
}

test('SICAR: values kept raw are counted on the rows loaded, not on the copies dropped (other state, older duplicate), themes included', async () => {
  const dir = path.join(tmp, 'sicar-dropped-bad', 'GO');
  const fx = SICAR_FIXTURES.GO;
  const damaged = (r: SicarPropertyRow): SicarPropertyRow => ({ ...r, attributes: { ...r.attributes, dat_criaca: '31/02/2016' } });
  // GO7 lies in MT (dropped: other_state), GO5a is the older copy of GO5 (dropped: duplicate_car): both carry an impossible date.
  const rows = fx.areaImovel.map((r) => (r.id === 'GO7' || r.id === 'GO5a' ? damaged(r) : r));
  await buildSicarState('GO', dir, { filter: (_, i) => i >= fx.areaImovel.length, extraAreaImovel: rows });
  // An APPS polygon of the MT property (dropped: apps:other_state) whose area is text and whose status is unknown.
  const go7 = fx.areaImovel.find((r) => r.id === 'GO7')!;
  const apps = fx.themeRows.filter((r) => r.theme === 'APPS');
  const textFields = THEME_FIELDS.map((f) => (f.name === 'num_area' ? { name: 'num_area', type: 'C' as const, length: 30 } : f));
  const themeRows: LayerRow[] = [
    ...apps.map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes, num_area: String(r.attributes.num_area) } })),
    { geometry: apps[0].geometry, attributes: { ...apps[0].attributes, cod_imovel: go7.attributes.cod_imovel, num_area: '12,5 ha', ind_status: 'XX' } },
  ];
  await buildLayerZip(path.join(dir, 'GO_APPS.zip'), 'GO_APPS', textFields, themeRows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: dir });
  expect([out.status, out.error]).toEqual(['published', undefined]);
  const q = await qualityOf(out.snapshot_id!);
  expect(q.facts.dropped).toMatchObject({ other_state: 1, duplicate_car: 1, 'apps:other_state': 1 });
  // Counted again on the snapshot: nothing is kept raw, so the report counts nothing kept raw.
  expect(await keptRaw(`snap."car_imovel__s${out.snapshot_id}"`)).toEqual({});
  expect(await keptRaw(`snap."car_tema__s${out.snapshot_id}"`)).toEqual({});
  expect(q.facts.dates.unparseable).toEqual({});
  expect(q.facts.fields.unparsed ?? {}).toEqual({});
  expect(q.facts.notes.join('\n')).not.toMatch(/ind_status code "XX"|not numbers/);
  // The placeholder of GO6 (loaded) is still counted.
  expect(q.facts.dates.placeholders).toEqual({ dat_criaca: 1 });
});

test('ZARC: risk cells and codes kept raw are counted on the rows loaded, not on a copy dropped (last read wins) or a row rejected', async () => {
  const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'zarc');
  const dir = path.join(tmp, 'zarc-dropped-bad');
  fs.mkdirSync(dir, { recursive: true });
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const file = path.join(dir, 'dados-abertos-tabua-de-risco-safra-2025-2026.csv');
  const lines = fs.readFileSync(file, 'utf8').split('\r\n');
  const header = lines[0].replace(/^\uFEFF/, '').split(';');
  const col = (name: string) => header.indexOf(name);
  // The fixture's record 7 holds a risk cell "25" (dec30): a later copy of its key with "20" wins, so "25" is not loaded.
  const rec7 = lines[7].split(';');
  expect(rec7[col('dec30')]).toBe('25');
  const later = [...rec7];
  later[col('dec30')] = '20';
  // A row rejected (a geocodigo that is not one) with an invalid cell and a code that is not digits.
  const rejected = [...rec7];
  rejected[col('geocodigo')] = '99';
  rejected[col('dec1')] = '77';
  rejected[col('Cod_Meso')] = 'x1';
  const last = lines.at(-1) === '' ? lines.length - 1 : lines.length;
  lines.splice(last, 0, later.join(';'), rejected.join(';'));
  fs.writeFileSync(file, lines.join('\r\n'));

  // Two rejected rows of 107 are over the gate's 1 %: published with --force.
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, zarc, { source: dir, force: true });
  expect([out.status, out.error]).toEqual(['published', undefined]);
  const q = await qualityOf(out.snapshot_id!);
  expect(q.facts.rejected.bad_geocodigo).toBe(2);
  expect(q.facts.dropped.conflicting_duplicate).toBe(2);
  const table = `snap."zarc_risco__s${out.snapshot_id}"`;
  // Counted again on the snapshot: no risk cell and no code is kept raw.
  expect(await keptRaw(table)).toEqual({});
  expect(q.facts.fields.unparsed ?? {}).toEqual({});
  const z = (q.facts as unknown as { zarc: { invalid_risk: { cells: number; rows: number; values: object }; bad_codes: number } }).zarc;
  expect(z.invalid_risk).toMatchObject({ cells: 0, rows: 0, values: {} });
  expect(z.bad_codes).toBe(0);
  expect(q.facts.notes.join('\n')).not.toMatch(/risk cells in|non-numeric optional code/);
  // Every reason has its examples, the copies dropped included (the fixture's exact duplicate and the two conflicting ones).
  expect(q.facts.dropped).toEqual({ duplicate_row: 1, conflicting_duplicate: 2 });
  for (const [reason, n] of Object.entries({ ...q.facts.rejected, ...q.facts.dropped })) {
    expect(q.facts.examples?.[reason]?.length, reason).toBe(Math.min(n, 10));
  }
  // Record 7 (its "25" not loaded) lost to the copy appended after it.
  // Named by its file and its record there (src_seq runs on across the seasons' files: record 7 of the second file was row 'firstFile + 7' of no file).
  const inFile = (e: { source: string | null; row: number | null }) => e.source === path.basename(file) && e.row === 7;
  expect(q.facts.examples!.conflicting_duplicate.filter(inFile)).toHaveLength(1);
  expect(q.facts.examples!.conflicting_duplicate.find(inFile)!.line).toBe(8); // below the header line
  expect(q.facts.examples!.conflicting_duplicate.find(inFile)!.values).toMatchObject({ geocodigo: rec7[col('geocodigo')], dec30: null });
  for (const e of Object.values(q.facts.examples!).flat()) expect(e.source).toMatch(/^dados-abertos-tabua-de-risco-safra-.*\.csv$/);
});

/** `agro report <arg> [--format html]`: its exit code, stdout and stderr. */
function agroReport(...args: string[]) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'report', ...args], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir }, encoding: 'utf8',
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('a blocked run: agro report r<run> lists every gate rule with its measured value and threshold, in JSON and in the HTML; the counts add up on the file and the table', async () => {
  const dir = path.join(tmp, 'titulares-blocked');
  fs.mkdirSync(dir, { recursive: true });
  const lines = fs.readFileSync(path.join(ROOT, 'fixtures/car-titulares/titulares.csv'), 'utf8').split('\n');
  // Two rows with the wrong field count besides the fixture's three invalid rows: 5 of 318 rejected, over 1 %.
  lines.splice(11, 0, 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2;529.982.247-25;José;proprietario;extra');
  lines.splice(22, 0, 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2;529.982.247-25;proprietario');
  fs.writeFileSync(path.join(dir, 'titulares.csv'), lines.join('\n'));
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir });
  expect(out.status).toBe('blocked');

  const r = agroReport(`r${out.run_id}`, '--json');
  expect(r.code, r.stderr).toBe(0);
  const q: QualityReport = JSON.parse(r.stdout);
  // Counted again: records in the file (header and the final empty line aside), rows in the blocked snapshot's table.
  const records = lines.slice(1).filter((l) => l.trim() !== '').length;
  const loaded = (await db.pool.query(`SELECT count(*)::int AS n FROM snap."car_titulares__s${out.snapshot_id}"`)).rows[0].n;
  expect(q.counts.read).toBe(records);
  expect(q.counts.loaded).toBe(loaded);
  expect(q.counts.read).toBe(q.counts.loaded + q.counts.rejected + q.counts.dropped);
  expect(q.facts.rejected).toEqual({ bad_field_count: 2, bad_vinculo: 1, bad_document: 1, bad_car_number: 1 });
  expect(r.stdout).not.toContain('529.982.247-25');
  // Every rule, measured: the failing one with its value and threshold, the others passed.
  const share = q.counts.rejected / q.counts.read;
  expect(q.gate.passed).toBe(false);
  expect(q.gate.rules).toEqual([
    { rule: 'empty', value: loaded, threshold: 0, compare: 'above', passed: true },
    { rule: 'row_drop', value: null, threshold: 0.2, compare: 'at_most', passed: true },
    { rule: 'rejected_share', value: share, threshold: 0.01, compare: 'at_most', passed: false },
    { rule: 'replacement_characters', value: 0, threshold: 0, compare: 'at_most', passed: true },
    { rule: 'double_encoding', value: 0, threshold: 0, compare: 'at_most', passed: true },
    { rule: 'control_characters', value: 0, threshold: 0.001, compare: 'at_most', passed: true },
  ]);

  const h = agroReport(`r${out.run_id}`, '--format', 'html');
  expect(h.code, h.stderr).toBe(0);
  const row = (rule: string) => h.stdout.match(new RegExp(`<tr data-rule="${rule}">(.*?)</tr>`))?.[1].replace(/<[^>]+>/g, '|');
  expect(row('rejected_share')).toBe(`|rejected_share||${(share * 100).toFixed(2)} %||≤ 1.00 %||failed|`);
  expect(row('empty')).toBe(`|empty||${loaded}||&gt; 0||passed|`);
  expect(row('row_drop')).toBe('|row_drop||—||≤ 20.00 %||passed|');
  expect(h.stdout.match(/<td class="n" data-count="(\w+)">([\d,]+)</g)?.map((m) => m.replace(/.*data-count="(\w+)">([\d,]+)</, '$1=$2'))).toEqual([
    `read=${q.counts.read}`, `loaded=${q.counts.loaded}`, `rejected=${q.counts.rejected}`, `dropped=${q.counts.dropped}`,
  ]);
  expect(h.stdout).toContain('Gate: <strong class="bad">blocked</strong>');

  // Published with agro publish --force: the report says so (it said "blocked", forced false, of the snapshot served).
  const pub = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'publish', String(out.snapshot_id), '--force', '--json'], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir }, encoding: 'utf8',
  });
  expect(pub.status, pub.stderr).toBe(0);
  const after: QualityReport = JSON.parse(agroReport(`s${out.snapshot_id}`, '--json').stdout);
  expect(after.gate).toMatchObject({ passed: false, forced: true, failures: [{ rule: 'rejected_share' }] });
  expect(agroReport(`s${out.snapshot_id}`, '--format', 'html').stdout).toContain('Gate: <strong class="bad">failed, published with --force</strong>');
  // And so do the files the run wrote (the path its outcome printed).
  expect(JSON.parse(fs.readFileSync(out.report!, 'utf8')).gate).toMatchObject({ passed: false, forced: true });
  expect(fs.readFileSync(out.report!.replace(/\.json$/, '.html'), 'utf8')).toContain('failed, published with --force');
});

test('agro report r<run> of a run that found its source unchanged says it loaded nothing and whose report it shows', async () => {
  const dir = path.join(tmp, 'titulares-twice');
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'fixtures/car-titulares/titulares.csv'), path.join(dir, 'titulares.csv'));
  const first = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir, force: true });
  const again = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir });
  expect(again).toMatchObject({ status: 'unchanged', snapshot_id: first.snapshot_id });
  const q: QualityReport = JSON.parse(agroReport(`r${again.run_id}`, '--json').stdout);
  // Before: the identical snapshot's report, its own run and counts, as if this run had read them.
  expect(q.facts.notes[0]).toMatch(new RegExp(`^run ${again.run_id} loaded nothing \\(source identical to snapshot ${first.snapshot_id} \\(sha256 [0-9a-f]{12}…\\)\\): this is the report of snapshot ${first.snapshot_id} \\(run ${first.run_id}\\)$`));
  expect(q.run_id).toBe(first.run_id);
});

test('IBAMA: the examples of dropped terms show no personal data, documento_hmac included (a CPF is found again from its HMAC by trying every CPF)', async () => {
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv') });
  expect([out.status, out.error]).toEqual(['published', undefined]);
  const q = await qualityOf(out.snapshot_id!);
  // Counted again on the table.
  const loaded = (await db.pool.query(`SELECT count(*)::int AS n FROM snap."ibama_embargos__s${out.snapshot_id}"`)).rows[0].n;
  expect(q.counts.loaded).toBe(loaded);
  expect(q.counts.read).toBe(q.counts.loaded + q.counts.rejected + q.counts.dropped);
  const examples = Object.values(q.facts.examples ?? {}).flat();
  expect(examples.length).toBeGreaterThan(0);
  for (const e of examples) expect(Object.keys(e.values).filter((k) => ['documento', 'nome_embargado', 'documento_hmac'].includes(k))).toEqual([]);
  // Each example names the line its record starts on in the file (a description with a line
  // break before it makes that another number than the record's), where an editor finds it.
  const lines = fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8').split(/\r?\n/);
  const seqs = examples.filter((e) => typeof e.values.seq_tad === 'string' && e.values.seq_tad !== '');
  expect(seqs.length).toBeGreaterThan(0);
  expect(seqs.some((e) => e.line !== e.row! + 1)).toBe(true); // the fixture's line breaks come before some of them
  for (const e of seqs) expect(lines[e.line! - 1].split(';')[0], `${e.source} record ${e.row}`).toBe(e.values.seq_tad);
});

test('SICAR: every reason of the report has its examples, the older copy of a CAR number (duplicate_car) included, shown as the other rows are', async () => {
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: path.join(ROOT, 'fixtures/sicar/GO') });
  expect([out.status, out.error]).toEqual(['published', undefined]);
  const q = await qualityOf(out.snapshot_id!);
  const loaded = (await db.pool.query(`SELECT count(*)::int AS n FROM snap."car_imovel__s${out.snapshot_id}"`)).rows[0].n;
  expect(q.counts).toEqual({ read: SICAR_FIXTURES.GO.areaImovel.length, loaded, rejected: 0, dropped: 2 });
  expect(q.facts.dropped).toEqual({ other_state: 1, duplicate_car: 1 });
  for (const [reason, n] of Object.entries({ ...q.facts.rejected, ...q.facts.dropped })) {
    expect(q.facts.examples?.[reason]?.length, reason).toBe(Math.min(n, 10));
  }
  const older = SICAR_FIXTURES.GO.areaImovel.find((r) => r.role === 'duplicate-old')!;
  expect(q.facts.examples!.duplicate_car).toEqual([{
    source: 'GO_AREA_IMOVEL_1', row: SICAR_FIXTURES.GO.areaImovel.indexOf(older) + 1,
    values: expect.objectContaining({ car: older.attributes.cod_imovel, dat_atuali: older.attributes.dat_atuali }),
    lon: expect.any(Number), lat: expect.any(Number),
  }]);
  // The loaded copy is the other one.
  const kept = (await db.pool.query(`SELECT data_atualizacao::text AS d FROM snap."car_imovel__s${out.snapshot_id}" WHERE car = $1`, [older.attributes.cod_imovel])).rows;
  expect(kept).toEqual([{ d: '2023-08-15' }]);
  expect(q.facts.locations!.rejected).toHaveLength(2);
});

test('the report says whether its snapshot is served and what to do: current, blocked (agro publish <id> --force), a backfill kept beside the current one', async () => {
  const base = path.join(tmp, 'publication');
  const build = async (name: string, opts: Parameters<typeof buildSicarState>[2]) => {
    const dir = path.join(base, name, 'MT');
    await buildSicarState('MT', dir, opts);
    return dir;
  };
  const run = async (source: string, o: { asOf?: string; backfill?: boolean } = {}) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'MT', source, ...o });
  const first = await run(await build('full', {}));
  expect(first.status).toBe('published');
  const blocked = await run(await build('half', { dropEveryOther: true }));
  expect(blocked.status).toBe('blocked');
  const older = await run(await build('older', { filter: (_, i) => i > 0 }), { asOf: '2024-01-01', backfill: true });
  expect(older.status).toBe('loaded');

  type WithPublication = QualityReport & { publication: { status: string; current_snapshot_id: number | null; says: string } };
  const json = (arg: string): WithPublication => JSON.parse(agroReport(arg, '--json').stdout);
  const html = (arg: string) => agroReport(arg, '--format', 'html').stdout.match(/<p id="publication"[^>]*>(.*?)<\/p>/s)?.[1].replace(/<[^>]+>/g, '') ?? '';

  const b = json(`r${blocked.run_id}`);
  expect(b.publication).toMatchObject({ status: 'blocked', current_snapshot_id: first.snapshot_id });
  // What to do: the command that publishes it anyway, and that the served snapshot is untouched.
  expect(b.publication.says).toContain(`agro publish ${blocked.snapshot_id} --force`);
  expect(b.publication.says).toContain(`snapshot ${first.snapshot_id} is`);
  expect(html(`r${blocked.run_id}`)).toContain(`agro publish ${blocked.snapshot_id} --force`);
  // The page the run wrote (the path it printed) says what to do too.
  expect(fs.readFileSync(blocked.report!.replace(/\.json$/, '.html'), 'utf8')).toContain(`agro publish ${blocked.snapshot_id} --force`);

  // A backfill: its gate passed, yet it is not served; the current snapshot it was compared with is newer.
  const o = json(`r${older.run_id}`);
  expect(o.gate.passed).toBe(true);
  expect(o.publication).toMatchObject({ status: 'loaded', current_snapshot_id: first.snapshot_id });
  expect(o.publication.says).toMatch(/not current/);
  expect(html(`s${older.snapshot_id}`)).toMatch(new RegExp(`not current.*snapshot ${first.snapshot_id}`));
  // What it was compared with is dated after it: said so, with that date (it read 'the previous snapshot').
  const page = agroReport(`s${older.snapshot_id}`, '--format', 'html').stdout;
  expect(page).toContain('<h2>Change against the snapshot current at load time (dated after this one)</h2>');
  expect(page).toContain(`<tr><th>previous snapshot</th><td>${first.snapshot_id} (as of ${first.as_of})</td></tr>`);

  expect(o.publication.says).toContain('as_of reads of 2024-01-01 answer from it');
  // A backfill dated as the current snapshot is: as_of reads of that date answer from the current
  // one (the API's order: within a date, the current snapshot first), not from it, as it said.
  const sameDay = await run(await build('same-day', { mtime: new Date(2024, 5, 1) }), { asOf: first.as_of!, backfill: true }); // other bytes, the same rows
  expect(sameDay.status).toBe('loaded');
  const sd = json(`r${sameDay.run_id}`);
  expect(sd.publication).toMatchObject({ status: 'loaded', current_snapshot_id: first.snapshot_id });
  expect(sd.publication.says).not.toContain('answer from it');
  expect(sd.publication.says).toContain(`as_of reads of ${first.as_of} answer from snapshot ${first.snapshot_id}`);

  expect(json(`s${first.snapshot_id}`).publication).toMatchObject({ status: 'current', current_snapshot_id: first.snapshot_id });
  expect(html(`s${first.snapshot_id}`)).toMatch(/current/);

});

test('the page gives the time of the run in Brasília time, as its dates are (the JSON keeps the instant)', async () => {
  const dir = path.join(tmp, 'titulares-clock');
  fs.mkdirSync(dir, { recursive: true });
  fs.copyFileSync(path.join(ROOT, 'fixtures/car-titulares/titulares.csv'), path.join(dir, 'titulares.csv'));
  fs.appendFileSync(path.join(dir, 'titulares.csv'), '\n'); // bytes of their own: not the earlier tests' snapshot
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, carTitulares, { source: dir, force: true });
  expect(out.snapshot_id).toBeTruthy();
  const q: QualityReport = JSON.parse(agroReport(`s${out.snapshot_id}`, '--json').stdout);
  expect(q.generated_at).toMatch(/Z$/);
  const page = agroReport(`s${out.snapshot_id}`, '--format', 'html').stdout;
  expect(page).toContain(`generated ${brazilDateTime(new Date(q.generated_at))} (Brasília time)`);
  expect(page).not.toContain(q.generated_at);
});

test("SICAR's theme rows dropped (older layout, not linked) are told apart on the page from the counts' rows: each group's reasons add up to its total", async () => {
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'GO', source: path.join(ROOT, 'fixtures/sicar-municipal/GO'), force: true });
  expect(out.error).toBeUndefined();
  const q = await qualityOf(out.snapshot_id!);
  // The counts are AREA_IMOVEL's; the APPS polygons linked to no property carry their prefix.
  expect(q.facts.dropped).toEqual({ other_state: 1, duplicate_car: 1, 'apps:not_linked_ambiguous': 1, 'apps:not_linked_no_property': 1 });
  expect(q.counts.dropped).toBe(2);
  const page = agroReport(`s${out.snapshot_id}`, '--format', 'html').stdout;
  const table = page.match(/<table id="dropped">(.*?)<\/table>/s)![1];
  const rows = [...table.matchAll(/<tr([^>]*)>(.*?)<\/tr>/gs)].map((m) => [m[1].trim(), ...[...m[2].matchAll(/<t[dh][^>]*>(.*?)<\/t[dh]>/g)].map((c) => c[1])]);
  expect(rows).toEqual([
    ['', 'reason', 'rows'],
    ['', 'other_state', '1'],
    ['', 'duplicate_car', '1'],
    ['class="total"', 'total (the counts above)', '2'],
    ['class="input"', 'apps:not_linked_ambiguous', '1'],
    ['class="input"', 'apps:not_linked_no_property', '1'],
    ['class="total"', 'total of apps (another input, not in the counts above)', '2'],
  ]);
});

test('a CPF in a numeric column of a new export (kept in extra, a JSON number) is masked in the report examples, JSON and HTML', async () => {
  const dir = path.join(tmp, 'sicar-cpf-number', 'DF');
  fs.mkdirSync(dir, { recursive: true });
  const fx = SICAR_FIXTURES.DF;
  // A column SICAR does not publish: a responsible person's CPF as a DBF number. The last row is written in GO (dropped: other_state, an example).
  const fields = [...AREA_IMOVEL_FIELDS, { name: 'cpf_resp', type: 'N' as const, length: 11 }];
  const rows: LayerRow[] = fx.areaImovel.map((r, i) => ({
    geometry: r.geometry,
    attributes: { ...r.attributes, cpf_resp: 52998224725, ...(i === fx.areaImovel.length - 1 && { cod_estado: 'GO', cod_imovel: SICAR_FIXTURES.GO.areaImovel[0].attributes.cod_imovel }) },
  }));
  await buildLayerZip(path.join(dir, 'DF_AREA_IMOVEL.zip'), 'DF_AREA_IMOVEL', fields, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { uf: 'DF', source: dir, force: true });
  expect(out.error).toBeUndefined();
  const q = await qualityOf(out.snapshot_id!);
  expect(q.facts.dropped).toMatchObject({ other_state: 1 });
  expect(q.facts.examples!.other_state[0].values.extra).toMatchObject({ cpf_resp: expect.anything() });
  for (const text of [JSON.stringify(q), agroReport(`s${out.snapshot_id}`, '--json').stdout, agroReport(`s${out.snapshot_id}`, '--format', 'html').stdout, fs.readFileSync(out.report!.replace(/\.json$/, '.html'), 'utf8')]) {
    expect(text).not.toContain('52998224725');
    expect(text).toContain('***.982.247-**');
  }
});
