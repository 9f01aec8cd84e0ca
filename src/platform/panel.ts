// The account panel at /panel: server-rendered HTML (no script, no CDN), signed in with an API
// key. The session cookie is HttpOnly and SameSite=Strict; every form carries the session's
// CSRF token as well. Shows the plan, the month's usage against the quota (an inline SVG chart
// per day), the history with its date filters, and the account's keys (create — shown once —,
// revoke, rotate).
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiDeps } from '../api/deps.ts';
import { toFailure } from '../api/errors.ts';
import { maskCpfsInText } from '../privacy.ts';
import { formText, sameToken } from './panel-form.ts';
import { isCalendarDate } from '../dates.ts';
import { historyPage } from './history.ts';
import { flushHistory } from './history-writer.ts';
import { checkKeyFormat, createKeyOnce, createKey, findActiveKey, KEY_ENVS, revokeKey, rotateKey, type ApiKey, type KeyEnv, type Plan } from './keys.ts';
import { PLAN_LIMITS, windowOf } from './limits.ts';
import { accountKeys, createSession, endSession, formToken, keyOfFormToken, manageableEnvs, SESSION_HOURS, sessionOf, usageByDay, type Session } from './panel-sql.ts';
import { webhookPanelRoutes } from './panel-webhooks.ts';

const COOKIE = 'agro_panel';

const esc = (s: unknown) =>
  String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

// A phone (375 px) too: a long value (a webhook URL, a new key) breaks where it must (in a
// table a URL is cut short, whole on its own page), the usage chart scales to the width, and a
// table wider than the screen scrolls in its own box (.wide).
const STYLE = `body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem;color:#1d2b1f}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem;border-bottom:1px solid #ccd5cc}table{border-collapse:collapse;width:100%}
td,th{padding:.3rem .5rem;border-bottom:1px solid #e3e8e3;text-align:left;font-size:.9rem}code{background:#eef3ee;padding:.1rem .3rem}
.new{background:#fff6d6;border:1px solid #e0c45c;padding:.75rem}.muted{color:#66756a}form.inline{display:inline}button{cursor:pointer}
body{overflow-wrap:break-word}button{white-space:nowrap}input,select{max-width:100%;box-sizing:border-box}svg{max-width:100%;height:auto}
.wide{overflow-x:auto}td code{white-space:nowrap}
td a{display:inline-block;max-width:16rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom}`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${esc(title)}</title><style>${STYLE}</style></head><body>${body}</body></html>`;
}

function send(reply: FastifyReply, status: number, html: string) {
  return reply
    .code(status)
    .headers({
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
      'x-frame-options': 'DENY',
      'referrer-policy': 'no-referrer',
    })
    .send(html);
}

/** Whether a path is the panel's: its unknown pages are its error page, not the API's JSON (../api/server.ts). */
export const isPanelPath = (path: string) => path === '/panel' || path.startsWith('/panel/');

/** A panel error: a page with the API's status and message, and the request's id. */
export function sendPanelError(req: FastifyRequest, reply: FastifyReply, status: number, message: string) {
  const body = `<p role="alert">${esc(message)}</p><p class="muted">Request ${esc(req.id)}</p>`;
  return send(reply, status, page('Account panel — error', `<h1>Account panel</h1>${body}<p><a href="/panel">Back to the panel</a></p>`));
}

const loginPage = (message = '') =>
  page('Account panel — sign in', `<h1>Account panel</h1>${message ? `<p role="alert">${esc(message)}</p>` : ''}
