// `agro webhooks add|list|remove|deliver|replay` (contract §1, §5), and rotate, test, log, enable.
import fs from 'node:fs';
import { AgroError } from '../errors.ts';
import { Drainer, drainUntilIdle, inFlight, leasedElsewhere, replayEvent, sendTestEvent } from '../events/delivery.ts';
import { addEndpoint, deliveryLog, enableEndpoint, getEndpoint, listEndpoints, removeEndpoint, rotateSecret, type Endpoint } from '../events/endpoints.ts';
import { openDb, print, withDb, type Env } from './context.ts';
import type { Syntax } from './syntax.ts';

const ID = ['<id>'];
const ADD_FORM = 'webhooks add --key <key_id> --url URL --events a,b [--secret whsec_…] [--secret-file PATH|-]';
export const WEBHOOKS_COMMANDS: Syntax[] = [
  { form: ADD_FORM, does: 'subscribe an endpoint (secret shown once); --secret-file: the secret from a file or stdin (-), out of `ps`' },
  { form: 'webhooks list [--key <key_id>]' },
  { form: 'webhooks remove <id>', args: ID },
  { form: 'webhooks log <id> [--limit N]', args: ID, does: 'its delivery attempts, and those in flight' },
  { form: 'webhooks deliver [--once]', does: 'drain the outbox (until SIGTERM; --once: what is due now)' },
  { form: 'webhooks replay <event_id> [--endpoint <id>]', args: ['<event_id>'], does: 'deliver an event again' },
  { form: 'webhooks rotate <id>', args: ID, does: 'a new secret; the old one also signs for 24 h' },
  { form: 'webhooks test <id>', args: ID, does: 'send a webhook.test event' },
  { form: 'webhooks enable <id>', args: ID, does: 're-enable after a 410' },
];

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const shown = (e: Endpoint) => ({ ...e, created_at: iso(e.created_at), disabled_at: iso(e.disabled_at), previous_secret_until: iso(e.previous_secret_until) });
const line = (e: Endpoint) =>
  `${e.id}  ${e.key_id}  ${e.url}  [${e.events.join(',')}]${e.disabled_at ? `  DISABLED ${iso(e.disabled_at)} (${e.disabled_reason})` : ''}${e.previous_secret_until ? `  dual-signing until ${iso(e.previous_secret_until)}` : ''}`;

function idArg(env: Env, what: string): string {
  const id = env.args[2];
  if (!id) throw new AgroError('usage', what);
  return id;
}

/**
 * The secret to subscribe with: `--secret` (visible to every user in `ps` and kept in shell
 * history), or `--secret-file` (a file, or `-` for stdin; one trailing newline dropped).
 */
