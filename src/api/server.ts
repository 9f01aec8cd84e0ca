// The HTTP API (contract §4): a fastify instance built from a Config and a pool. Every
// response carries X-Request-Id; every failure is the one envelope of ./errors.ts; request
// logs are one line per response with the path's CPFs masked and no headers at all.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import pg from 'pg';
import type { Config } from '../config.ts';
import { AgroError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { maskRequestUrl } from '../privacy.ts';
import { KeyCache } from '../platform/key-cache.ts';
import { RefundRetries } from '../platform/refund-retry.ts';
import { FailureLimiter } from '../platform/auth-failures.ts';
import { holdThroughHandler, KeyConcurrency } from '../platform/in-flight.ts';
import { checkKeyFormat } from '../platform/keys.ts';
import { historyRoutes } from '../platform/history.ts';
import { HistoryWriter } from '../platform/history-writer.ts';
import { idempotencyOnSend, idempotencyPreHandler } from '../platform/idempotency.ts';
import { Admitter } from '../platform/limits-batch.ts';
import { admit, settle } from '../platform/metering.ts';
import { isPanelPath, panelRoutes, sendPanelError } from '../platform/panel.ts';
import { Drainer } from '../events/delivery.ts';
import { sandboxUrl } from '../platform/sandbox.ts';
import { carRoutes } from './car/routes.ts';
import { Cursors } from './cursor.ts';
import type { ApiDeps } from './deps.ts';
import { enriquecimentoRoutes } from './enriquecimento/routes.ts';
import { envelope, toFailure } from './errors.ts';
import { rejectNonFinite } from './finite-numbers.ts';
import { normalizeQueryBooleans } from './query-booleans.ts';
import { AllowedMethods } from './allowed-methods.ts';
import { rejectDeepBody } from './body-depth.ts';
import { checkLgpdBase, declareLgpdHeader } from './lgpd-base.ts';
import { completeOpenapi, declareBilling, OPENAPI_INFO, WEBHOOKS } from './meta/openapi.ts';
import { metaRoutes } from './meta/routes.ts';
import { ApiMetrics, metricsRoutes } from './metrics.ts';
import { socioRoutes } from './socio/routes.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Writes the query history rows this server still buffers (tests read the table directly). */
    flushHistory(): Promise<void>;
  }
  interface FastifyRequest {
    /** meter: what rate limits and the quota count on (a rotated key's successor shares its predecessor's). */
    apiKey?: { id: string; env: 'test' | 'live'; plan: string; meter: string };
  }
  interface FastifyContextConfig {
    /** No API key needed (health, OpenAPI, docs). */
    public?: boolean;
  }
}

// randomUUID draws from a cached entropy pool: a tenth of the cost of randomBytes per request.
export const newRequestId = () => `req_${crypto.randomUUID().replace(/-/g, '').slice(0, 24)}`;

/** The API's own pool: a statement timeout on every query, JIT off (as the loaders' pool). */
export function createApiPool(cfg: Config, url: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: cfg.api.poolSize,
    application_name: 'agro-api',
    options: '-c jit=off',
    statement_timeout: cfg.api.statementTimeoutMs,
    connectionTimeoutMillis: 5_000,
  });
  pool.on('error', () => {
    /* an idle client died; the next checkout reconnects */
  });
  return pool;
}

/** AGRO_TRUST_PROXY as fastify takes it (a hop count as the function fastify would make of it). */
function fastifyTrustProxy(t: Config['api']['trustProxy']): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof t === 'number') return (_address, hop) => hop < t;
  return typeof t === 'boolean' ? t : [...t];
}

