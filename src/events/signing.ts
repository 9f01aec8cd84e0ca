// Webhook secrets and signatures (contract §5). A secret is `whsec_<base64>`; the HMAC key is
// the decoded part, as in Standard Webhooks. The signed content is "<id>.<t>.<raw body>":
//   X-Service-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]   (one v1 per active secret)
//   webhook-id / webhook-timestamp / webhook-signature: v1,<base64>[ v1,<base64>]
import crypto from 'node:crypto';
import { AgroError } from '../errors.ts';

const PREFIX = 'whsec_';

export function newSecret(): string {
  return PREFIX + crypto.randomBytes(32).toString('base64');
}

/** The HMAC key of a secret; refuses anything that is not whsec_ + 16..64 bytes of base64. */
export function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : '';
  const key = Buffer.from(b64, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64) || key.length < 16 || key.length > 64 || key.toString('base64').replace(/=+$/, '') !== b64.replace(/=+$/, '')) {
    throw new AgroError('usage', 'a webhook secret is whsec_ followed by 16 to 64 bytes in base64');
  }
  return key;
}

const mac = (secret: string, id: string, t: number, body: string) => crypto.createHmac('sha256', secretKey(secret)).update(`${id}.${t}.${body}`);

/** The signature headers of one delivery, signed with every active secret (newest first). */
export function signatureHeaders(secrets: string[], id: string, t: number, body: string): Record<string, string> {
  const macs = secrets.map((s) => mac(s, id, t, body).digest());
  return {
    'x-service-signature': [`t=${t}`, ...macs.map((m) => `v1=${m.toString('hex')}`)].join(','),
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': macs.map((m) => `v1,${m.toString('base64')}`).join(' '),
  };
}
