// /car/by-document for a holder of very many properties (a settlement agency, a large
// group): each page reads the page's properties and their links, never all of the
// document's links. The data reads go through a real pool whose results the test measures.
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildServer, createApiPool, type ApiServer } from '../src/api/server.ts';
import { ROOT_DIR } from '../src/sql.ts';
import { loadFixtures, newKey, publishFrom } from './helpers/api.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const JOSE = '52998224725';
const GO1 = 'GO-5208707-F96A1A0DCC5E5421B5B161F1029679F2';
const MORE = 2_500;

let db: TestDb;
let app: ApiServer;
let reads: pg.Pool;
let base: string;
let key: string;
let largest = 0;
let linkCalls = 0;

beforeAll(async () => {
  db = await testDatabase();
  await loadFixtures(db);
  // José holds 2,500 more properties in a state whose SICAR is not loaded: links the answer must not gather.
  await publishFrom(db, 'car-titulares', (dir) => {
    const extract = fs.readFileSync(path.join(ROOT_DIR, 'fixtures/car-titulares/titulares.csv'), 'utf8');
    const more = Array.from({ length: MORE }, (_, i) => `PA-1500000-${i.toString(16).toUpperCase().padStart(32, '0')};529.982.247-25;José Antônio da Conceição;proprietario\r\n`);
    fs.writeFileSync(path.join(dir, 'titulares.csv'), extract + more.join(''));
  });
  // Each call of the document's links function says so (a notice the read pool counts).
  await db.pool.query(`ALTER FUNCTION serving.car_titulares_snapshot(bigint, bigint, bigint[], text) RENAME TO car_titulares_snapshot_counted`);
  await db.pool.query(`CREATE FUNCTION serving.car_titulares_snapshot(a bigint, b bigint, c bigint[], d text)
    RETURNS TABLE (car text, documento text, tipo_documento text, nome text, vinculo text, origem text, evidencia jsonb, snapshot_id bigint)
    LANGUAGE plpgsql STABLE AS $$ BEGIN RAISE NOTICE 'car_titulares_snapshot called'; RETURN QUERY SELECT * FROM serving.car_titulares_snapshot_counted(a, b, c, d); END $$`);
  reads = createApiPool(db.cfg, db.url);
  reads.on('connect', (c) => c.on('notice', (n) => { if (n.message === 'car_titulares_snapshot called') linkCalls++; }));
  const query = reads.query.bind(reads) as (...a: unknown[]) => Promise<pg.QueryResult>;
  reads.query = (async (...a: unknown[]) => {
    const r = await query(...a);
    largest = Math.max(largest, r.rows?.length ?? 0);
    return r;
  }) as typeof reads.query;
  app = await buildServer({ cfg: db.cfg, pool: db.pool, readPool: reads, log: db.log });
  await app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  key = await newKey(db);
}, 300_000);

afterAll(async () => {
  await app?.close();
  await reads?.end();
  await db?.drop();
});

const get = async (url: string) => {
  const r = await fetch(`${base}${url}`, { headers: { authorization: `Bearer ${key}`, 'x-lgpd-base-legal': 'protecao_credito' } });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
};

describe('by-document for a holder of thousands of properties', () => {
  test('pages through the properties in the snapshots, reading no more rows than a page needs', async () => {
    largest = 0;
    const cars: string[] = [];
    let url = `/v1/car/by-document/${JOSE}?limit=1`;
    for (let i = 0; i < 5; i++) {
      const r = await get(url);
      expect(r.status).toBe(200);
      expect(r.body.titular).toBe('José Antônio da Conceição');
      cars.push(...r.body.results.map((x: { car: string }) => x.car));
      if (!r.body.next_cursor) break;
      url = `/v1/car/by-document/${JOSE}?limit=1&cursor=${r.body.next_cursor}`;
    }
    expect(cars[0]).toBe(GO1);
    expect(cars).toHaveLength(2); // GO1 and GO8: the PA properties are in no loaded snapshot
    const whole = await get(`/v1/car/by-document/${JOSE}`);
    expect(whole.body.results.map((x: { car: string }) => x.car)).toEqual(cars);
    expect(whole.body.results[0]).toMatchObject({ vinculo: 'proprietario', origem: 'declarado' });
    expect(largest).toBeLessThan(100);
  }, 60_000);

  test('a page computes the document\'s links once: its properties, their links and the holder\'s name in one statement', async () => {
    linkCalls = 0;
    const r = await get(`/v1/car/by-document/${JOSE}?limit=1`);
    expect(r.status).toBe(200);
    expect(r.body.titular).toBe('José Antônio da Conceição');
    expect(r.body.results[0]).toMatchObject({ car: GO1, vinculo: 'proprietario', origem: 'declarado' });
    expect(linkCalls).toBe(1);
    // a state with no loaded snapshot: no page, the holder's name still
    linkCalls = 0;
    const pa = await get(`/v1/car/by-document/${JOSE}?uf=PA`);
    expect(pa.body).toMatchObject({ titular: 'José Antônio da Conceição', results: [], count: 0 });
    expect(linkCalls).toBe(1);
  }, 60_000);
});
