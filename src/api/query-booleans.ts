// Booleans in a query string as clients write them: Python's requests and .NET send `True` and
// `False`, PHP and many forms `1` and `0`; Ajv coerces only `true` and `false`, so
// `geometry=True` was a 400. Before validation, these spellings of a parameter the route
// declares boolean become `true`/`false`; anything else is left for the schema to refuse.
import type { FastifyRequest } from 'fastify';

const TRUE = /^(?:true|1)$/i;
const FALSE = /^(?:false|0)$/i;

/** preValidation: rewrites the boolean query parameters of the route in place. */
export function normalizeQueryBooleans(req: FastifyRequest): void {
  const props = (req.routeOptions.schema?.querystring as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties;
  const q = req.query as Record<string, unknown> | undefined;
  if (!props || !q) return;
  for (const [name, schema] of Object.entries(props)) {
    const v = q[name];
    if (schema.type !== 'boolean' || typeof v !== 'string') continue;
    if (TRUE.test(v)) q[name] = 'true';
    else if (FALSE.test(v)) q[name] = 'false';
  }
}
