// X-LGPD-Base-Legal (contract §4): one of the ten legal bases of LGPD art. 7, as a token. The
// history records it on whatever authenticated route it is sent, so another value is a 400 on
// every one of them (the CPF lookups' schemas only declared it; elsewhere it passed unrecorded).
import type { FastifyRequest } from 'fastify';
import { AgroError } from '../errors.ts';
import { LGPD_BASES } from './car/schemas.ts';

export function checkLgpdBase(req: FastifyRequest): void {
  const v = req.headers['x-lgpd-base-legal'];
  if (v === undefined || !req.apiKey) return;
  if (typeof v !== 'string' || !(LGPD_BASES as readonly string[]).includes(v)) {
    throw new AgroError('invalid_request', `x-lgpd-base-legal: must be one of ${LGPD_BASES.join(', ')}`);
  }
}