<form method="post" action="/panel/login"><label>API key <input name="api_key" type="password" autocomplete="off" size="50" required></label>
<button type="submit">Sign in</button></form>`);

/** Per-day bars of the month's billable answers, as inline SVG. */
export function usageChart(days: Map<number, number>, daysInMonth: number): string {
  const w = 18;
  const h = 100;
  const max = Math.max(1, ...days.values());
  const bars = Array.from({ length: daysInMonth }, (_, i) => {
    const n = days.get(i + 1) ?? 0;
    const bh = Math.round((n / max) * h);
    return `<rect x="${i * w + 2}" y="${h - bh + 4}" width="${w - 4}" height="${bh}" fill="#3f7d4e"><title>day ${i + 1}: ${n}</title></rect>` +
      (n ? `<text x="${i * w + w / 2}" y="${h - bh}" font-size="9" text-anchor="middle">${n}</text>` : '') +
      `<text x="${i * w + w / 2}" y="${h + 16}" font-size="9" text-anchor="middle" fill="#66756a">${i + 1}</text>`;
  }).join('');
  return `<svg role="img" aria-label="billable requests per day" width="${daysInMonth * w}" height="${h + 22}" viewBox="0 0 ${daysInMonth * w} ${h + 22}">${bars}</svg>`;
}

const iso = (d: Date | null) => (d ? d.toISOString().replace(/\.\d{3}Z$/, 'Z') : '');

async function dashboard(deps: ApiDeps, s: Session, q: Record<string, string | undefined>, flash: string): Promise<string> {
  const pool = deps.pool;
  const limits = PLAN_LIMITS[s.plan as Plan];
  const month = windowOf(Date.now()).month;
  const [y, m] = month.split('-').map(Number);
  const daysInMonth = new Date(Date.UTC(y, m, 0)).getUTCDate();
  // A filter that is not a calendar date is ignored (2026-02-30 or 0000-01-01 would fail the query).
  const from = typeof q.from === 'string' && isCalendarDate(q.from) ? q.from : null;
  const to = typeof q.to === 'string' && isCalendarDate(q.to) ? q.to : null;
  await flushHistory(pool); // the usage chart counts history rows: this process's buffered ones first
  const [usage, history, keys] = await Promise.all([
    usageByDay(pool, s.key_id, month),
    historyPage(pool, { keyId: s.key_id, from, to, before: null, limit: 50 }),
    accountKeys(pool, s.account),
  ]);
  const csrf = `<input type="hidden" name="csrf" value="${esc(s.csrf)}">`;
  const used = s.env === 'live' ? usage.used : 0;
  const pct = Math.round((used / limits.perMonth) * 100);
  const keyRow = (k: ApiKey) => {
    const active = k.revoked_at === null || k.revoked_at.getTime() > Date.now();
    const state = k.revoked_at === null ? 'active' : active ? `works until ${iso(k.revoked_at)}` : `revoked ${iso(k.revoked_at)}`;
    // A key already rotated (in its grace period) has a successor: only it can be rotated.
    const rotate = k.replaced_by ? '' : `<form class="inline" method="post" action="/panel/keys/${esc(k.id)}/rotate">${csrf}<button>Rotate</button></form>`;
    const actions = active && manageableEnvs(s).includes(k.env)
      ? `${rotate}
         <form class="inline" method="post" action="/panel/keys/${esc(k.id)}/revoke">${csrf}<button>Revoke</button></form>`
      : '';
    return `<tr data-key="${esc(k.id)}"><td><code>${esc(k.prefix)}…${esc(k.last4)}</code>${k.id === s.key_id ? ' (this session)' : ''}</td><td>${esc(k.name)}</td><td>${esc(k.env)}</td>
      <td class="state">${esc(state)}${k.replaced_by ? ` → ${esc(k.replaced_by)}` : ''}</td><td>${actions}</td></tr>`;
  };
  return page('Account panel', `<h1>Account panel</h1>
