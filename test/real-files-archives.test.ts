// Zips repacked on a Mac (the manual-drop path), through real runs against PostGIS: macOS
// adds a resource fork for every member, `__MACOSX/<dir>/._<name>` (Archive Utility) or
// `._<name>` beside it (zip and tar on macOS): binary AppleDouble headers named like the data.
// They are not data: the layer and the CSV load as from the clean zip.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { FUNAI_DBF_FIELDS, FUNAI_FIXTURE } from '../fixtures/funai-tis.ts';
import { ibamaCsv } from '../fixtures/ibama-embargos.ts';
import { writeLayer } from '../fixtures/readers.ts';
import { zipFiles } from '../fixtures/lib/shapefile-writer.ts';
import { funaiTis } from '../pipelines/funai-tis/index.ts';
import { ibamaEmbargos } from '../pipelines/ibama-embargos/index.ts';
import type { Pipeline } from '../src/etl/pipeline.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'archives-test-');

/** An AppleDouble file as macOS writes it for a member (magic 0x00051607, version 2, 'Mac OS X' filler). */
const APPLE_DOUBLE = Buffer.concat([Buffer.from('0005160700020000', 'hex'), Buffer.from('Mac OS X        ', 'latin1'), Buffer.from('000200000009000000320000000a00000002000000', 'hex'), Buffer.alloc(4030)]);

type Fork = 'macosx-folder' | 'beside';
/** The zip of `files`, with a resource fork for each member the way `fork` places it. */
async function zipWithForks(zipPath: string, files: { path: string; name: string }[], fork: Fork | null): Promise<string> {
  const forkFile = path.join(tmp, 'apple-double.bin');
  fs.writeFileSync(forkFile, APPLE_DOUBLE);
  const forks = fork ? files.map((f) => ({ path: forkFile, name: fork === 'beside' ? `._${f.name}` : `__MACOSX/._${f.name}` })) : [];
  fs.mkdirSync(path.dirname(zipPath), { recursive: true });
  // Archive Utility lists every fork after the data; zip on the command line puts each beside its file.
  await zipFiles(zipPath, fork === 'beside' ? files.flatMap((f, i) => [forks[i], f]) : [...files, ...forks]);
  return zipPath;
}

const run = (p: Pipeline, source: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, p, { source, force: true });

describe('resource forks in a zip repacked on a Mac', () => {
  test('FUNAI: the shapefile loads as from the clean zip, with either layout of forks', async () => {
    const work = path.join(tmp, 'funai-layer');
    fs.mkdirSync(work);
    const files = (await writeLayer(work, 'tis_poligonais', FUNAI_DBF_FIELDS, FUNAI_FIXTURE.map((r) => ({ geometry: r.geometry, attributes: { ...r.attributes } })), { encoding: 'utf8', cpg: 'UTF-8' }))
      .map((p) => ({ path: p, name: path.basename(p) }));
    const published = async () => (await db.pool.query(`SELECT codigo, nome, ST_AsText(geom) AS g FROM serving.funai_tis ORDER BY codigo`)).rows;
    const clean = await run(funaiTis, await zipWithForks(path.join(tmp, 'funai-clean', 'tis_poligonais.zip'), files, null));
    expect(clean.status).toBe('published');
    const want = await published();
    for (const fork of ['macosx-folder', 'beside'] as const) {
      const out = await run(funaiTis, await zipWithForks(path.join(tmp, `funai-${fork}`, 'tis_poligonais.zip'), files, fork));
      expect(out.error, fork).toBeUndefined();
      expect(out, fork).toMatchObject({ status: 'published', rows_read: clean.rows_read, rows_loaded: clean.rows_loaded });
      expect(await published(), fork).toEqual(want);
    }
  });

  test('IBAMA: a zip holding the CSV and its fork reads the CSV', async () => {
    const csv = path.join(tmp, 'ibama-csv', 'termo_embargo.csv');
    fs.mkdirSync(path.dirname(csv), { recursive: true });
    fs.writeFileSync(csv, ibamaCsv(), 'utf8');
    const clean = await run(ibamaEmbargos, csv);
    expect(clean.status).toBe('published');
    const out = await run(ibamaEmbargos, await zipWithForks(path.join(tmp, 'ibama-zip', 'termo_embargo_csv.zip'), [{ path: csv, name: 'termo_embargo.csv' }], 'macosx-folder'));
    expect(out.error).toBeUndefined();
    expect(out).toMatchObject({ status: 'published', rows_read: clean.rows_read, rows_loaded: clean.rows_loaded, rows_rejected: clean.rows_rejected });
  });
});
