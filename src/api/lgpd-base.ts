// X-LGPD-Base-Legal (contract §4): one of the ten legal bases of LGPD art. 7, as a token. The
// history records it on whatever authenticated route it is sent, so another value is a 400 on
// every one of them, and every authenticated route declares it in the OpenAPI document.
import type { FastifyRequest, RouteOptions } from 'fastify';
import { Type, type TObject, type TSchema } from 'typebox';
import { AgroError } from '../errors.ts';
import { LGPD_BASES } from './car/schemas.ts';
import { documentedAuthenticated } from './meta/openapi.ts';

export function checkLgpdBase(req: FastifyRequest): void {
  const v = req.headers['x-lgpd-base-legal'];
  if (v === undefined || !req.apiKey) return;
  if (typeof v !== 'string' || !(LGPD_BASES as readonly string[]).includes(v)) {
    throw new AgroError('invalid_request', `x-lgpd-base-legal: must be one of ${LGPD_BASES.join(', ')}`);
  }
}

const LGPD_HEADER = Type.Optional(Type.String({ enum: [...LGPD_BASES], description: 'legal basis (LGPD art. 7), recorded in the query history; another value is 400 invalid_request' }));

/**
 * onRoute: adds the header to the schema of an authenticated, documented route that does not
 * declare it itself (the CPF lookups do, with their own description), so the OpenAPI document
 * lists it wherever checkLgpdBase applies.
 */
export function declareLgpdHeader(route: RouteOptions): void {
  if (!documentedAuthenticated(route)) return;
  const schema = route.schema as { headers?: TObject };
  const props: Record<string, TSchema> = { ...(schema.headers?.properties ?? {}) };
  if (props['x-lgpd-base-legal']) return;
  props['x-lgpd-base-legal'] = LGPD_HEADER;
  route.schema = { ...schema, headers: Type.Object(props) };
}