<p>Signed in with <code>${esc(s.key_id)}</code> (${esc(s.env)}${s.name ? `, ${esc(s.name)}` : ''}).
<form class="inline" method="post" action="/panel/logout">${csrf}<button>Sign out</button></form></p>
<nav><a href="/panel/webhooks">Webhooks and monitors</a></nav>
${flash}
<h2>Plan</h2><p><strong>${esc(s.plan)}</strong>: ${limits.perMinute} requests per minute, ${limits.perMonth} billable requests per month.</p>
<h2>Usage in ${esc(month)}</h2>
<p id="usage">${used} of ${limits.perMonth} (${pct} %)${s.env === 'test' ? ' — sandbox keys are never billed' : ''}</p>
${usageChart(usage.days, daysInMonth)}
<h2>History</h2>
<form method="get" action="/panel"><label>From <input type="date" name="from" value="${esc(from)}"></label>
<label>To <input type="date" name="to" value="${esc(to)}"></label> <button>Filter</button></form>
<div class="wide"><table id="history"><thead><tr><th>When (UTC)</th><th>Method</th><th>Path</th><th>Status</th><th>Billable</th><th>Legal basis</th></tr></thead><tbody>
${history.map((h) => `<tr><td>${esc(iso(h.created_at))}</td><td>${esc(h.method)}</td><td><code>${esc(maskCpfsInText(h.path))}</code></td><td>${h.status}</td><td>${h.billable ? 'yes' : 'no'}</td><td>${esc(h.lgpd_base)}</td></tr>`).join('\n')}
</tbody></table></div>${history.length === 0 ? '<p class="muted">No requests in this period.</p>' : ''}
<h2>Keys</h2>
<div class="wide"><table id="keys"><thead><tr><th>Key</th><th>Name</th><th>Env</th><th>State</th><th></th></tr></thead><tbody>${keys.map(keyRow).join('\n')}</tbody></table></div>
<form method="post" action="/panel/keys">${csrf}<input type="hidden" name="form_token" value="${formToken()}"><label>Name <input name="name" maxlength="100"></label>
<label>Env <select name="env">${manageableEnvs(s).map((e) => `<option${e === s.env ? ' selected' : ''}>${e}</option>`).join('')}</select></label>
<button type="submit">Create key</button></form>`);
}

const newKeyFlash = (key: string, note: string) =>
  `<div class="new" role="status"><p>${esc(note)} It is shown only now: store it.</p><p><code id="new-key">${esc(key)}</code></p></div>`;

export function panelRoutes(deps: ApiDeps) {
  return async (app: FastifyInstance) => {
    await app.register(cookie);
    await app.register(formbody, { bodyLimit: 16_384 });
    const config = { public: true };

    // A failure on a panel route (a form posted twice, sign-ins over the failure limit, a body
    // the form parser refuses) is a page with the API's status and message, not its JSON
    // envelope: the user is in a browser. Unexpected ones are logged as the API logs them.
    app.setErrorHandler(async (err, req, reply) => {
      const f = toFailure(err);
      if (f.unexpected) req.log[f.status >= 500 ? 'error' : 'warn']({ err }, 'request failed');
      reply.header('x-request-id', req.id).headers(f.headers);
      // A panel 429 is the failed-authentication limit (auth-failures.ts): the sign-in form, to retry later.
      if (f.status === 429) return send(reply, 429, loginPage(f.message));
      return sendPanelError(req, reply, f.status, f.message);
    });

    // `/panel/` (a typed or bookmarked URL) is the panel itself.
    app.get('/panel/', { config, schema: { hide: true } }, async (req, reply) => {
      const q = req.url.indexOf('?');
      return reply.code(308).header('location', '/panel' + (q >= 0 ? req.url.slice(q) : '')).send();
    });

    // A cookie or a sign-in that matches nothing counts against the address (auth-failures.ts);
    // an address over its limit is refused before the database read.
    const sessionFrom = async (req: FastifyRequest, reply: FastifyReply): Promise<Session | null> => {
      const t = req.cookies[COOKIE];
      if (!t) return null;
      deps.failures.check(req, reply);
      const s = await sessionOf(deps.pool, t);
      if (!s) deps.failures.fail(req.ip);
      return s;
    };
    const outOfDate = (reply: FastifyReply) =>
      send(reply, 403, page('Forbidden', '<h1>Forbidden</h1><p>The form is out of date (CSRF token). <a href="/panel">Reload the panel</a>.</p>'));
    const csrfOk = (req: FastifyRequest, s: Session) => sameToken(formText(req, 'csrf'), s.csrf);
    /** A signed-in POST: the session and its CSRF token, or the answer already sent. */
    const guard = async (req: FastifyRequest, reply: FastifyReply): Promise<Session | null> => {
      const s = await sessionFrom(req, reply);
      if (!s) {
        send(reply, 401, loginPage('Your session has ended: sign in again.'));
        return null;
      }
      if (!csrfOk(req, s)) {
        outOfDate(reply);
        return null;
      }
      return s;
    };
    const inAccount = async (s: Session, id: string) => (await accountKeys(deps.pool, s.account)).find((k) => k.id === id);
    const testOnly = (reply: FastifyReply) =>
      send(reply, 403, page('Forbidden', '<h1>Forbidden</h1><p>Signed in with a test key: only test keys can be created, revoked or rotated. Sign in with a live key. <a href="/panel">Back</a></p>'));
    /** A key of the session's account that it may manage, or the answer already sent. */
    const managedKey = async (req: FastifyRequest, reply: FastifyReply, s: Session): Promise<string | null> => {
      const k = await inAccount(s, (req.params as { id: string }).id);
      if (!k) {
        send(reply, 404, page('Not found', '<h1>Not found</h1><p>No such key in this account. <a href="/panel">Back</a></p>'));
        return null;
      }
      if (!manageableEnvs(s).includes(k.env)) {
        testOnly(reply);
        return null;
      }
      return k.id;
    };

    app.get('/panel', { config, schema: { hide: true } }, async (req, reply) => {
      const s = await sessionFrom(req, reply);
      if (!s) return send(reply, 200, loginPage());
      return send(reply, 200, await dashboard(deps, s, req.query as Record<string, string>, ''));
    });

    app.post('/panel/login', { config, schema: { hide: true } }, async (req, reply) => {
      deps.failures.check(req, reply);
      const key = formText(req, 'api_key');
      const found = checkKeyFormat(key) ? await findActiveKey(deps.pool, key) : null;
      if (!found) deps.failures.fail(req.ip);
      if (!found) return send(reply, 401, loginPage('Unknown, revoked or malformed API key.'));
      const { token } = await createSession(deps.pool, found.id);
      reply.setCookie(COOKIE, token, { path: '/panel', httpOnly: true, sameSite: 'strict', secure: req.protocol === 'https', maxAge: SESSION_HOURS * 3600 });
      return reply.code(303).header('location', '/panel').send();
    });

    app.post('/panel/logout', { config, schema: { hide: true } }, async (req, reply) => {
      const s = await guard(req, reply);
      if (!s) return reply;
      await endSession(deps.pool, req.cookies[COOKIE]!);
      reply.clearCookie(COOKIE, { path: '/panel' });
      return reply.code(303).header('location', '/panel').send();
    });

    app.post('/panel/keys', { config, schema: { hide: true } }, async (req, reply) => {
      const s = await guard(req, reply);
      if (!s) return reply;
      const asked = formText(req, 'env');
      const env = (KEY_ENVS as readonly string[]).includes(asked) ? (asked as KeyEnv) : s.env;
      if (!manageableEnvs(s).includes(env)) return testOnly(reply);
      const name = formText(req, 'name').slice(0, 100) || null;
      // A reload of the 201 page posts the form again, and its CSRF token (the session's) still
      // passes: each rendered form carries a fresh one-time token, and the key it made keeps it
      // (sql/0123), so a second POST of it finds that key, in whichever API process, instead of
      // making another. A form without one (a page of an older release) creates as before.
      const once = formText(req, 'form_token');
      if (once.length > 100) return outOfDate(reply);
      const o = { env, plan: s.plan as Plan, name, accountId: s.account };
      const k = once ? await createKeyOnce(deps.pool, o, once) : await createKey(deps.pool, o);
      if (!k) {
        const made = await keyOfFormToken(deps.pool, s.account, once);
        if (!made) return outOfDate(reply);
        return send(reply, 409, page('Account panel — already created', `<h1>Account panel</h1>
