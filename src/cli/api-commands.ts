// `agro serve`, `agro keys create|list|revoke` and the API end of `agro demo`.
import type pg from 'pg';
import type { Config } from '../config.ts';
import { databaseUrl } from '../db/cluster.ts';
import { AgroError } from '../errors.ts';
import { print, withDb, type Env } from './context.ts';
import type { Syntax } from './syntax.ts';
import { createLogger } from '../log.ts';
import { activeTerminal } from '../progress.ts';
import { migrateSandbox } from '../platform/sandbox.ts';
import { createKey, KEY_ENVS, listKeys, PLANS, revokeKey, rotateKey, type KeyEnv, type Plan } from '../platform/keys.ts';

export const API_COMMANDS: Syntax[] = [
  { form: 'serve [--port 8080] [--host 127.0.0.1]', does: 'the HTTP API' },
  { form: 'keys create --env test|live --plan PLAN [--name N]', does: 'a new API key, shown once' },
  { form: 'keys list' },
  { form: 'keys revoke <id>', args: ['<id>'] },
  { form: 'keys rotate <id> [--grace-hours 24]', args: ['<id>'], does: 'a successor key; the old one works for the grace period' },
];

function portOf(ctx: Env): number {
  const raw = ctx.values.port as string | undefined;
  const port = raw === undefined ? ctx.cfg.port : Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new AgroError('usage', `--port must be 0..65535, got "${raw}"`);
  return port;
}

/** Starts the API; resolves with its address and a stop function. */
export async function startApi(cfg: Config, o: { port: number; host: string }) {
  // Loaded on demand: fastify, swagger and turf would slow every other command's start.
  const { buildServer, createApiPool } = await import('../api/server.ts');
  // At a terminal (the command installed one: stderr a TTY, LOG_FORMAT not json) readable lines, as
  // every command's; otherwise JSON lines, buffered (a write per request costs throughput).
  const log = activeTerminal() ? createLogger(cfg.logLevel, 'pretty') : createLogger(cfg.logLevel, 'json', { buffered: true });
  const pool = createApiPool(cfg, databaseUrl(cfg));
  // DATABASE_READ_URL: the data is read from that replica; the primary keeps the rest.
  const readPool = cfg.databaseReadUrl ? createApiPool(cfg, cfg.databaseReadUrl) : undefined;
  const endPools = async () => {
    await pool.end();
    await readPool?.end();
  };
  const app = await buildServer({ cfg, pool, readPool, log, drainWebhooks: true });
  try {
    await app.listen({ port: o.port, host: o.host });
  } catch (e) {
    await app.close();
    await endPools();
    log.flush();
    throw new AgroError('usage', `cannot listen on ${o.host}:${o.port}: ${(e as Error).message}`);
  }
  const addr = app.server.address();
  const url = typeof addr === 'object' && addr ? `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${addr.port}` : `http://${o.host}:${o.port}`;
  return {
    url,
    async stop() {
      await app.close();
      await endPools();
      log.flush();
    },
  };
}

