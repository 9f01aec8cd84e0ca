// Failed authentications per client address, in the process, before any database work: an
// unknown (well-formed) key, a panel sign-in or session cookie that matches nothing and an open
// GET /metrics each cost a query, so guessing keys or flooding them was a cheap denial of
// service. Over `perMinute` failures in a minute the address is refused (429) until its minute
// ends, except with a key the server has already checked and cached (no database read: a
// customer behind the same NAT or proxy as the flood keeps working). Successful requests never
// count. The table is bounded: expired windows go first, then the oldest entries.
import net from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AgroError } from '../errors.ts';

const WINDOW_MS = 60_000;

/** The 4 leading groups of an IPv6 address: one client holds a whole /64, counted as one. */
function ipv6Prefix64(ip: string): string {
  const bare = ip.split('%')[0];
  const [head, tail] = bare.split('::');
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups.slice(0, 4).map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/** What an address is counted as: an IPv4 address (mapped ones too) as is, an IPv6 one by its /64. */
export function addressBucket(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1];
  return net.isIPv6(ip) ? ipv6Prefix64(ip) : ip;
}

export class FailureLimiter {
  /** Insertion order is window-start order: a window that restarts is moved to the end. */
  readonly #windows = new Map<string, { start: number; n: number }>();

  constructor(
    /** Failures an address may make in a minute; 0 turns the limiter off. */
    private readonly perMinute: number,
    /** Addresses tracked at most (a flood of distinct addresses cannot grow the table further). */
    private readonly maxAddresses: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.#windows.size;
  }

  /** Seconds until `ip` may fail again, 0 when it is within its limit. */
  retryAfter(ip: string): number {
    if (this.perMinute <= 0) return 0;
    const w = this.#windows.get(addressBucket(ip));
    const left = w ? w.start + WINDOW_MS - this.now() : 0;
    return w && left > 0 && w.n >= this.perMinute ? Math.ceil(left / 1000) : 0;
  }

  /** Counts a failure of `ip`. */
  fail(ip: string): void {
    if (this.perMinute <= 0) return;
    const now = this.now();
    const bucket = addressBucket(ip);
    const w = this.#windows.get(bucket);
    if (w && now - w.start < WINDOW_MS) {
      w.n++;
      return;
    }
    this.#windows.delete(bucket);
    for (const [k, v] of this.#windows) {
      if (now - v.start < WINDOW_MS && this.#windows.size < this.maxAddresses) break;
      this.#windows.delete(k);
    }
    this.#windows.set(bucket, { start: now, n: 1 });
  }

  /** Throws 429 rate_limited, with Retry-After, when the request's address is over its limit. */
  check(req: FastifyRequest, reply: FastifyReply): void {
    const wait = this.retryAfter(req.ip);
    if (wait === 0) return;
    reply.header('retry-after', String(wait));
    throw new AgroError('rate_limited', `too many failed authentications from this address (${this.perMinute} per minute); retry in ${wait} s`);
  }
}
