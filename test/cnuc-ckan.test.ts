// CNUC's resource ids change with every release (SOURCES §5.1): the newest shp_cnuc_YYYY_MM
// zip is discovered through MMA's CKAN API (package_show), by the YYYY_MM in its name, never by
// its UUID; the default source is the package_show URL. Against a CKAN answer and the zips
// served over loopback: the 2024_10 release is fetched (not 2024_02, listed first, nor a PDF),
// its YYYY_MM is the snapshot's as_of; an answer without a shp_cnuc zip fails clearly.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { cnucUcs, pickCnucResource } from '../pipelines/cnuc-ucs/index.ts';
import { loadConfig } from '../src/config.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'cnuc-ucs', 'shp_cnuc_2024_10.zip');
let db: TestDb;
usesTestDatabase((d) => (db = d));

const DATASET = '44b6dc8a-dc82-4a84-8d95-1b0da7c85dac';
const resource = (base: string, id: string, name: string, file: string, format = 'ZIP') =>
  ({ id, name, format, url: `${base}/dataset/${DATASET}/resource/${id}/download/${file}` });

test('the newest shp_cnuc_YYYY_MM resource is picked by its name, whatever the order and ids', () => {
  const base = 'https://dados.mma.gov.br';
  const picked = pickCnucResource([
    resource(base, 'a1', 'Unidades de Conservação 2024_02', 'shp_cnuc_2024_02.zip'),
    resource(base, 'b2', 'Dicionário de dados', 'dicionario_cnuc.pdf', 'PDF'),
    resource(base, 'c3', 'shp_cnuc_2024_10', 'shp_cnuc_2024_10.zip'),
    resource(base, 'd4', 'Planilha CNUC 2025_03', 'cnuc_2025_03.csv', 'CSV'),
  ]);
  expect(picked).toEqual({ name: 'shp_cnuc_2024_10.zip', url: `${base}/dataset/${DATASET}/resource/c3/download/shp_cnuc_2024_10.zip` });
  expect(pickCnucResource([resource(base, 'b2', 'Dicionário', 'dicionario.pdf', 'PDF')])).toBeNull();
});

test('the configured default is the dataset\'s package_show URL', () => {
  expect(loadConfig({}).sources['cnuc-ucs']).toBe(`https://dados.mma.gov.br/api/3/action/package_show?id=${DATASET}`);
});

test('a package_show URL as the source: the newest release is fetched and loaded under its YYYY_MM', async () => {
  const bytes = fs.readFileSync(FIXTURE);
  const hits: string[] = [];
  let resources: object[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url?.startsWith('/api/3/action/package_show')) {
      const body = JSON.stringify({ success: true, result: { id: DATASET, resources } });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    } else if (req.url?.endsWith('/shp_cnuc_2024_10.zip')) {
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': bytes.length });
      res.end(bytes);
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const source = `${base}/api/3/action/package_show?id=${DATASET}`;
    const run = () => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, cnucUcs, { source });

    resources = [resource(base, 'b2', 'Dicionário', 'dicionario.pdf', 'PDF')];
    const none = await run();
    expect(none.status).toBe('failed');
    expect(none.error).toMatchObject({ code: 'source_not_found' });
    expect(none.error!.message).toMatch(/no shp_cnuc_YYYY_MM\.zip resource/);

    resources = [
      resource(base, 'a1', 'Unidades de Conservação 2024_02', 'shp_cnuc_2024_02.zip'),
      resource(base, 'c3', 'shp_cnuc_2024_10', 'shp_cnuc_2024_10.zip'),
    ];
    hits.length = 0;
    const out = await run();
    expect(out.error).toBeUndefined();
    expect(out.status).toBe('published');
    expect(out.as_of).toBe('2024-10-01');
    expect(hits).toEqual([`/api/3/action/package_show?id=${DATASET}`, `/dataset/${DATASET}/resource/c3/download/shp_cnuc_2024_10.zip`]);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM serving.cnuc_ucs')).rows[0].n).toBeGreaterThan(0);
  } finally {
    await new Promise((r) => server.close(r));
  }
});
