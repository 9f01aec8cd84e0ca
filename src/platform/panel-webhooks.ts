// The panel's webhooks page (/panel/webhooks): the account's subscriptions (add — the secret is
// shown once —, remove, send a test event), each endpoint's delivery log with a replay button,
// and the monitored records (add, remove). Plain forms with the session's CSRF token, no script.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiDeps } from '../api/deps.ts';
import { toFailure } from '../api/errors.ts';
import { isAgroError } from '../errors.ts';
import { maskCpfsInText } from '../privacy.ts';
import { replayEvent, sendTestEvent } from '../events/delivery.ts';
import { addEndpoint, deliveryLog, EVENT_TYPES, getEndpoint, listEndpoints, removeEndpoint, rotateSecret, type Endpoint } from '../events/endpoints.ts';
import { addMonitor, countMonitors, newestMonitors, removeMonitor, type Monitor } from '../events/monitors.ts';
import type { Session } from './panel-sql.ts';
import { formList, formText } from './panel-form.ts';
import { accountKeys, formToken, manageableEnvs } from './panel-sql.ts';

/** Monitored records shown on the page (the newest): an account may watch millions. */
const PANEL_MONITORS = 500;

export interface PanelKit {
  esc: (s: unknown) => string;
  page: (title: string, body: string) => string;
  send: (reply: FastifyReply, status: number, html: string) => FastifyReply;
  sessionFrom: (req: FastifyRequest, reply: FastifyReply) => Promise<Session | null>;
  guard: (req: FastifyRequest, reply: FastifyReply) => Promise<Session | null>;
  /** The 403 page of a form that is not this session's. */
  outOfDate: (reply: FastifyReply) => FastifyReply;
}

const iso = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '');

/** The account's keys whose subscriptions this session manages (a test key's session: the test keys). */
async function accountKeyIds(deps: ApiDeps, s: Session): Promise<string[]> {
  return (await accountKeys(deps.pool, s.account)).filter((k) => manageableEnvs(s).includes(k.env)).map((k) => k.id);
}