function secretArg(env: Env): string | undefined {
  const inline = env.values.secret as string | undefined;
  const file = env.values['secret-file'] as string | undefined;
  if (inline !== undefined && file !== undefined) throw new AgroError('usage', 'give --secret or --secret-file, not both');
  if (file === undefined) return inline;
  let text: string;
  try {
    text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (e) {
    throw new AgroError('usage', `--secret-file ${file}: ${(e as Error).message}`);
  }
  return text.replace(/\r?\n$/, '');
}

/** Drains until SIGTERM/SIGINT; the pass under way finishes first. */
async function deliverContinuously(env: Env): Promise<void> {
  const pool = await openDb(env);
  const drainer = new Drainer({ pool, cfg: env.cfg, log: env.log }).start();
  env.log.info('webhook drainer started');
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await drainer.stop();
  await pool.end();
}

export async function cmdWebhooks(env: Env): Promise<number> {
  const sub = env.args[1];
  const key = env.values.key as string | undefined;
  switch (sub) {
    case 'add': {
      const url = env.values.url as string | undefined;
      const events = env.values.events as string | undefined;
      if (!key || !url || !events) throw new AgroError('usage', ADD_FORM);
      const e = await withDb(env, (pool) =>
        addEndpoint(pool, { keyId: key, url, events, secret: secretArg(env), allowPrivate: env.cfg.webhooks.allowPrivate }),
      );
      print(env, shown(e), () => `${line(e)}\nsecret: ${e.secret}\n(store the secret now: it is not shown again)`);
      return 0;
    }
    case 'list': {
      const rows = await withDb(env, (pool) => listEndpoints(pool, key ? [key] : null));
      print(env, { endpoints: rows.map(shown) }, () => (rows.length ? rows.map(line).join('\n') : 'no webhook endpoints'));
      return 0;
    }
    case 'remove': {
      const id = idArg(env, 'webhooks remove <id>');
      if (!(await withDb(env, (pool) => removeEndpoint(pool, id)))) throw new AgroError('not_found', `no webhook endpoint ${id}`);
      print(env, { id, removed: true }, () => `webhook endpoint ${id} removed`);
      return 0;
    }
    case 'rotate': {
      const id = idArg(env, 'webhooks rotate <id>');
      const r = await withDb(env, (pool) => rotateSecret(pool, id));
      print(env, { ...r, previous_secret_until: iso(r.previous_secret_until) }, () =>
        `secret: ${r.secret}\n(the previous secret also signs until ${iso(r.previous_secret_until)}; store the new one now: it is not shown again)`);
      return 0;
    }
    case 'enable': {
      const id = idArg(env, 'webhooks enable <id>');
      if (!(await withDb(env, (pool) => enableEndpoint(pool, id)))) throw new AgroError('not_found', `no webhook endpoint ${id}`);
      print(env, { id, enabled: true }, () => `webhook endpoint ${id} enabled`);
      return 0;
    }
    case 'test': {
      const id = idArg(env, 'webhooks test <id>');
      const r = await withDb(env, async (pool) => {
        const e = await getEndpoint(pool, id);
        if (!e) throw new AgroError('not_found', `no webhook endpoint ${id}`);
        const eventId = await sendTestEvent(pool, e);
        return { event_id: eventId, ...(await drainUntilIdle({ pool, cfg: env.cfg, log: env.log })) };
      });
      print(env, r, () => `test event ${r.event_id} queued; ${r.delivered} delivered, ${r.retrying} to retry, ${r.failed} failed`);
      return 0;
    }
    case 'log': {
      const id = idArg(env, 'webhooks log <id> [--limit N]');
      const limit = env.values.limit === undefined ? 50 : Number(env.values.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new AgroError('usage', '--limit is 1..1000');
      const [log, leased] = await withDb(env, (pool) => Promise.all([deliveryLog(pool, id, limit), inFlight(pool, id)]));
      const attempts = log.map((a) => ({ ...a, at: iso(a.at), next_attempt_at: iso(a.next_attempt_at) }));
      // A delivery claimed and not settled yet has no attempt row: its POST is under way, or its deliverer died.
      const in_flight = leased.map((f) => ({ ...f, since: iso(f.since), lease_until: iso(f.lease_until) }));
      print(env, { endpoint_id: id, attempts, in_flight }, () =>
        [
          ...in_flight.map((f) => `${f.since}  ${f.event_id}  ${f.type.padEnd(22)} #${f.attempt}  in flight (a deliverer holds it until ${f.lease_until}; tried again after that if it records no answer)`),
          ...(attempts.length === 0
            ? ['no delivery attempts']
            : attempts.map((a) => `${a.at}  ${a.event_id}  ${a.type.padEnd(22)} #${a.attempt}  ${a.status_code ?? '—'}  ${a.error ?? 'ok'}  (${a.delivery_status}${a.next_attempt_at ? `, next ${a.next_attempt_at}` : ''})`)),
        ].join('\n'));
      return 0;
    }
    case 'deliver': {
      if (!env.values.once) {
        await deliverContinuously(env);
        print(env, { stopped: true }, () => 'webhook drainer stopped');
        return 0;
      }
      const r = await withDb(env, async (pool) => {
        const pass = await drainUntilIdle({ pool, cfg: env.cfg, log: env.log });
        // What is left leased is another deliverer's (this pass settled its own): not attempted here.
        const held = await leasedElsewhere(pool);
        return { ...pass, leased_elsewhere: held.n, leased_until: iso(held.until) };
      });
      print(env, r, () =>
        `${r.events} new events; ${r.attempted} attempts: ${r.delivered} delivered, ${r.retrying} to retry, ${r.failed} failed` +
        (r.leased_elsewhere ? `; ${r.leased_elsewhere} left to another deliverer that holds them (tried again if still pending when the lease ends, by ${r.leased_until})` : ''));
      return 0;
    }
    case 'replay': {
      const id = idArg(env, 'webhooks replay <event_id> [--endpoint <id>]');
      const r = await withDb(env, async (pool) => {
        const deliveries = await replayEvent(pool, id, { endpointId: env.values.endpoint as string | undefined });
        return { event_id: id, deliveries, ...(await drainUntilIdle({ pool, cfg: env.cfg, log: env.log })) };
      });
      print(env, r, () => `event ${id}: ${r.deliveries} deliveries queued again; ${r.delivered} delivered, ${r.retrying} to retry, ${r.failed} failed`);
      return 0;
    }
    default:
      throw new AgroError('usage', 'webhooks add|list|remove|deliver|replay|rotate|test|log|enable');
  }
}
