// The HTML quality report as people see it: rendered in headless Chromium (Debian's
// chromium, driven by puppeteer-core) from a file, offline, and checked on the page:
// counts, rejected rows with examples, the map's points over the loaded municipalities,
// the change per state against the previous snapshot and the trend across snapshots.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runPipeline } from '../src/etl/run.ts';
import { findPipeline } from '../pipelines/registry.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(__dirname, '..');
const ZARC = path.join(ROOT, 'fixtures/zarc');
let db: TestDb;
let work: string;
let browser: Browser;

async function load(pipeline: string, source: string) {
  const o = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline(pipeline)!, { source });
  expect(o.status, o.error?.message ?? o.message).toBe('published');
  return o;
}

/** `agro report <snapshot> --format html --out F`, then the page in Chromium (requests other than the file are recorded). */
async function openReport(snapshotId: number) {
  const file = path.join(work, `report-${snapshotId}.html`);
  const r = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), 'report', String(snapshotId), '--format', 'html', '--out', file], {
    env: { ...process.env, DATABASE_URL: db.url, AGRO_DATA_DIR: db.dataDir }, encoding: 'utf8',
  });
  expect(r.status, r.stderr).toBe(0);
  const page = await browser.newPage();
  const requests: string[] = [];
  page.on('request', (q) => requests.push(q.url()));
  await page.goto(`file://${file}`, { waitUntil: 'load' });
  return { page, requests, file };
}

beforeAll(async () => {
  db = await testDatabase();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'report-html-'));
  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    userDataDir: fs.mkdtempSync(path.join(os.tmpdir(), 'chromium-profile-')),
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await db?.drop();
  fs.rmSync(work, { recursive: true, force: true });
});

