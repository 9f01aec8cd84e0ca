// Ajv coerces the strings "Infinity", "-Infinity" and "1e309" (in a query string, or a JSON
// string where a number is expected) to ±Infinity, and then skips minimum and maximum for a
// value that is not finite: `min_overlap: "-Infinity"` passed as 0..1 and `limit=Infinity`
// reached SQL. JSON itself cannot carry a non-finite number, so any left after validation came
// from such a string: a 400 naming the parameter.
import type { FastifyRequest } from 'fastify';
import { AgroError } from '../errors.ts';

/** The path of the first non-finite number in a validated value (`limit`, `layers.0`), or null. */
export function nonFinitePath(v: unknown, path = '', depth = 0): string | null {
  if (typeof v === 'number') return Number.isFinite(v) ? null : path || 'body';
  if (v === null || typeof v !== 'object' || depth > 8) return null;
  for (const [k, x] of Object.entries(v)) {
    const p = nonFinitePath(x, path ? `${path}.${k}` : k, depth + 1);
    if (p) return p;
  }
  return null;
}

/** preHandler: refuses a request whose validated query or body holds ±Infinity. */
export function rejectNonFinite(req: FastifyRequest): void {
  const at = nonFinitePath(req.query) ?? nonFinitePath(req.body);
  if (at !== null) throw new AgroError('invalid_request', `${at}: must be a finite number`);
}