<p role="alert">This form already created key <code>${esc(made)}</code>: nothing new was created. Its secret was shown once, on the page that answered the form, and is not shown again.</p>
<p><a href="/panel">Back to the panel</a></p>`));
      }
      return send(reply, 201, await dashboard(deps, s, {}, newKeyFlash(k.key, `New ${env} key ${k.id} created.`)));
    });

    app.post('/panel/keys/:id/revoke', { config, schema: { hide: true } }, async (req, reply) => {
      const s = await guard(req, reply);
      if (!s) return reply;
      const id = await managedKey(req, reply, s);
      if (!id) return reply;
      await revokeKey(deps.pool, id);
      // The session's own key: the session ends with it; said, and its cookie dropped (a dead
      // cookie would count as a failed authentication on every later page).
      if (id === s.key_id) {
        await endSession(deps.pool, req.cookies[COOKIE]!);
        reply.clearCookie(COOKIE, { path: '/panel' });
        return send(reply, 200, loginPage(`Key ${id} revoked: this session, signed in with it, has ended.`));
      }
      return reply.code(303).header('location', '/panel').send();
    });

    app.post('/panel/keys/:id/rotate', { config, schema: { hide: true } }, async (req, reply) => {
      const s = await guard(req, reply);
      if (!s) return reply;
      const id = await managedKey(req, reply, s);
      if (!id) return reply;
      const r = await rotateKey(deps.pool, id, deps.cfg.api.keyRotationGraceHours);
      return send(reply, 201, await dashboard(deps, s, {}, newKeyFlash(r.key.key, `Key ${id} rotated: its successor is ${r.key.id}; the old key works until ${iso(r.old.expires_at)}.`)));
    });

    await webhookPanelRoutes(app, deps, { esc, page, send, sessionFrom, guard, outOfDate });
  };
}