/** An envelope written straight to a socket, for requests that never reach fastify; the connection is closed. */
function rawFailure(socket: Socket, status: number, reason: string, code: string, message: string) {
  const id = newRequestId();
  const body = JSON.stringify(envelope({ code, message }, id));
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `X-Request-Id: ${id}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/**
 * An answer for requests node's parser refuses (NUL bytes, oversized headers) or that do not
 * arrive within the request timeout (a client trickling bytes): still the envelope.
 */
function clientError(err: Error & { code?: string }, socket: Socket) {
  // A response already started on this socket (the route answered before the body ended): just close.
  const started = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (!socket.writable || started) return socket.destroy();
  if (err.code === 'HPE_HEADER_OVERFLOW') return rawFailure(socket, 431, 'Request Header Fields Too Large', 'invalid_request', `invalid request: malformed HTTP request (${err.code})`);
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return rawFailure(socket, 408, 'Request Timeout', 'request_timeout', 'the request (headers and body) did not arrive within the request timeout');
  rawFailure(socket, 400, 'Bad Request', 'invalid_request', `invalid request: malformed HTTP request (${err.code ?? 'parse error'})`);
}

// A CNPJ path parameter written with its mask as is: the '/' of 12.345.678/0001-90 unescaped.
const MASKED_CNPJ_PATH = /^(\/v1\/(?:car\/by-document|socio\/cnpj)\/[0-9A-Za-z]{2}\.?[0-9A-Za-z]{3}\.?[0-9A-Za-z]{3})\/([0-9A-Za-z]{4}-?[0-9A-Za-z]{2}(?:[?#].*)?)$/s;

/**
 * The reference lets a document carry its punctuation; a masked CNPJ's '/' would otherwise split
 * the path and answer 404 not_found, which a client reads as "no such company". Escaped before
 * routing, the route reads (and validates) the CNPJ.
 */
export const joinMaskedCnpj = (url: string): string => url.replace(MASKED_CNPJ_PATH, '$1%2F$2');

/** A pool's connection as a URL (the sandbox database is named after it). */
function poolUrl(pool: pg.Pool): string {
  const { connectionString, host, port, user, password, database } = pool.options;
  const auth = `${encodeURIComponent(user ?? '')}${typeof password === 'string' ? `:${encodeURIComponent(password)}` : ''}`;
  return connectionString ?? `postgres://${auth}@${host ?? '127.0.0.1'}:${port ?? 5432}/${encodeURIComponent(database ?? '')}`;
}

