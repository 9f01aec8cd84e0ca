// A JSON body nested thousands of levels deep parses (JSON.parse does not recurse), but every
// recursive walk after it overflows the stack: JSON.stringify of a bad `layers` entry or
// geometry type in an error message, of the geometry sent to PostGIS, the Idempotency-Key's
// canonical form. The RangeError was a 500. No body of the API is deeper than a few levels (a
// MultiPolygon's coordinates are 4): deeper than MAX_BODY_DEPTH is refused before anything
// reads it, by a walk that keeps its own stack.
import type { FastifyRequest } from 'fastify';
import { AgroError } from '../errors.ts';

export const MAX_BODY_DEPTH = 32;

/** True when a value nests arrays or objects more than `max` levels deep. */
export function deeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x !== null && typeof x === 'object') stack.push([x, depth + 1]);
  }
  return false;
}

/** preValidation: refuses a body nested deeper than MAX_BODY_DEPTH. */
export function rejectDeepBody(req: FastifyRequest): void {
  if (deeperThan(req.body, MAX_BODY_DEPTH)) throw new AgroError('invalid_request', `body: nested deeper than ${MAX_BODY_DEPTH} levels of arrays and objects`);
}
