// Which webhook targets are allowed (contract §5): never a private, loopback, link-local or
// otherwise non-public address, unless AGRO_WEBHOOKS_ALLOW_PRIVATE=1 (development, tests).
// The check is made on the addresses the host name resolves to, and the connection is made
// to the address that was checked (the resolver is this module's, so a name that resolves
// differently between the check and the connect cannot slip through). Redirects are never
// followed (a 3xx is a failed attempt), so a redirect cannot lead to a refused address.
import dns from 'node:dns';
import net from 'node:net';
import { AgroError } from '../errors.ts';

const BLOCKED = new net.BlockList();
for (const [a, p] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(a, p, 'ipv4');
for (const [a, p] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['64:ff9b::', 96], ['100::', 64],
] as const) BLOCKED.addSubnet(a, p, 'ipv6');

/** True for loopback, private, link-local, CGNAT, documentation, multicast and unspecified addresses. */
export function isNonPublicAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return isNonPublicAddress(mapped[1]);
  const family = net.isIP(ip);
  if (family === 0) return true;
  return BLOCKED.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/** Parses a webhook URL: http(s), no credentials. */
export function parseTargetUrl(raw: string): URL {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new AgroError('webhook_target_refused', `not a URL: ${raw.slice(0, 200)}`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new AgroError('webhook_target_refused', `${u.protocol} URLs are not delivered to (http or https)`);
  if (u.username || u.password) throw new AgroError('webhook_target_refused', 'credentials in the URL are not accepted (sign with the webhook secret instead)');
  return u;
}

const hostOf = (u: URL) => u.hostname.replace(/^\[|\]$/g, '');

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;
const systemResolver: Resolver = (host) => dns.promises.lookup(host, { all: true, verbatim: true });

/** The addresses a delivery to `u` may connect to; refuses the target when any of them is not public. */
export async function vetTarget(u: URL, allowPrivate: boolean, resolve: Resolver = systemResolver): Promise<{ address: string; family: number }[]> {
  const host = hostOf(u);
  let addrs: { address: string; family: number }[];
  if (net.isIP(host)) addrs = [{ address: host, family: net.isIP(host) }];
  else {
    try {
      addrs = await resolve(host);
    } catch (e) {
      throw new AgroError('webhook_target_refused', `${host} does not resolve (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  if (addrs.length === 0) throw new AgroError('webhook_target_refused', `${host} does not resolve`);
  if (!allowPrivate) {
    const bad = addrs.find((a) => isNonPublicAddress(a.address));
    if (bad) {
      throw new AgroError('webhook_target_refused', `${host} is ${bad.address}, a private, loopback or link-local address (AGRO_WEBHOOKS_ALLOW_PRIVATE=1 allows it in development)`);
    }
  }
  return addrs;
}

/** A `lookup` for http.request that answers only with the vetted addresses. */
export function pinnedLookup(addrs: { address: string; family: number }[]): net.LookupFunction {
  return ((_host: string, options: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
    const wanted = options.family === 4 || options.family === 6 ? addrs.filter((a) => a.family === options.family) : addrs;
    if (wanted.length === 0) return cb(Object.assign(new Error('no vetted address of the requested family'), { code: 'ENOTFOUND' }));
    if (options.all) cb(null, wanted);
    else cb(null, wanted[0].address, wanted[0].family);
  }) as unknown as net.LookupFunction;
}
