// The one error catalogue. Every expected failure is declared here once, with the
// exit code the CLI returns and the HTTP status the API answers with.

export interface ErrorSpec {
  exitCode: number;
  httpStatus: number;
  message: string;
}

export const ERRORS = {
  usage: { exitCode: 2, httpStatus: 400, message: 'usage error' },
  invalid_request: { exitCode: 2, httpStatus: 400, message: 'invalid request' },
  download_failed: { exitCode: 1, httpStatus: 502, message: 'download failed' },
  source_not_found: { exitCode: 1, httpStatus: 404, message: 'source not found' },
  html_instead_of_archive: { exitCode: 1, httpStatus: 502, message: 'an HTML page came instead of the expected file' },
  corrupt_archive: { exitCode: 1, httpStatus: 502, message: 'the archive is corrupt or truncated' },
  missing_layer_part: { exitCode: 1, httpStatus: 502, message: 'a shapefile part is missing' },
  no_layer: { exitCode: 1, httpStatus: 502, message: 'no layer found in the source' },
  required_field_missing: { exitCode: 1, httpStatus: 502, message: 'a required field is missing from the source' },
  malformed_source: { exitCode: 1, httpStatus: 502, message: 'the source file is malformed' },
  quality_gate: { exitCode: 3, httpStatus: 409, message: 'the quality gate refused to publish' },
  snapshot_not_found: { exitCode: 1, httpStatus: 404, message: 'snapshot not found' },
  nothing_to_rollback: { exitCode: 1, httpStatus: 409, message: 'no earlier snapshot to roll back to' },
  database_unavailable: { exitCode: 1, httpStatus: 503, message: 'the database is unreachable' },
  cluster: { exitCode: 1, httpStatus: 500, message: 'embedded cluster error' },
  internal: { exitCode: 1, httpStatus: 500, message: 'internal error' },
  run_in_progress: { exitCode: 1, httpStatus: 409, message: 'another run of this dataset is in progress' },
  nightly_in_progress: { exitCode: 1, httpStatus: 409, message: 'the night is taken' },
  archive_too_large: { exitCode: 1, httpStatus: 502, message: 'the archive inflates beyond the allowed size' },
  migration_waiting: { exitCode: 1, httpStatus: 503, message: 'a migration gave up waiting for the sessions using what it changes' },
  publish_lock_timeout: { exitCode: 1, httpStatus: 503, message: 'publishing gave up waiting for readers; the snapshot is kept for a later `agro publish`' },
  port_in_use: { exitCode: 1, httpStatus: 500, message: 'the embedded cluster port is in use' },
  disk_full: { exitCode: 1, httpStatus: 507, message: 'no space left on the disk' },
  // HTTP API (reference "Errors"; codes not in the reference are additive)
  unauthorized: { exitCode: 1, httpStatus: 401, message: 'missing, invalid or revoked API key' },
  car_not_found: { exitCode: 1, httpStatus: 404, message: 'CAR not found' },
  geometry_invalid: { exitCode: 2, httpStatus: 422, message: 'invalid geometry' },
  upstream_unavailable: { exitCode: 1, httpStatus: 503, message: 'the data is unavailable' },
  internal_error: { exitCode: 1, httpStatus: 500, message: 'internal error' },
  not_found: { exitCode: 1, httpStatus: 404, message: 'not found' },
  method_not_allowed: { exitCode: 2, httpStatus: 405, message: 'method not allowed' },
  payload_too_large: { exitCode: 2, httpStatus: 413, message: 'request body too large' },
  unsupported_media_type: { exitCode: 2, httpStatus: 415, message: 'unsupported content type' },
  key_not_found: { exitCode: 1, httpStatus: 404, message: 'API key not found' },
  interrupted: { exitCode: 1, httpStatus: 503, message: 'the run was interrupted; nothing was published' },
  schedule_config: { exitCode: 2, httpStatus: 400, message: 'invalid schedule file' },
  rate_limited: { exitCode: 1, httpStatus: 429, message: 'rate limit exceeded' },
  quota_exceeded: { exitCode: 1, httpStatus: 402, message: 'monthly plan quota exceeded' },
  idempotency_key_reused: { exitCode: 2, httpStatus: 422, message: 'idempotency key reused with another request' },
  idempotency_conflict: { exitCode: 1, httpStatus: 409, message: 'a request with this idempotency key is still running' },
  webhook_target_refused: { exitCode: 2, httpStatus: 422, message: 'webhook target refused' },
  event_not_found: { exitCode: 1, httpStatus: 404, message: 'event not found' },
  request_timeout: { exitCode: 1, httpStatus: 408, message: 'the request did not arrive in time' },
  form_used: { exitCode: 1, httpStatus: 409, message: 'the panel form was already sent' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export class AgroError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, unknown>;
  constructor(code: ErrorCode, detail?: string, details: Record<string, unknown> = {}) {
    super(detail ? `${ERRORS[code].message}: ${detail}` : ERRORS[code].message);
    this.name = 'AgroError';
    this.code = code;
    this.details = details;
  }
  get exitCode(): number {
    return ERRORS[this.code].exitCode;
  }
  get httpStatus(): number {
    return ERRORS[this.code].httpStatus;
  }
}

export function isAgroError(e: unknown, code?: ErrorCode): e is AgroError {
  return e instanceof AgroError && (code === undefined || e.code === code);
}

/**
 * A full disk, ours (ENOSPC: raw store, work folder, reports) or the database server's
 * (SQLSTATE 53100), as the catalogue's `disk_full` saying where and what to do; null for
 * any other error.
 */
export function diskFullError(e: unknown, dataDir?: string): AgroError | null {
  const err = e as { code?: unknown; path?: unknown; dest?: unknown } | null;
  if (err?.code === '53100') return new AgroError('disk_full', 'the database server has no space left for its data: free space on its disk, then run again; nothing was published');
  if (err?.code !== 'ENOSPC') return null;
  const where = typeof err.dest === 'string' ? err.dest : typeof err.path === 'string' ? err.path : dataDir;
  return new AgroError(
    'disk_full',
    `writing ${where ?? 'the data folder'}: free space there or point AGRO_DATA_DIR at a larger disk, then run again (a partial download is kept and resumed); nothing was published`,
  );
}
