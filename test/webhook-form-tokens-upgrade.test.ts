// Upgrading in place (sql/0126): the webhooks page's one-time form tokens moved out of the
// subscription's row (0124's form_token and rotation_form_token) into events.form_tokens. A
// database with tokens already used keeps refusing them after the migration: a reload of a
// page answered before the upgrade neither subscribes nor rotates again.
import { afterAll, beforeAll, expect, test } from 'vitest';
import { migrate } from '../src/db/migrate.ts';
import { addEndpoint, rotateSecret } from '../src/events/endpoints.ts';
import { createKey } from '../src/platform/keys.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
}, 300_000);
afterAll(async () => db?.drop());

test('tokens used before the upgrade are still used after it; the old columns are gone', async () => {
  const owner = await createKey(db.pool, { env: 'live', plan: 'starter' });
  const add = (url: string, formToken?: string) => addEndpoint(db.pool, { keyId: owner.id, url, events: '*', allowPrivate: false, formToken });
  const [a, b] = [await add('https://8.8.8.8/a'), await add('https://8.8.8.8/b')];
  // As 0124 left it: the tokens in the subscriptions' rows.
  await db.pool.query(`DROP TABLE events.form_tokens`);
  await db.pool.query(`ALTER TABLE events.endpoints ADD COLUMN form_token text UNIQUE, ADD COLUMN rotation_form_token text`);
  await db.pool.query(`UPDATE events.endpoints SET form_token = 'subscribe-a', rotation_form_token = 'rotate-a' WHERE id = $1`, [a.id]);
  await db.pool.query(`UPDATE events.endpoints SET form_token = 'subscribe-b' WHERE id = $1`, [b.id]);
  await db.pool.query(`DELETE FROM agro_meta.migrations WHERE id = 126`);
  expect((await migrate(db.pool)).applied).toEqual(['0126_webhook_form_tokens_kept']);

  await expect(add('https://8.8.8.8/b', 'subscribe-b')).rejects.toMatchObject({ code: 'form_used', details: { endpoint: b.id } });
  await expect(rotateSecret(db.pool, a.id, undefined, undefined, 'rotate-a')).rejects.toMatchObject({ code: 'form_used' });
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM events.endpoints WHERE key_id = $1`, [owner.id])).rows[0].n).toBe(2);
  const cols = await db.pool.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'events' AND table_name = 'endpoints' AND column_name LIKE '%form_token'`);
  expect(cols.rows).toEqual([]);
  // A fresh token still works, once.
  await rotateSecret(db.pool, a.id, undefined, undefined, 'rotate-a-2');
  await expect(rotateSecret(db.pool, a.id, undefined, undefined, 'rotate-a-2')).rejects.toMatchObject({ code: 'form_used' });
});
