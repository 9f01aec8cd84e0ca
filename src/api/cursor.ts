// Opaque page cursors: base64url(JSON) + "." + HMAC-SHA256 tag. A cursor carries the
// snapshots it pages through (so a publish between two pages does not shift the pages),
// the last sort key, and a fingerprint of the query it belongs to. Tampered, truncated or
// borrowed from another query → 400 invalid_request naming `cursor`.
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

  encode(body: CursorBody): string {
    const payload = Buffer.from(JSON.stringify(body)).toString('base64url');
    return `${payload}.${this.#tag(payload)}`;
  }

  decode(cursor: string, fingerprint: string): CursorBody {
    const bad = (why: string): never => {
      throw new AgroError('invalid_request', `cursor: ${why}`);
    };
    const m = /^([A-Za-z0-9_-]{1,2048})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
    if (!m) return bad('not a cursor returned by this API');
    const want = Buffer.from(this.#tag(m[1]));
    const got = Buffer.from(m[2]);
    if (want.length !== got.length || !crypto.timingSafeEqual(want, got)) return bad('signature mismatch (altered or not issued by this API)');
    let body: CursorBody;
    try {
      body = JSON.parse(Buffer.from(m[1], 'base64url').toString('utf8'));
    } catch {
      return bad('not a cursor returned by this API');
    }
    if (body.q !== fingerprint) return bad('belongs to another query (same path and filters are required)');
    return body;
  }
}
