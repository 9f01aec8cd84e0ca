// The ZARC risk table as the API serves it (include=zarc, POST /v1/enriquecimento/territorial)
// when a municipality's rows differ only by climate variant (Cod_Clima / Nome_Clima, part of
// ZARC's key, SOURCES §7.7): each entry says which variant it is, so two entries with the same
// crop, season, cycle, soil and management are told apart.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ZARC_FILE_NAMES } from '../fixtures/zarc.ts';
import { zarc } from '../pipelines/zarc/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import { call, loadFixtures, newKey, startApi, type Running } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'zarc');
const MT1 = 'MT-5107925-5CB45324C71191225BEAAD888C3D51DB'; // in Sorriso (5107925)

let db: TestDb;
let api: Running;
let key: string;
let tmp: string;

beforeAll(async () => {
  db = await testDatabase();
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'api-zarc-'));
  await loadFixtures(db);
  // The season file again, with a second climate variant of one Sorriso row: same crop, season,
  // cycle, soil, management and portaria, another Cod_Clima/Nome_Clima and other risk cells.
  for (const name of Object.values(ZARC_FILE_NAMES)) fs.copyFileSync(path.join(FIXTURES, name), path.join(tmp, name));
  const file = path.join(tmp, ZARC_FILE_NAMES.s2025);
  const text = fs.readFileSync(file, 'utf8');
  const lines = text.split('\n');
  const header = lines[0].replace(/^\uFEFF/, '').split(';');
  const at = (h: string) => header.indexOf(h);
  const i = lines.findIndex((l, n) => n > 0 && l.split(';')[at('geocodigo')] === '5107925' && l.split(';')[at('Cod_Clima')] === '1');
  const cells = lines[i].split(';');
  cells[at('Cod_Clima')] = '2';
  cells[at('Nome_Clima')] = 'Clima Frio';
  for (let n = 1; n <= 36; n++) cells[at(`dec${n}`)] = n >= 10 && n <= 12 ? '40' : '0';
  lines.splice(i + 1, 0, cells.join(';'));
  fs.writeFileSync(file, lines.join('\n'));
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, zarc, { source: tmp });
  if (out.status !== 'published') throw new Error(`zarc: ${out.status} ${JSON.stringify(out.error ?? out.gate)}`);
  key = await newKey(db);
  api = await startApi(db.cfg, db.url, db);
}, 240_000);
afterAll(async () => {
  await api?.close();
  await db?.drop();
  fs.rmSync(tmp, { recursive: true, force: true });
});

type Entry = Record<string, unknown> & { risco_20: number[]; risco_30: number[]; risco_40: number[] };
const ident = (e: Record<string, unknown>) => JSON.stringify([e.cultura, e.safra, e.ciclo, e.solo, e.manejo, e.portaria, e.cod_clima]);

async function expectEntriesMatchRows(entries: Entry[]) {
  const rows = (await db.pool.query(`SELECT * FROM serving.zarc_risco WHERE geocodigo = '5107925'`)).rows;
  expect(entries).toHaveLength(rows.length);
  // Every entry names its row: no two entries share an identity.
  expect(new Set(entries.map(ident)).size).toBe(entries.length);
  for (const e of entries) {
    const w = rows.filter((z) => ident(z) === ident(e));
    expect(w, ident(e)).toHaveLength(1);
    expect(e.clima).toBe(w[0].clima);
    for (const level of [20, 30, 40]) expect(e[`risco_${level}`]).toEqual(Array.from({ length: 36 }, (_, n) => n + 1).filter((n) => w[0][`dec${n}`] === level));
  }
  const frio = entries.filter((e) => e.cod_clima === '2');
  expect(frio).toHaveLength(1);
  expect(frio[0]).toMatchObject({ clima: 'Clima Frio', risco_40: [10, 11, 12], risco_20: [], risco_30: [] });
}

describe('ZARC climate variants in the API', () => {
  test('GET /v1/car/{numero}?include=zarc: one entry per row, with cod_clima and clima', async () => {
    const r = await call(api.base, `/v1/car/${MT1}?include=zarc`, { key });
    expect(r.status).toBe(200);
    expect(r.body.zarc.geocodigo).toBe('5107925');
    await expectEntriesMatchRows(r.body.zarc.culturas);
  });

  test('POST /v1/enriquecimento/territorial: the same entries for the municipality', async () => {
    const [{ env }] = (await db.pool.query(`SELECT ST_AsGeoJSON(ST_Envelope(geom), 7) AS env FROM serving.car_imovel WHERE car = $1`, [MT1])).rows;
    const r = await call(api.base, '/v1/enriquecimento/territorial', { key, body: { geometry: JSON.parse(env), layers: ['zarc'] } });
    expect(r.status).toBe(200);
    const sorriso = r.body.zarc.find((z: { geocodigo: string }) => z.geocodigo === '5107925');
    await expectEntriesMatchRows(sorriso.culturas);
  });
});
