// The one error envelope of the API: every failure, fastify's own included, becomes
// {"error": {"code", "message", "request_id"}} with the status of the catalogue
// (src/errors.ts). Unknown throws are the only 500s, and they are logged.
import { ERRORS, isAgroError, type ErrorCode } from '../errors.ts';
import { maskCpfsInText } from '../privacy.ts';

export interface ApiFailure {
  status: number;
  code: string;
  message: string;
  headers: Record<string, string>;
  /** True when the failure is not the client's doing (logged at error level). */
  unexpected: boolean;
}

/** Retry-After (seconds) of a 503. */
export const RETRY_AFTER_S = 5;

/** Catalogue codes whose API spelling differs (the reference's `code` strings). */
const API_CODE: Partial<Record<ErrorCode, string>> = {
  usage: 'invalid_request',
  internal: 'internal_error',
  database_unavailable: 'upstream_unavailable',
};

function fromCatalogue(code: ErrorCode, message: string): ApiFailure {
  const status = ERRORS[code].httpStatus;
  const headers: Record<string, string> = status === 503 ? { 'retry-after': String(RETRY_AFTER_S) } : {};
  return { status, code: API_CODE[code] ?? code, message, headers, unexpected: status >= 500 && status !== 503 };
}

interface AjvIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

/** `querystring/limit must be <= 100` → `limit: must be <= 100`. */
function validationMessage(issue: AjvIssue, context: string | undefined): { param: string; text: string } {
  const path = (issue.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
  const missing = issue.params?.missingProperty as string | undefined;
  const extra = issue.params?.additionalProperty as string | undefined;
  const param = [path, missing ?? extra].filter(Boolean).join('.') || context || 'request';
  let text = issue.message ?? 'is invalid';
  if (issue.keyword === 'enum' && Array.isArray(issue.params?.allowedValues)) text = `must be one of ${(issue.params.allowedValues as unknown[]).join(', ')}`;
  if (missing) text = 'is required';
  if (extra) text = 'is not a known field';
  return { param, text };
}

const CONNECTION_ERRORS = new Set(['3D000', 'ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EHOSTUNREACH', 'EPIPE', '57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08004', '08006']);

/** Maps anything thrown while serving a request to a failure. */
export function toFailure(err: unknown): ApiFailure {
  if (isAgroError(err)) {
    // The detail alone ("numero: …"): the code already says what kind of failure it is.
    const prefix = `${ERRORS[err.code].message}: `;
    return fromCatalogue(err.code, maskCpfsInText(err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message));
  }
  const e = err as { code?: string; statusCode?: number; message?: string; validation?: AjvIssue[]; validationContext?: string };
  if (Array.isArray(e.validation) && e.validation.length) {
    const { param, text } = validationMessage(e.validation[0], e.validationContext);
    if (e.validationContext === 'body' && /^geometry\b/.test(param)) return fromCatalogue('geometry_invalid', `${param} ${text}`);
    return fromCatalogue('invalid_request', maskCpfsInText(`${param}: ${text}`));
  }
  switch (e.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return fromCatalogue('unsupported_media_type', 'unsupported content type: send application/json');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fromCatalogue('payload_too_large', 'request body too large');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return fromCatalogue('invalid_request', `body: ${e.message ?? 'not valid JSON'}`);
    case 'FST_ERR_BAD_URL':
      return fromCatalogue('invalid_request', 'path: not a valid URL (a malformed percent-escape)');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { ...fromCatalogue('invalid_request', 'path: a path parameter is too long'), status: 414 };
    case '57014':
      return fromCatalogue('upstream_unavailable', 'the query took longer than the statement timeout; retry later');
    // A read replica (DATABASE_READ_URL) cancels a query that conflicts with what it replays (a
    // publish's view swap, retention's DROP TABLE, vacuum): transient, like a serialization failure.
    case '40001':
    case '40P01':
      return fromCatalogue('upstream_unavailable', 'the query was cancelled by a concurrent change to the data (a replica replaying a publish); retry later');
  }
  // Data exceptions (class 22: a value out of range, an unparsable number) can only come from
  // a request value that slipped past validation: the client's, never a 500.
  if (typeof e.code === 'string' && /^22[0-9A-Z]{3}$/.test(e.code)) {
    return { ...fromCatalogue('invalid_request', `a parameter value is out of range or malformed (${maskCpfsInText(e.message ?? '')})`), unexpected: true };
  }
  if ((e.code && CONNECTION_ERRORS.has(e.code)) || /timeout exceeded when trying to connect|Connection terminated|connect ECONNREFUSED/i.test(e.message ?? '')) {
    return fromCatalogue('upstream_unavailable', 'the database is unreachable; retry later');
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    const code: ErrorCode = e.statusCode === 404 ? 'not_found' : e.statusCode === 405 ? 'method_not_allowed' : e.statusCode === 413 ? 'payload_too_large' : e.statusCode === 415 ? 'unsupported_media_type' : 'invalid_request';
    return { ...fromCatalogue(code, maskCpfsInText(e.message ?? ERRORS[code].message)), status: e.statusCode };
  }
  return fromCatalogue('internal_error', 'internal error; report it with the request_id');
}

export function envelope(f: Pick<ApiFailure, 'code' | 'message'>, requestId: string) {
  return { error: { code: f.code, message: f.message, request_id: requestId } };
}
