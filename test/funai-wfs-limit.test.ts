// FUNAI's WFS caps its answer at maxFeatures (SOURCES §4.7: always send it, raise it if the
// count nears it). A SHAPE-ZIP holding exactly maxFeatures lands is the server's cut, not the
// layer: the lands past it would vanish from the snapshot with nothing counted. Served over
// loopback with the committed fixture (5 lands, one a duplicate): at maxFeatures=5 the gate
// blocks and says why; the same bytes under a higher limit publish.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';
import { funaiTis, wfsFeatureLimit } from '../pipelines/funai-tis/index.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

const FIXTURE = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'funai-tis', 'tis_poligonais.zip');
let db: TestDb;
usesTestDatabase((d) => (db = d));

const wfs = (port: number, limit: string) =>
  `http://127.0.0.1:${port}/geoserver/Funai/ows?service=WFS&version=1.0.0&request=GetFeature&typeName=Funai%3Atis_poligonais&${limit}&outputFormat=SHAPE-ZIP`;

test('the limit is read from the request: maxFeatures (WFS 1.x) or count (2.0), any case; none without one', () => {
  expect(wfsFeatureLimit(wfs(1, 'maxFeatures=10000'))).toBe(10000);
  expect(wfsFeatureLimit(wfs(1, 'MAXFEATURES=665'))).toBe(665);
  expect(wfsFeatureLimit(wfs(1, 'count=700'))).toBe(700);
  expect(wfsFeatureLimit('/data/funai/tis_poligonais.zip')).toBeNull();
  expect(wfsFeatureLimit('https://example.org/tis_poligonais.zip')).toBeNull();
});

test('a SHAPE-ZIP with as many features as maxFeatures is blocked as cut; the same bytes under a higher limit publish', async () => {
  const bytes = fs.readFileSync(FIXTURE);
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/zip', 'content-length': bytes.length });
    res.end(bytes);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const { port } = server.address() as AddressInfo;
    const run = (url: string) => runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, funaiTis, { source: url });
    const cut = await run(wfs(port, 'maxFeatures=5'));
    expect(cut.status).toBe('blocked');
    expect(cut.gate?.failures).toEqual([
      expect.objectContaining({ rule: 'wfs_feature_limit', value: 5, threshold: 5 }),
    ]);
    expect((await db.pool.query('SELECT count(*)::int AS n FROM serving.funai_tis')).rows[0].n).toBe(0);

    const whole = await run(wfs(port, 'maxFeatures=10000'));
    expect(whole.status).toBe('published');
    expect(whole.gate?.failures ?? []).toEqual([]);
  } finally {
    await new Promise((r) => server.close(r));
  }
});