/** The envelope of any failure, with its status and headers (the error handler, fastify's framework errors). */
function sendFailure(err: unknown, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const f = toFailure(err);
  if (f.unexpected) req.log[f.status >= 500 ? 'error' : 'warn']({ err }, 'request failed');
  if (f.status === 401) reply.header('www-authenticate', 'Bearer');
  reply.header('x-request-id', req.id).headers(f.headers).code(f.status).type('application/json; charset=utf-8');
  return reply.send(envelope(f, req.id));
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * The request's key, or 401. A failure counts against the client's address (../platform/auth-failures.ts);
 * an address over its limit is refused before the key's database read unless the key is cached.
 */
async function authenticate(pool: pg.Pool, keys: KeyCache, failures: FailureLimiter, req: FastifyRequest, reply: FastifyReply): Promise<void> {
  const refuse = (message: string) => {
    failures.fail(req.ip);
    return new AgroError('unauthorized', message);
  };
  const header = req.headers.authorization;
  if (!header) throw refuse('send Authorization: Bearer <API key>');
  // Node keeps the first of repeated Authorization headers; a proxy may keep the last: refused, not guessed.
  if ((req.raw.headersDistinct.authorization?.length ?? 0) > 1) throw refuse('send one Authorization header');
  const m = BEARER.exec(header);
  if (!m) throw refuse('the Authorization header must be "Bearer <API key>"');
  if (!checkKeyFormat(m[1])) throw refuse('malformed API key');
  const cached = keys.cached(m[1]);
  if (!cached) failures.check(req, reply);
  const key = cached ?? (await keys.find(pool, m[1]));
  if (!key) throw refuse('unknown or revoked API key');
  req.apiKey = key;
}

export async function buildServer(o: {
  cfg: Config;
  /** The primary: keys, metering, history, idempotency, webhooks, and the data when there is no readPool. */
  pool: pg.Pool;
  /** A streaming replica of the primary that live keys' data is read from (DATABASE_READ_URL). */
  readPool?: pg.Pool;
  log: Logger;
  sandboxPool?: pg.Pool;
  /** Skips rate limit, quota, history, idempotency and the per-key in-flight limit: only the benchmarks set it (bench/platform.ts's anchor, bench/api.ts's query layer). */
  benchBypassMetering?: boolean;
  /** Drain the webhook outbox while serving (`agro serve`); stopped when the server closes. */
  drainWebhooks?: boolean;
  /** The metering clock (ms): tests set it to a month's last instant. */
  meteringClock?: () => number;
}) {
  const metering = !o.benchBypassMetering;
  // Test keys read the sandbox database (src/platform/sandbox.ts); its pool connects lazily.
  const sandbox = o.sandboxPool ?? createApiPool(o.cfg, sandboxUrl(o.cfg, poolUrl(o.pool)));
  const readPool = o.readPool ?? o.pool;
  const deps: ApiDeps = {
    cfg: o.cfg, pool: o.pool, readPool, replica: readPool !== o.pool, cursors: new Cursors(o.cfg.hmacKey),
    failures: new FailureLimiter(o.cfg.api.authFailuresPerMinute, o.cfg.api.authFailureAddresses),
    dataPool: (req) => (req.apiKey?.env === 'test' ? sandbox : readPool),
  };
  const log = o.log.child({ component: 'api' }, { redact: { paths: ['req.headers.authorization', 'headers.authorization', 'authorization'], censor: '[redacted]' } });
  const app = Fastify({
    loggerInstance: log,
    logController: new LogController({ disableRequestLogging: true }), // one line per response, ours (onResponse)
    genReqId: newRequestId,
    requestIdHeader: false,
    bodyLimit: o.cfg.api.bodyLimitBytes,
    routerOptions: { maxParamLength: 8_192 },
    rewriteUrl: (req) => joinMaskedCnpj(req.url ?? '/'),
    // Behind a trusted proxy: req.protocol and req.ip from X-Forwarded-Proto/-For (the panel's Secure cookie, the failure limiter).
    trustProxy: fastifyTrustProxy(o.cfg.api.trustProxy),
    clientErrorHandler: clientError,
    // The whole request must arrive within the timeout (fastify's default is none: a slow body held
    // its connection forever); the connections are checked every second. Node enforces it only when
    // the headers timeout is not longer (measured: a 60 s headers timeout left a 1 s request timeout
    // unenforced). A missing Host header is answered by the onRequest hook below, with the
    // envelope, instead of node's bare 400.
    requestTimeout: o.cfg.api.requestTimeoutMs,
    http: {
      requireHostHeader: false,
      headersTimeout: Math.min(60_000, o.cfg.api.requestTimeoutMs),
      connectionsCheckingInterval: Math.min(1_000, o.cfg.api.requestTimeoutMs),
    },
    // A malformed percent-escape in the path, a path segment over maxParamLength: the envelope too.
    frameworkErrors: (err, req, reply) => sendFailure(err, req, reply),
    // Unknown body fields are an error (a typo must not be silently ignored), not stripped.
    ajv: { customOptions: { allErrors: false, removeAdditional: false } },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // Every route's path and methods: another method on an existing path is 405 (setNotFoundHandler).
  const allowed = new AllowedMethods();
  app.addHook('onRoute', (route) => allowed.add(route));
  // A key's requests in flight hold their share of the pool until their handler has settled (../platform/in-flight.ts).
  const concurrency = new KeyConcurrency(o.cfg.api.keyMaxInFlight);
  if (metering) app.addHook('onRoute', holdThroughHandler);

  // Checked keys are cached, invalidated by LISTEN/NOTIFY on any change to a key row.
  const { connectionString, host, port, user, password, database, ssl } = o.pool.options;
  const keys = new KeyCache({ connectionString, host, port, user, password, database, ssl, application_name: 'agro-api-keys' }, log);
  keys.start();
  const drainer = o.drainWebhooks ? new Drainer({ pool: o.pool, cfg: o.cfg, log }).start() : null;
  // History rows are written in batches off the request path (src/platform/history-writer.ts).
  const history = new HistoryWriter(o.pool, log);
  const refunds = new RefundRetries(o.pool, log);
  const admitter = new Admitter(o.pool);
  app.decorate('flushHistory', () => history.flush());
  app.addHook('onClose', async () => {
    await drainer?.stop();
    await history.stop();
    await refunds.stop();
    await keys.stop();
    if (!o.sandboxPool) await sandbox.end();
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (req.raw.httpVersionMajor === 1 && req.raw.httpVersionMinor >= 1 && req.headers.host === undefined) {
      throw new AgroError('invalid_request', 'an HTTP/1.1 request needs a Host header');
    }
    const path = req.url.split('?')[0];
    const isPublic = req.routeOptions.config?.public === true || path === '/v1/docs' || path.startsWith('/v1/docs/');
    if (!isPublic && req.routeOptions.url !== undefined) {
      await authenticate(o.pool, keys, deps.failures, req, reply);
      if (metering) await admit(admitter, deps.cursors, req, reply, o.meteringClock?.());
      // After admission: requests waiting for it hold no connection (one key's go through one at a time).
      if (metering) concurrency.admit(req, reply);
    }
  });

  // Before anything walks the body: a JSON body nested thousands deep is a 400 (./body-depth.ts).
  app.addHook('preValidation', async (req) => rejectDeepBody(req));
  // Before validation: True/FALSE/1/0 of a boolean query parameter (./query-booleans.ts).
  app.addHook('preValidation', async (req) => normalizeQueryBooleans(req));
  // X-LGPD-Base-Legal on any authenticated route: one of the ten tokens (./lgpd-base.ts).
  app.addHook('preValidation', async (req) => checkLgpdBase(req));

  // After validation: ±Infinity that Ajv coerced from a string is refused (./finite-numbers.ts).
  app.addHook('preHandler', async (req) => rejectNonFinite(req));

  // Once the status is known: the refund of a reservation the answer does not use, and the
  // history row. Idempotency-Key on POST: after validation (a refused body is never claimed).
  if (metering) app.addHook('preHandler', async (req, reply) => idempotencyPreHandler(o.pool, req, reply, req.metering?.refusal));

  app.addHook('onSend', async (req, reply, payload) => {
    if (req.idempotency) await idempotencyOnSend(o.pool, req, reply, payload);
    if (req.metering) await settle(o.pool, history, refunds, req, reply);
  });

  // API latency by route pattern and status for GET /metrics (src/api/metrics.ts).
  const metrics = new ApiMetrics();
  app.addHook('onResponse', async (req, reply) => {
    metrics.observe(req, reply);
    if (!log.isLevelEnabled('info')) return;
    req.log.info(
      { method: req.method, url: maskRequestUrl(req.url, 200), status: reply.statusCode, ms: Math.round(reply.elapsedTime), key: req.apiKey?.id },
      'request',
    );
  });

  app.setErrorHandler(async (err, req, reply: FastifyReply) => sendFailure(err, req, reply));

  app.setNotFoundHandler(async (req, reply) => {
    const raw = req.url.split('?')[0];
    const path = maskRequestUrl(raw, 81);
    const shown = path.length > 80 ? path.slice(0, 80) + '…' : path;
    const allow = allowed.of(raw);
    // A route that answers this method and found nothing itself (a docs file that is not there) is a 404.
    const notAllowed = allow.length > 0 && !allow.includes(req.method);
    if (notAllowed) reply.header('allow', allow.join(', '));
    const [status, code, message] = notAllowed
      ? [405, 'method_not_allowed', `method not allowed: ${req.method} ${shown} (allowed: ${allow.join(', ')})`]
      : [404, 'not_found', `not found: no route ${req.method} ${shown}`];
    // Under /panel the user is in a browser: the panel's error page, as its other errors.
    if (isPanelPath(raw)) return sendPanelError(req, reply, status, message);
    reply.type('application/json; charset=utf-8').code(status);
    return envelope({ code, message }, req.id);
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: OPENAPI_INFO,
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'ck_live_… or ck_test_… API key' } } },
      security: [{ bearer: [] }],
      tags: [{ name: 'car' }, { name: 'socio' }, { name: 'enriquecimento' }, { name: 'meta' }],
      webhooks: WEBHOOKS as never,
    },
    transformObject: completeOpenapi as never,
  });
  await app.register(swaggerUi, { routePrefix: '/v1/docs', staticCSP: true, uiConfig: { docExpansion: 'list', deepLinking: false } });

  await app.register(
    async (v1) => {
      v1.addHook('onRoute', declareLgpdHeader);
      v1.addHook('onRoute', declareBilling);
      await v1.register(metaRoutes(deps));
      await v1.register(carRoutes(deps));
      await v1.register(socioRoutes(deps));
      await v1.register(enriquecimentoRoutes(deps));
      await v1.register(historyRoutes(deps));
      v1.get('/openapi.json', { schema: { hide: true }, config: { public: true } }, async () => app.swagger());
    },
    { prefix: '/v1' },
  );
  await app.register(panelRoutes(deps));
  await app.register(metricsRoutes({ cfg: o.cfg, pool: o.pool, metrics, history, failures: deps.failures }));
  // CONNECT and an Expect other than 100-continue never reach fastify: without a listener node
  // drops the socket without a word, or answers a bare 417.
  // The socket is ours once 'connect' fires: without an error listener a client's reset would crash the process.
  app.server.on('connect', (_req, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    rawFailure(socket, 405, 'Method Not Allowed', 'method_not_allowed', 'CONNECT is not supported');
  });
  app.server.on('checkExpectation', (req: IncomingMessage) => rawFailure(req.socket, 417, 'Expectation Failed', 'invalid_request', 'Expect: only 100-continue is supported'));
  return app;
}

export type ApiServer = Awaited<ReturnType<typeof buildServer>>;