describe('HTML report in Chromium', () => {
  test('a polygon layer: counts, dropped rows with their source row, and the map of rejected and repaired geometries over the loaded municipalities', async () => {
    await load('ibge-municipios', path.join(ROOT, 'fixtures/ibge-municipios'));
    const o = await load('funai-tis', path.join(ROOT, 'fixtures/funai-tis'));
    const { page, requests, file } = await openReport(o.snapshot_id!);
    expect(requests).toEqual([`file://${file}`]); // self-contained: nothing else is fetched
    const counts = await page.$$eval('#counts td[data-count]', (tds) => Object.fromEntries(tds.map((td) => [td.getAttribute('data-count'), td.textContent])));
    expect(counts).toEqual({ read: String(o.rows_read), loaded: String(o.rows_loaded), rejected: '0', dropped: '1' });
    const dropped = await page.$$eval('#dropped tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(dropped.filter((r) => r.length)).toEqual([['duplicate_key', '1']]);
    const ex = await page.$$eval('table.examples[data-reason="duplicate_key"]', (ts) => ts.map((t) => ({
      head: [...t.querySelectorAll('thead th')].map((th) => th.textContent),
      rows: [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    })));
    expect(ex).toHaveLength(1);
    expect(ex[0].head.slice(0, 2)).toEqual(['source', 'row']);
    expect(ex[0].rows).toHaveLength(1);
    const row = Object.fromEntries(ex[0].head.map((h, i) => [h, ex[0].rows[0][i]]));
    expect(row).toMatchObject({ source: 'tis_poligonais', row: expect.stringMatching(/^\d+$/), codigo: expect.any(String), nome: expect.any(String) });
    expect(row.where).toMatch(/^-\d+(\.\d+)?, -\d+(\.\d+)?$/);
    // The map: one repaired and one dropped geometry, as points inside Brazil, over the loaded municipalities.
    const map = await page.$eval('svg#map', (svg) => ({
      rejected: [...svg.querySelectorAll('circle.rejected')].map((c) => [Number(c.getAttribute('cx')), -Number(c.getAttribute('cy'))]),
      repaired: svg.querySelectorAll('circle.repaired').length,
      municipalities: svg.querySelectorAll('path.municipio').length,
      coarse: svg.querySelectorAll('path.coarse').length,
      box: (svg as SVGSVGElement).getBoundingClientRect().width,
    }));
    const drawn = Number((await db.pool.query(`SELECT count(*) FROM serving.ibge_municipios WHERE geom IS NOT NULL`)).rows[0].count);
    expect(drawn).toBeGreaterThan(0);
    expect(map).toMatchObject({ repaired: 1, municipalities: drawn, coarse: 1 });
    expect(map.rejected).toHaveLength(1);
    const [lon, lat] = map.rejected[0];
    expect(lon).toBeGreaterThan(-74);
    expect(lon).toBeLessThan(-34);
    expect(lat).toBeGreaterThan(-34);
    expect(lat).toBeLessThan(6);
    expect(map.box).toBeGreaterThan(100); // drawn, not collapsed
    // The legend counts what is drawn (rows with a geometry), not the counts table's totals.
    expect(await page.$eval('svg#map', (svg) => svg.previousElementSibling?.textContent)).toMatch(/^ rejected or dropped rows with a geometry: 1 · {2}repaired geometries: 1 · \d+ municipalities drawn$/);
    expect(await page.$$eval('h2', (hs) => hs.map((h) => h.textContent))).toContain('Geometry');
    await page.close();
  });

  test('a second load: rejected rows with examples, the change per state against the previous snapshot, the trend of row counts', async () => {
    const first = path.join(work, 'zarc-1');
    fs.mkdirSync(first);
    const files = fs.readdirSync(ZARC).filter((f) => f.endsWith('.csv')).sort();
    for (const f of [files[0], files[2]]) fs.copyFileSync(path.join(ZARC, f), path.join(first, f));
    const a = await load('zarc', first);
    const b = await load('zarc', ZARC);
    const { page } = await openReport(b.snapshot_id!);
    const rejected = await page.$$eval('#rejected tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)).filter((r) => r.length));
    expect(rejected.reduce((n, r) => n + Number(r[1]), 0)).toBe(b.rows_rejected);
    const dropped = await page.$$eval('#dropped tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)).filter((r) => r.length));
    expect(dropped.reduce((n, r) => n + Number(r[1]), 0)).toBe(b.rows_dropped);
    const examples = await page.$$eval('table.examples', (ts) => ts.map((t) => ({ reason: t.getAttribute('data-reason'), rows: t.querySelectorAll('tbody tr').length })));
    // Every reason, rejected or dropped (the copies of a key too), has its examples: at most ten, at most its count.
    const reasons = [...rejected, ...dropped];
    expect(examples.map((e) => e.reason).sort()).toEqual(reasons.map((r) => r[0]).sort());
    for (const e of examples) expect(e.rows).toBe(Math.min(10, Number(reasons.find((r) => r[0] === e.reason)![1])));
    const change = await page.$$eval('#change-by-area tr', (trs) => trs.slice(1).map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(change.length).toBeGreaterThan(0);
    const totals = change.reduce((t, r) => [t[0] + Number(r[1]!.replace(/,/g, '')), t[1] + Number(r[2]!.replace(/,/g, ''))], [0, 0]);
    expect(totals).toEqual([a.rows_loaded, b.rows_loaded]);
    for (const r of change) expect(Number(r[3]!.replace(/[,+]/g, ''))).toBe(Number(r[2]!.replace(/,/g, '')) - Number(r[1]!.replace(/,/g, '')));
    const bars = await page.$$eval('svg#trend rect.bar', (rs) => rs.map((r) => ({ id: Number(r.getAttribute('data-snapshot')), h: Number(r.getAttribute('height')), me: r.classList.contains('this') })));
    expect(bars).toEqual([
      { id: a.snapshot_id, h: Math.round((a.rows_loaded / b.rows_loaded) * 100), me: false },
      { id: b.snapshot_id, h: 100, me: true },
    ]);
    // ZARC's tables have no geometry: no map of geometries, no Geometry section.
    expect(await page.$('svg#map')).toBeNull();
    expect(await page.$$eval('h2', (hs) => hs.map((h) => h.textContent))).not.toContain('Geometry');
    await page.close();
  });
});

describe('HTML report of hostile source text', () => {
  test('a value with <script> and <img>, a file name with quotes and angle brackets: shown as text, nothing runs or is fetched; the gate table lists each rule', async () => {
    const dir = path.join(work, 'hostile');
    fs.mkdirSync(dir);
    const lines = fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8').split('\n');
    // The term without a geometry (dropped: no_geometry) is shown among the examples.
    const i = lines.findIndex((l) => l.includes('Fazenda Porto Alegre'));
    const cells = lines[i].split(';');
    const header = lines[0].replace(/^\uFEFF/, '').split(';');
    cells[header.indexOf('MUNICIPIO')] = '<script>document.title="pwned"</script>';
    cells[header.indexOf('NOME_IMOVEL')] = 'Fazenda "Aspas" <img src="http://127.0.0.1:9/x.png"> & cia';
    lines[i] = cells.join(';');
    const name = 'termo "embargo" <b>.csv';
    fs.writeFileSync(path.join(dir, name), lines.join('\n'));
    const o = await load('ibama-embargos', path.join(dir, name));
    const { page, requests, file } = await openReport(o.snapshot_id!);
    expect(requests).toEqual([`file://${file}`]);
    expect(await page.title()).toMatch(/^Quality report ibama-embargos/);
    expect(await page.$$eval('script, img', (e) => e.length)).toBe(0);
    const texts = await page.$$eval('table.examples td', (tds) => tds.map((td) => td.textContent));
    expect(texts).toContain('<script>document.title="pwned"</script>');
    expect(texts).toContain('Fazenda "Aspas" <img src="http://127.0.0.1:9/x.png"> & cia');
    expect(await page.$$eval('h2', (hs) => hs.find((h) => h.textContent === 'Source files')?.nextElementSibling?.querySelector('th')?.textContent)).toBe(name);
    const rules = await page.$$eval('#gate-rules tr[data-rule]', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rules.map((r) => r[0])).toEqual(['empty', 'row_drop', 'rejected_share', 'replacement_characters', 'double_encoding', 'control_characters']);
    expect(rules.find((r) => r[0] === 'rejected_share')).toEqual(['rejected_share', `${((o.rows_rejected / o.rows_read) * 100).toFixed(2)} %`, '≤ 1.00 %', 'passed']);
    await page.close();
  });
  test('a very long value without spaces (an unknown status of 3,000 letters) wraps inside the page: nothing is wider than the window, the note is whole', async () => {
    const dir = path.join(work, 'long');
    fs.mkdirSync(dir);
    const lines = fs.readFileSync(path.join(ROOT, 'fixtures/ibama-embargos/termo_embargo.csv'), 'utf8').split('\n');
    const header = lines[0].replace(/^\uFEFF/, '').split(';');
    const i = lines.findIndex((l, n) => n > 0 && l.split(';')[header.indexOf('SIT_CANCELADO')] === 'N' && l.split(';').length === header.length);
    const cells = lines[i].split(';');
    const status = 'EMBARGO_' + 'X'.repeat(3000);
    cells[header.indexOf('DES_STATUS_FORMULARIO')] = status;
    lines[i] = cells.join(';');
    fs.writeFileSync(path.join(dir, 'termo_embargo.csv'), lines.join('\n'));
    const o = await load('ibama-embargos', path.join(dir, 'termo_embargo.csv'));
    const { page } = await openReport(o.snapshot_id!);
    await page.setViewport({ width: 1200, height: 900 });
    const notes = await page.$$eval('li', (lis) => lis.map((li) => li.textContent ?? ''));
    expect(notes.some((n) => n.includes(status))).toBe(true);
    // The page scrolls down, not sideways: the value wraps where it stands.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(1200);
    await page.close();
  });
});
