// Change events at scale: a publish that changes many monitored records writes its events
// without bringing a row per event (or per change) back into the process. The statements run
// on a real client; the test only looks at the size of each result it received.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { BATCH_ROWS } from '../src/db/batches.ts';
import { recordChangeEvents } from '../src/events/change-events.ts';
import { createKey } from '../src/platform/keys.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
let key: string;
const MANY = BATCH_ROWS * 2 + 500;

/** A client of the pool whose results are measured: the largest number of rows one statement returned. */
async function measured<T>(fn: (c: pg.ClientBase) => Promise<T>): Promise<{ value: T; largest: number }> {
  const c = await db.pool.connect();
  let largest = 0;
  const query = c.query.bind(c) as (...a: unknown[]) => Promise<pg.QueryResult>;
  const watched = new Proxy(c, {
    get: (t, p) => (p === 'query' ? async (...a: unknown[]) => {
      const r = await query(...a);
      largest = Math.max(largest, r.rows?.length ?? 0);
      return r;
    } : Reflect.get(t, p)),
  });
  try {
    await c.query('BEGIN');
    const value = await fn(watched);
    await c.query('COMMIT');
    return { value, largest };
  } finally {
    c.release();
  }
}

const snapshot = async (dataset: string) =>
  Number((await db.pool.query(`INSERT INTO etl.snapshots (dataset, as_of) VALUES ($1, '2026-01-01') RETURNING snapshot_id`, [dataset])).rows[0].snapshot_id);

beforeAll(async () => {
  db = await testDatabase();
  key = (await createKey(db.pool, { env: 'live', plan: 'growth', name: 'many' })).id;
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('change events for many monitors', () => {
  test('car.situacao.alterada: every changed monitored property gets its event, counted in the database', async () => {
    const [before, after] = [await snapshot('sicar'), await snapshot('sicar')];
    for (const [id, situacao] of [[before, 'AT'], [after, 'PE']]) {
      await db.pool.query(`CREATE TABLE snap.car_imovel__s${id} AS
        SELECT 'GO-5200000-' || lpad(to_hex(i), 32, '0') AS car, '${situacao}'::text AS situacao FROM generate_series(1, ${MANY}) i`);
    }
    await db.pool.query(`INSERT INTO events.monitors (id, key_id, kind, record) SELECT 'mon_c' || i, $1, 'car', 'GO-5200000-' || lpad(to_hex(i), 32, '0') FROM generate_series(1, ${MANY}) i`, [key]);
    const pub = Number((await db.pool.query(`SELECT nextval(pg_get_serial_sequence('etl.publications', 'publication_id')) AS id`)).rows[0].id);
    const { value, largest } = await measured((c) => recordChangeEvents(c, { dataset: 'sicar', scope: 'GO', previousSnapshotId: before, snapshotId: after, publicationId: pub }));
    expect(value).toBe(MANY);
    expect(Number((await db.pool.query(`SELECT count(*) FROM events.outbox WHERE type = 'car.situacao.alterada'`)).rows[0].count)).toBe(MANY);
    expect(largest).toBeLessThanOrEqual(BATCH_ROWS);
  }, 60_000);

  test('socio.qsa.alterado: the changed partner lists are read a batch at a time', async () => {
    const [before, after] = [await snapshot('receita-cnpj'), await snapshot('receita-cnpj')];
    // the two months' partner tables: nobody before, one partner of each company after
    for (const [id, n] of [[before, 0], [after, MANY]]) {
      await db.pool.query(`CREATE TABLE snap.cnpj_socios__s${id} AS
        SELECT lpad(i::text, 8, '0') AS cnpj_basico, 'k' || i AS socio_chave, 'FULANO ' || i AS nome_socio, '***123456**'::text AS cnpj_cpf_do_socio,
               '2'::text AS identificador_de_socio, '49'::text AS qualificacao_socio, NULL::date AS data_entrada_sociedade
          FROM generate_series(1, ${n}) i`);
      await db.pool.query(`CREATE INDEX ON snap.cnpj_socios__s${id} (cnpj_basico)`);
    }
    await db.pool.query(`INSERT INTO events.monitors (id, key_id, kind, record) SELECT 'mon_q' || i, $1, 'cnpj', lpad(i::text, 8, '0') || '000100' FROM generate_series(1, ${MANY}) i`, [key]);
    const pub = Number((await db.pool.query(`SELECT nextval(pg_get_serial_sequence('etl.publications', 'publication_id')) AS id`)).rows[0].id);
    const { value, largest } = await measured((c) => recordChangeEvents(c, { dataset: 'receita-cnpj', scope: '', previousSnapshotId: before, snapshotId: after, publicationId: pub }));
    expect(value).toBe(MANY);
    expect(largest).toBeLessThanOrEqual(BATCH_ROWS);
    const one = (await db.pool.query(`SELECT body FROM events.outbox WHERE type = 'socio.qsa.alterado' AND body->'data'->>'cnpj' = '00.000.007/0001-00'`)).rows[0].body;
    expect(one.data).toEqual({ cnpj: '00.000.007/0001-00', entraram: [{ nome: 'FULANO 7', cpf_cnpj: '***.123.456-**', qualificacao: '49' }], sairam: [] });
    // The same publication again writes nothing new (the event ids are the same).
    const again = await measured((c) => recordChangeEvents(c, { dataset: 'receita-cnpj', scope: '', previousSnapshotId: before, snapshotId: after, publicationId: pub }));
    expect(again.value).toBe(0);
  }, 60_000);
});
