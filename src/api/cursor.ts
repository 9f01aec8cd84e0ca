// Opaque page cursors: base64url(JSON) + "." + HMAC-SHA256 tag. A cursor carries the
// snapshots it pages through (so a publish between two pages does not shift the pages),
// the last sort key, a fingerprint of the query it belongs to, and the meter (API key) its first
// page was billed to. Tampered, truncated or borrowed from another query → 400 invalid_request
// naming `cursor`; borrowed from another key → served, and billed (src/platform/metering.ts).
import crypto from 'node:crypto';
import { AgroError } from '../errors.ts';

const TAG_LENGTH = 22; // 128 bits of the HMAC, base64url

export interface CursorBody {
  /** Fingerprint of the query (route + parameters other than cursor and limit). */
  q: string;
  /** Pinned snapshot ids, by name (e.g. sicar:GO, car-titulares). */
  s: Record<string, number>;
  /** Last sort key returned. */
  k: string;
  /** Cursors.meterTag of the meter the lookup was billed to: its following pages are free to that meter only (absent: issued before it was recorded). */
  m?: string;
}

export class Cursors {
  readonly #key: Buffer;
  constructor(secret: string) {
    // Domain separation: the same configured secret keys documento_hmac.
    this.#key = crypto.createHmac('sha256', secret).update('agro api cursor v1').digest();
  }

  #tag(payload: string): string {
    return crypto.createHmac('sha256', this.#key).update(payload).digest('base64url').slice(0, TAG_LENGTH);
  }

  static fingerprint(parts: unknown[]): string {
    return crypto.createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 16);
  }

  /** A meter (API key id) as a cursor names it: a digest, so that a cursor passed on does not show the key's id. */
  static meterTag(meter: string): string {
    return Cursors.fingerprint(['meter', meter]);
  }

  encode(body: CursorBody): string {
    const payload = Buffer.from(JSON.stringify(body)).toString('base64url');
    return `${payload}.${this.#tag(payload)}`;
  }

  /** The body of a cursor this API issued, or why it is not one. */
  #open(cursor: string): CursorBody | string {
    const m = /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
    if (!m) return 'not a cursor returned by this API';
    const want = Buffer.from(this.#tag(m[1]));
    const got = Buffer.from(m[2]);
    if (want.length !== got.length || !crypto.timingSafeEqual(want, got)) return 'signature mismatch (altered or not issued by this API)';
    try {
      const body = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8'));
      return body !== null && typeof body === 'object' ? body : 'not a cursor returned by this API';
    } catch {
      return 'not a cursor returned by this API';
    }
  }

  /** The body of a cursor this API issued, whatever query it belongs to; null otherwise (metering looks at its meter). */
  peek(cursor: string): CursorBody | null {
    const body = this.#open(cursor);
    return typeof body === 'string' ? null : body;
  }

  decode(cursor: string, fingerprint: string): CursorBody {
    const body = this.#open(cursor);
    const bad = (why: string): never => {
      throw new AgroError('invalid_request', `cursor: ${why}`);
    };
    if (typeof body === 'string') return bad(body);
    if (body.q !== fingerprint) return bad('belongs to another query (same path and filters are required)');
    return body;
  }
}