export async function webhookPanelRoutes(app: FastifyInstance, deps: ApiDeps, kit: PanelKit) {
  const { esc, page, send } = kit;
  const config = { public: true };
  const opts = { config, schema: { hide: true } };
  const csrfField = (s: Session) => `<input type="hidden" name="csrf" value="${esc(s.csrf)}">`;
  // The forms that answer with a secret on the page (subscribe, rotate) carry a one-time token:
  // a browser's reload of that page posts them again (sql/0124).
  const onceField = () => `<input type="hidden" name="form_token" value="${formToken()}">`;
  /** The posted one-time token; null without one (a page of an older release: acts as before). */
  const onceOf = (req: FastifyRequest) => formText(req, 'form_token').slice(0, 100) || null;
  const alreadySent = (reply: FastifyReply, what: string) =>
    send(reply, 409, page('Webhooks — already done', `<h1>Webhooks and monitors</h1>
<p role="alert">${what}: nothing was done again. The secret was shown once, on the page that answered the form, and is not shown again.</p>
<p><a href="/panel/webhooks">Back to webhooks</a></p>`));
  const notFound = (reply: FastifyReply, what: string) =>
    send(reply, 404, page('Not found', `<h1>Not found</h1><p>No such ${esc(what)} in this account. <a href="/panel/webhooks">Back</a></p>`));
  /** A refused form's reason: the detail without the catalogue's prefix, CPFs masked (as the API words it). */
  const alert = (err: unknown) => `<p role="alert">${esc(toFailure(err).message)}</p>`;
  const secretFlash = (note: string, secret: string) =>
    `<div class="new" role="status"><p>${esc(note)} The signing secret is shown only now: store it.</p><p><code id="new-secret">${esc(secret)}</code></p></div>`;

  /**
   * The page; `typed` is a refused form's fields, sent back so that nothing typed is lost (CPFs
   * masked like everything the panel shows; the URL's password too).
   */
  const overview = async (s: Session, flash: string, typed: Partial<{ url: string; events: string[]; kind: string; record: string }> = {}) => {
    const value = (v: string | undefined) => (v ? ` value="${esc(maskCpfsInText(v))}"` : '');
    const checked = (t: string) => (!typed.events || typed.events.includes(t) ? ' checked' : '');
    const kindOption = (k: string, label: string) => `<option value="${k}"${typed.kind === k ? ' selected' : ''}>${label}</option>`;
    const ids = await accountKeyIds(deps, s);
    const [endpoints, monitors, monitored] = await Promise.all([listEndpoints(deps.pool, ids), newestMonitors(deps.pool, ids, PANEL_MONITORS), countMonitors(deps.pool, ids)]);
    const csrf = csrfField(s);
    const endpointRow = (e: Endpoint) => `<tr data-endpoint="${esc(e.id)}"><td><a href="/panel/webhooks/${esc(e.id)}" title="${esc(e.url)}">${esc(e.url)}</a></td>
      <td>${e.events.map((t) => `<code>${esc(t)}</code>`).join(' ')}</td><td>${esc(e.key_id)}</td>
      <td class="state">${e.disabled_at ? `disabled ${esc(iso(e.disabled_at))}: ${esc(e.disabled_reason)}` : 'active'}${e.previous_secret_until ? ` (old secret signs until ${esc(iso(e.previous_secret_until))})` : ''}</td>
      <td><form class="inline" method="post" action="/panel/webhooks/${esc(e.id)}/test">${csrf}<button>Send test event</button></form>
      <form class="inline" method="post" action="/panel/webhooks/${esc(e.id)}/rotate">${csrf}${onceField()}<button>Rotate secret</button></form>
      <form class="inline" method="post" action="/panel/webhooks/${esc(e.id)}/remove">${csrf}<button>Remove</button></form></td></tr>`;
    const monitorRow = (m: Monitor) => `<tr data-monitor="${esc(m.id)}"><td>${esc(m.kind)}</td><td><code>${esc(m.record)}</code></td><td>${esc(m.key_id)}</td>
      <td><form class="inline" method="post" action="/panel/monitors/${esc(m.id)}/remove">${csrf}<button>Remove</button></form></td></tr>`;
    return page('Webhooks and monitors', `<h1>Webhooks and monitors</h1><p><a href="/panel">← Account panel</a></p>${flash}
<h2>Subscriptions</h2>
<p class="muted">Each delivery is a POST signed with the endpoint's secret (<code>X-Service-Signature</code> and the Standard Webhooks headers); only a 2xx answer counts, others are retried for about 3 days, and <code>410 Gone</code> disables the endpoint.</p>
<div class="wide"><table id="endpoints"><thead><tr><th>URL</th><th>Events</th><th>Key</th><th>State</th><th></th></tr></thead><tbody>${endpoints.map(endpointRow).join('\n')}</tbody></table></div>
${endpoints.length === 0 ? '<p class="muted">No subscriptions yet.</p>' : ''}
<form method="post" action="/panel/webhooks">${csrf}${onceField()}<label>URL <input name="url" type="url" size="50" required${value(typed.url)}></label>
<fieldset><legend>Events</legend>${EVENT_TYPES.map((t) => `<label><input type="checkbox" name="events" value="${esc(t)}"${checked(t)}> ${esc(t)}</label>`).join(' ')}</fieldset>
<button type="submit">Subscribe</button></form>
<h2>Monitored records</h2>
<p class="muted">Change events (<code>car.situacao.alterada</code>, <code>car.embargo.criado</code>, <code>socio.qsa.alterado</code>) are sent for these records when a new snapshot is published.</p>
<div class="wide"><table id="monitors"><thead><tr><th>Kind</th><th>Record</th><th>Key</th><th></th></tr></thead><tbody>${monitors.map(monitorRow).join('\n')}</tbody></table></div>
${monitors.length === 0 ? '<p class="muted">No monitored records yet.</p>' : ''}
${monitored > monitors.length ? `<p class="muted" id="monitors-shown">The ${monitors.length} newest of ${monitored} monitored records; <code>agro monitors list --key &lt;key_id&gt;</code> lists them all.</p>` : ''}
<form method="post" action="/panel/monitors">${csrf}<label>Kind <select name="kind">${kindOption('car', 'CAR')}${kindOption('cnpj', 'CNPJ')}</select></label>
<label>Number <input name="record" size="50" required${value(typed.record)}></label> <button type="submit">Monitor</button></form>`);
  };

  const endpointPage = async (s: Session, e: Endpoint, flash: string) => {
    const log = await deliveryLog(deps.pool, e.id, 100);
    const csrf = csrfField(s);
    const rows = log.map((a) => `<tr data-event="${esc(a.event_id)}"><td>${esc(iso(a.at))}</td><td><code>${esc(a.event_id)}</code></td><td>${esc(a.type)}</td><td>${a.attempt}</td>
      <td>${a.status_code ?? '—'}</td><td>${esc(a.error ?? 'ok')}</td><td>${esc(a.delivery_status)}${a.next_attempt_at ? `, next ${esc(iso(a.next_attempt_at))}` : ''}</td>
      <td><form class="inline" method="post" action="/panel/webhooks/${esc(e.id)}/replay">${csrf}<input type="hidden" name="event_id" value="${esc(a.event_id)}"><button>Replay</button></form></td></tr>`);
    return page(`Deliveries to ${e.url}`, `<h1>Deliveries</h1><p><a href="/panel/webhooks">← Webhooks and monitors</a></p>${flash}
<p><code>${esc(e.url)}</code> — ${e.disabled_at ? `disabled ${esc(iso(e.disabled_at))}: ${esc(e.disabled_reason)}` : 'active'}</p>
<form class="inline" method="post" action="/panel/webhooks/${esc(e.id)}/test">${csrf}<button>Send test event</button></form>
<div class="wide"><table id="deliveries"><thead><tr><th>When (UTC)</th><th>Event</th><th>Type</th><th>Attempt</th><th>Status</th><th>Result</th><th>Delivery</th><th></th></tr></thead><tbody>
${rows.join('\n')}</tbody></table></div>${log.length === 0 ? '<p class="muted">No delivery attempts yet (events are sent within seconds).</p>' : ''}`);
  };

  /** The session and the endpoint, when it belongs to the account; otherwise the answer is sent. */
  const ownEndpoint = async (req: FastifyRequest, reply: FastifyReply, s: Session) => {
    const e = await getEndpoint(deps.pool, (req.params as { id: string }).id, await accountKeyIds(deps, s));
    if (!e) notFound(reply, 'subscription');
    return e;
  };
  const back = (reply: FastifyReply, to: string) => reply.code(303).header('location', to).send();

  app.get('/panel/webhooks', opts, async (req, reply) => {
    const s = await kit.sessionFrom(req, reply);
    if (!s) return back(reply, '/panel');
    return send(reply, 200, await overview(s, ''));
  });

  app.post('/panel/webhooks', opts, async (req, reply) => {
    const s = await kit.guard(req, reply);
    if (!s) return reply;
    const typed = { url: formText(req, 'url'), events: formList(req, 'events') };
    // No box ticked: said in the form's words (addEndpoint's message names the CLI's --events).
    if (typed.events.length === 0) return send(reply, 422, await overview(s, `<p role="alert">choose at least one event</p>`, typed));
    try {
      const e = await addEndpoint(deps.pool, { keyId: s.key_id, url: typed.url, events: typed.events, allowPrivate: deps.cfg.webhooks.allowPrivate, formToken: onceOf(req) ?? undefined });
      return send(reply, 201, await overview(s, secretFlash(`Subscribed ${e.url}.`, e.secret)));
    } catch (err) {
      if (!isAgroError(err)) throw err;
      if (err.code === 'form_used') {
        // The token names what it made; another account's (a forged form) is named to no one.
        const made = err.details.endpoint as string;
        if (await getEndpoint(deps.pool, made, await accountKeyIds(deps, s))) return alreadySent(reply, `This form already created subscription <code>${esc(made)}</code>`);
        if (await getEndpoint(deps.pool, made)) return kit.outOfDate(reply);
        return alreadySent(reply, 'This form already created a subscription, removed since');
      }
      return send(reply, 422, await overview(s, alert(err), typed));
    }
  });

  app.get('/panel/webhooks/:id', opts, async (req, reply) => {
    const s = await kit.sessionFrom(req, reply);
    if (!s) return back(reply, '/panel');
    const e = await ownEndpoint(req, reply, s);
    if (!e) return reply;
    return send(reply, 200, await endpointPage(s, e, ''));
  });

  /** A form posted on one subscription: the session guard (CSRF included), then the endpoint when the account owns it. */
  const onEndpoint = (action: string, handle: (s: Session, e: Endpoint, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) =>
    app.post(`/panel/webhooks/:id/${action}`, opts, async (req, reply) => {
      const s = await kit.guard(req, reply);
      if (!s) return reply;
      const e = await ownEndpoint(req, reply, s);
      if (!e) return reply;
      return handle(s, e, req, reply);
    });

  onEndpoint('remove', async (_s, e, _req, reply) => {
    await removeEndpoint(deps.pool, e.id);
    return back(reply, '/panel/webhooks');
  });

  onEndpoint('rotate', async (s, e, req, reply) => {
    let r;
    try {
      r = await rotateSecret(deps.pool, e.id, undefined, undefined, onceOf(req));
    } catch (err) {
      if (!isAgroError(err) || err.code !== 'form_used') throw err;
      return alreadySent(reply, `This form already rotated the secret of <code>${esc(e.url)}</code>`);
    }
    return send(reply, 201, await overview(s, secretFlash(`New secret for ${e.url}; the previous one also signs until ${iso(r.previous_secret_until)}.`, r.secret)));
  });

  onEndpoint('test', async (_s, e, _req, reply) => {
    await sendTestEvent(deps.pool, e);
    return back(reply, `/panel/webhooks/${encodeURIComponent(e.id)}`);
  });

  onEndpoint('replay', async (s, e, req, reply) => {
    try {
      await replayEvent(deps.pool, formText(req, 'event_id'), { endpointId: e.id, keyIds: await accountKeyIds(deps, s) });
    } catch (err) {
      if (!isAgroError(err)) throw err;
      return send(reply, 404, await endpointPage(s, e, alert(err)));
    }
    return back(reply, `/panel/webhooks/${encodeURIComponent(e.id)}`);
  });

  app.post('/panel/monitors', opts, async (req, reply) => {
    const s = await kit.guard(req, reply);
    if (!s) return reply;
    const typed = { kind: formText(req, 'kind'), record: formText(req, 'record') };
    try {
      const m = await addMonitor(deps.pool, s.key_id, typed.kind, typed.record);
      return send(reply, 201, await overview(s, `<p role="status">${m.created ? 'Monitoring' : 'Already monitored:'} ${esc(m.kind)} <code>${esc(m.record)}</code>.</p>`));
    } catch (err) {
      if (!isAgroError(err)) throw err;
      return send(reply, 422, await overview(s, alert(err), typed));
    }
  });

  app.post('/panel/monitors/:id/remove', opts, async (req, reply) => {
    const s = await kit.guard(req, reply);
    if (!s) return reply;
    const ok = await removeMonitor(deps.pool, (req.params as { id: string }).id, await accountKeyIds(deps, s));
    if (!ok) return notFound(reply, 'monitor');
    return back(reply, '/panel/webhooks');
  });
}