/** Serves until SIGINT or SIGTERM. */
async function serveUntilSignal(stop: () => Promise<void>): Promise<number> {
  await new Promise<void>((resolve) => {
    const done = () => resolve();
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  await stop();
  return 0;
}

export async function cmdServe(ctx: Env): Promise<number> {
  await withDb(ctx, async () => {}); // start the embedded cluster if needed, migrate
  await migrateSandbox(ctx.cfg, databaseUrl(ctx.cfg)); // test keys read it: the same schema
  const host = (ctx.values.host as string | undefined) ?? ctx.cfg.host;
  const api = await startApi(ctx.cfg, { port: portOf(ctx), host });
  print(ctx, { url: api.url, openapi: `${api.url}/v1/openapi.json`, docs: `${api.url}/v1/docs` }, () => `agro API listening on ${api.url} (docs: ${api.url}/v1/docs) — Ctrl-C to stop`);
  return serveUntilSignal(api.stop);
}

export async function cmdKeys(ctx: Env): Promise<number> {
  const sub = ctx.args[1];
  if (sub === 'create') {
    const env = ctx.values.env as string | undefined;
    const plan = ctx.values.plan as string | undefined;
    if (!env || !KEY_ENVS.includes(env as KeyEnv)) throw new AgroError('usage', `keys create needs --env ${KEY_ENVS.join('|')}`);
    if (!plan || !PLANS.includes(plan as Plan)) throw new AgroError('usage', `keys create needs --plan ${PLANS.join('|')}`);
    const k = await withDb(ctx, (pool) => createKey(pool, { env: env as KeyEnv, plan: plan as Plan, name: (ctx.values.name as string | undefined) ?? null }));
    print(ctx, k, () => `${k.key}\n(id ${k.id}, ${k.env}, ${k.plan}${k.name ? `, "${k.name}"` : ''}) — store it now: it is not shown again`);
    return 0;
  }
  if (sub === 'list') {
    const keys = await withDb(ctx, (pool) => listKeys(pool));
    const rows = keys.map((k) => ({
      id: k.id, name: k.name, env: k.env, plan: k.plan, prefix: k.prefix, last4: k.last4,
      created_at: k.created_at.toISOString(), revoked_at: k.revoked_at?.toISOString() ?? null, replaced_by: k.replaced_by,
    }));
    print(ctx, { keys: rows }, () =>
      rows.length === 0
        ? 'no keys'
        : rows.map((k) => `${k.id}  ${k.prefix}…${k.last4}  ${k.env.padEnd(4)} ${k.plan.padEnd(12)} ${(k.name ?? '').padEnd(20)} created ${k.created_at}${k.revoked_at ? `  REVOKED ${k.revoked_at}` : ''}`).join('\n'),
    );
    return 0;
  }
  if (sub === 'revoke') {
    const id = ctx.args[2];
    if (!id) throw new AgroError('usage', 'keys revoke <id>');
    const k = await withDb(ctx, (pool) => revokeKey(pool, id));
    print(ctx, { id: k.id, revoked_at: k.revoked_at?.toISOString() ?? null }, () => `key ${k.id} revoked`);
    return 0;
  }
  if (sub === 'rotate') {
    const id = ctx.args[2];
    if (!id) throw new AgroError('usage', 'keys rotate <id> [--grace-hours N]');
    const raw = ctx.values['grace-hours'] as string | undefined;
    const grace = raw === undefined ? ctx.cfg.api.keyRotationGraceHours : Number(raw);
    if (!Number.isFinite(grace) || grace < 0) throw new AgroError('usage', `--grace-hours must be a number ≥ 0, got "${raw}"`);
    const r = await withDb(ctx, (pool) => rotateKey(pool, id, grace));
    print(ctx, { ...r.key, replaces: r.old.id, old_key_expires_at: r.old.expires_at.toISOString() }, () =>
      `${r.key.key}\n(id ${r.key.id}, replaces ${r.old.id}, which works until ${r.old.expires_at.toISOString()}) — store it now: it is not shown again`);
    return 0;
  }
  throw new AgroError('usage', 'keys create|list|revoke|rotate');
}

/** A property with a declared CNPJ owner, for the demo's ready-to-paste requests. */
async function demoSample(pool: pg.Pool): Promise<{ car: string; cnpj: string; envelope: string } | null> {
  const r = await pool.query(
    `SELECT c.car, t.documento AS cnpj, ST_AsGeoJSON(ST_Envelope(c.geom), 6) AS envelope
       FROM serving.car_titulares t JOIN serving.car_imovel c ON c.car = t.car
      WHERE t.tipo_documento = 'cnpj' AND t.origem = 'declarado'
      ORDER BY c.car LIMIT 1`,
  );
  return r.rows[0] ?? null;
}

/** The end of `agro demo`: a fresh key, the API on loopback, three curl lines; serves until Ctrl-C. */
export async function serveDemo(ctx: Env): Promise<number> {
  const { key, live, sample } = await withDb(ctx, async (pool) => ({
    key: await createKey(pool, { env: 'test', plan: 'enterprise', name: 'demo sandbox' }),
    live: await createKey(pool, { env: 'live', plan: 'enterprise', name: 'demo live' }),
    sample: await demoSample(pool),
  }));
  const api = await startApi(ctx.cfg, { port: portOf(ctx), host: (ctx.values.host as string | undefined) ?? ctx.cfg.host });
  const auth = `-H 'Authorization: Bearer ${key.key}'`;
  const lines = [
    `\nThe API is serving on ${api.url} (docs: ${api.url}/v1/docs). Sandbox key ${key.id} (reads the sandbox, never billed): ${key.key}`,
    `Live key ${live.id} (reads the published snapshots, billed): ${live.key}`,
    ...(sample
      ? [
          `  curl -s ${auth} '${api.url}/v1/car/${sample.car}?include=ucs,tis,embargos'`,
          `  curl -s ${auth} '${api.url}/v1/car/by-document/${sample.cnpj}'`,
          `  curl -s ${auth} -H 'Content-Type: application/json' -d '{"geometry": ${sample.envelope}}' '${api.url}/v1/car/by-geometry'`,
        ]
      : ['  (no property with a declared owner is published: load the fixtures first)']),
    'Ctrl-C to stop.',
  ];
  (ctx.json ? process.stderr : process.stdout).write(lines.join('\n') + '\n');
  return serveUntilSignal(api.stop);
}
