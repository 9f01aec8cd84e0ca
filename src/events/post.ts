// One delivery attempt: a POST of the raw body to the vetted address, 10 s for the whole
// exchange (connect, headers, body). Only 2xx is success; a 3xx is a failure too, because
// redirects are never followed (a redirect could point at a refused address).
import http from 'node:http';
import https from 'node:https';
import { isAgroError } from '../errors.ts';
import { parseTargetUrl, pinnedLookup, vetTarget } from './targets.ts';

export const DELIVERY_TIMEOUT_MS = 10_000;
const USER_AGENT = 'agro-data-webhooks/1 (+Standard Webhooks)';
const KEPT_RESPONSE_BYTES = 1_024;

export interface AttemptResult {
  ok: boolean;
  status: number | null;
  error: string | null;
  durationMs: number;
}

export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  o: { allowPrivate: boolean; timeoutMs?: number },
): Promise<AttemptResult> {
  const started = performance.now();
  const took = () => Math.round(performance.now() - started);
  let addrs;
  let u: URL;
  try {
    u = parseTargetUrl(url);
    addrs = await vetTarget(u, o.allowPrivate);
  } catch (e) {
    if (!isAgroError(e)) throw e;
    return { ok: false, status: null, error: e.message, durationMs: took() };
  }
  const timeoutMs = o.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (r: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, durationMs: took() });
    };
    const req = (u.protocol === 'https:' ? https : http).request(u, {
      method: 'POST',
      lookup: pinnedLookup(addrs),
      headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': USER_AGENT },
    });
    const timer = setTimeout(() => {
      finish({ ok: false, status: null, error: `no complete answer within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    req.on('error', (e: NodeJS.ErrnoException) => finish({ ok: false, status: null, error: `${e.code ?? 'error'}: ${e.message}` }));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      let kept = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (kept.length < KEPT_RESPONSE_BYTES) kept += chunk.slice(0, KEPT_RESPONSE_BYTES - kept.length);
      });
      res.on('error', (e) => finish({ ok: false, status, error: e.message }));
      res.on('end', () => {
        const ok = status >= 200 && status < 300;
        const why = ok ? null : status >= 300 && status < 400 ? `redirect to ${res.headers.location ?? '?'} not followed` : `answered ${status}${kept ? `: ${kept.trim().slice(0, 200)}` : ''}`;
        finish({ ok, status, error: why });
      });
    });
    req.end(body);
  });
}
