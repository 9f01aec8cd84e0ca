// A NUL byte inside a text cell (PostgreSQL text cannot hold U+0000) used to be dropped on
// the way into COPY, uncounted: NUM_TAD '57<NUL>48' published as '5748', another number, and a
// name lost a character, the run published clean. It is loaded as U+2400 ('␀') now, which the
// text check counts per column with examples, as it counts stray C1 controls: a note under 0.1 %
// of a table's rows, a block over it (U+FFFD stays for bytes invalid in the encoding).
// In a column kept in `extra` it failed the whole run: jsonb refuses the escape \u0000. A DBF
// field with text after a NUL is read up to the NUL, as GDAL reads it ('Goi<NUL>ânia' is
// 'Goi'): that loss was counted nowhere; it is now (fields.cutAtNul), by both readers.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { fileURLToPath } from 'node:url';
import { IBAMA_TERMS, ibamaCsv } from '../fixtures/ibama-embargos.ts';
import { buildLayerZip, writeLayer, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import { copyField, jsonText } from '../src/etl/copy.ts';
import { countShapefileCells } from '../src/etl/dbf-overflow.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { BinaryCopyWriter } from '../src/etl/read/binary-copy.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'nul-bytes-');

test('both COPY encoders load a NUL as U+2400, not as nothing', () => {
  expect(copyField('57\u000048')).toBe('57\u240048');
  expect(copyField('a\tb\u0000')).toBe('a\\tb\u2400');
  const w = new BinaryCopyWriter();
  w.text('Jo\u0000sé');
  expect(w.take().toString('utf8')).toContain('Jo\u2400sé');
});

test('JSON for extra writes an escaped NUL as U+2400, keys included, and leaves an escaped backslash before u0000 alone', () => {
  expect(JSON.parse(jsonText({ a: 'x\u0000y', 'k\u0000': 'z' }))).toEqual({ a: 'x\u2400y', 'k\u2400': 'z' });
  expect(JSON.parse(jsonText({ a: '\\u0000', b: '\\\u0000' }))).toEqual({ a: '\\u0000', b: '\\\u2400' });
  expect(jsonText({ a: 'ação' })).toBe(JSON.stringify({ a: 'ação' }));
});

test('a NUL in an unknown column (kept in extra) is counted there, not a failed run', async () => {
  const a = IBAMA_TERMS.find((t) => t.role === 'filler' && t.row.SEQ_TAD)!;
  const terms = IBAMA_TERMS.map((t) => (t === a ? { ...t, row: { ...t.row, FORMA_ENTREGA: 'Por\u0000correio' } } : t));
  const file = path.join(tmp, 'extra', 'termo_embargo.csv');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, ibamaCsv({ terms, renameColumns: { FORMA_ENTREGA: 'FORMA_ENTREGA_NOVA' } }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('blocked');
  // one row of a small fixture: over the 0.1 % share, so it blocks (a national file's few would be a note)
  expect(out.gate!.failures.find((f) => f.rule === 'control_characters')!.message).toMatch(/or NULs.*\.extra 1/);
  const r = await db.pool.query(`SELECT extra->>'forma_entrega_nova' AS v FROM snap."ibama_embargos__s${out.snapshot_id}" WHERE seq_tad = $1`, [a.row.SEQ_TAD]);
  expect(r.rows[0].v).toBe('Por\u2400correio');
}, 120_000);

test('an IBAMA CSV with NULs in NUM_TAD and a name: counted per column by the text check, the gate blocks, nothing shortened', async () => {
  const [a, b] = IBAMA_TERMS.filter((t) => t.role === 'filler' && t.row.SEQ_TAD && t.row.DES_STATUS_FORMULARIO === 'Lavrado');
  const terms = IBAMA_TERMS.map((t) =>
    t === a ? { ...t, row: { ...t.row, NUM_TAD: '57\u000048' } } : t === b ? { ...t, row: { ...t.row, NOME_EMBARGADO: 'Jo\u0000sé Nulo' } } : t,
  );
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('blocked');
  expect(out.gate!.failures.some((f) => f.rule === 'replacement_characters')).toBe(false); // no encoding problem
  const failure = out.gate!.failures.find((f) => f.rule === 'control_characters')!;
  expect(failure.message).toMatch(/or NULs.*numero_tad 1.*nome_embargado 1|or NULs.*nome_embargado 1.*numero_tad 1/);
  const row = async (seq: string) =>
    (await db.pool.query(`SELECT numero_tad, nome_embargado FROM snap."ibama_embargos__s${out.snapshot_id}" WHERE seq_tad = $1`, [seq])).rows[0];
  expect((await row(a.row.SEQ_TAD)).numero_tad).toBe('57\u240048');
  expect((await row(b.row.SEQ_TAD)).nome_embargado).toBe('Jo\u2400sé Nulo');
}, 120_000);

test('a DBF text field with text after a NUL: read up to the NUL as GDAL reads it, and counted by both readers; NULs that only pad it are no loss', async () => {
  const dir = path.join(tmp, 'sicar', 'GO');
  fs.mkdirSync(dir, { recursive: true });
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'sicar', 'GO');
  for (const f of fs.readdirSync(fixture)) if (f !== 'GO_AREA_IMOVEL.zip') fs.copyFileSync(path.join(fixture, f), path.join(dir, f));
  const [a, b] = SICAR_FIXTURES.GO.areaImovel.filter((p) => p.role === 'plain' || p.role === 'hole');
  const rows: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => ({
    geometry: r.geometry,
    attributes: { ...r.attributes, ...(r === a ? { municipio: 'Goi\u0000ânia' } : r === b ? { municipio: 'Rio Verde\u0000\u0000\u0000' } : {}) },
  }));
  const format = { encoding: 'utf8', cpg: 'UTF-8' } as const;
  await buildLayerZip(path.join(dir, 'GO_AREA_IMOVEL.zip'), 'GO_AREA_IMOVEL', AREA_IMOVEL_FIELDS, rows, format);
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO' });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');
  const municipio = async (car: string) => (await db.pool.query(`SELECT municipio FROM "current".car_imovel WHERE car = $1`, [car])).rows[0].municipio;
  expect(await municipio(a.attributes.cod_imovel)).toBe('Goi');
  expect(await municipio(b.attributes.cod_imovel)).toBe('Rio Verde');
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.fields.cutAtNul).toEqual({ 'area_imovel:municipio': 1 }); // per input, as overflowed cells are
  expect(q.facts.notes.join('\n')).toMatch(/text after a NUL byte, loaded up to the NUL .*"area_imovel:municipio":1/);
  // The GDAL reader's count: one pass over the same DBF.
  const shp = (await writeLayer(path.join(tmp, 'gdal'), 'GO_AREA_IMOVEL', AREA_IMOVEL_FIELDS, rows, format)).find((f) => f.endsWith('.shp'))!;
  expect(await countShapefileCells(shp)).toEqual({ overflowed: {}, cutAtNul: { municipio: 1 } });
}, 120_000);
