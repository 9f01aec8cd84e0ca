// WebDAV folder listings (Nextcloud public shares: Receita's CNPJ months, SOURCES §10.1).
// PROPFIND with Depth: 1, answered by a 207 multistatus document that is parsed as XML
// (fast-xml-parser, namespace prefixes removed), never matched with regular expressions.
// Public shares authenticate with Basic auth: user = share token, empty password.
import http from 'node:http';
import https from 'node:https';
import { XMLParser } from 'fast-xml-parser';
import { AgroError } from '../errors.ts';

export interface DavEntry {
  /** Last path segment, decoded. */
  name: string;
  href: string;
  collection: boolean;
  size: number | null;
  lastModified: string | null;
  etag: string | null;
}

export interface DavOptions {
  userAgent: string;
  /** Basic-auth user (a share token) with an empty password. */
  token?: string;
  timeoutMs?: number;
}

const PROPFIND_BODY =
  '<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getcontentlength/><d:getlastmodified/><d:getetag/></d:prop></d:propfind>';

const parser = new XMLParser({ removeNSPrefix: true, ignoreAttributes: true, parseTagValue: false, isArray: (name) => name === 'response' || name === 'propstat' });

/** A URL without its user info, for messages. */
export const redactUrl = (u: URL): string => {
  const c = new URL(u.href);
  c.username = '';
  c.password = '';
  return c.href;
};

const asArray = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const text = (v: unknown): string | null => (v === undefined || v === null || typeof v === 'object' ? null : String(v));

/** Parses a multistatus document into entries (the folder itself included, as Depth 1 lists it). */
export function parseMultistatus(xml: string): DavEntry[] {
  const doc = parser.parse(xml) as { multistatus?: { response?: Record<string, unknown>[] } };
  if (!doc.multistatus) throw new AgroError('malformed_source', 'PROPFIND answer is not a DAV multistatus document');
  const out: DavEntry[] = [];
  for (const r of asArray(doc.multistatus.response)) {
    const href = text(r.href);
    if (!href) continue;
    // Properties come from the propstat whose status is 200.
    const ok = asArray(r.propstat as Record<string, unknown>[]).find((p) => /\s200\s/.test(` ${text(p.status) ?? ''} `)) ?? asArray(r.propstat as Record<string, unknown>[])[0];
    const prop = (ok?.prop ?? {}) as Record<string, unknown>;
    const rt = prop.resourcetype;
    const collection = typeof rt === 'object' && rt !== null && 'collection' in rt;
    const last = href.replace(/\/+$/, '').split('/').pop() ?? '';
    let name = last;
    try {
      name = decodeURIComponent(last);
    } catch {
      /* keep the raw segment */
    }
    const len = text(prop.getcontentlength);
    out.push({
      name, href, collection,
      size: len !== null && /^\d+$/.test(len) ? Number(len) : null,
      lastModified: text(prop.getlastmodified),
      etag: text(prop.getetag),
    });
  }
  return out;
}

/** The entries of a folder (the folder itself left out). 401/403/404: the share moved. */
export function propfind(folderUrl: string, o: DavOptions): Promise<DavEntry[]> {
  const u = new URL(folderUrl.endsWith('/') ? folderUrl : `${folderUrl}/`);
  const user = o.token ?? decodeURIComponent(u.username);
  const pass = o.token !== undefined ? '' : decodeURIComponent(u.password);
  u.username = '';
  u.password = '';
  const headers: Record<string, string> = { depth: '1', 'content-type': 'application/xml; charset=utf-8', 'user-agent': o.userAgent };
  if (user) headers.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  const request = u.protocol === 'https:' ? https.request : http.request;
  const timeoutMs = o.timeoutMs ?? 60_000;
  return new Promise((resolve, reject) => {
    const req = request(u, { method: 'PROPFIND', headers }, (res) => {
      const status = res.statusCode ?? 0;
      if (status === 401 || status === 403 || status === 404) {
        res.resume();
        return reject(new AgroError('source_not_found', `${redactUrl(u)}: HTTP ${status} on PROPFIND: the share token or folder has moved (update the configured share)`));
      }
      if (status !== 207 && status !== 200) {
        res.resume();
        return reject(new AgroError('download_failed', `${redactUrl(u)}: HTTP ${status} on PROPFIND`));
      }
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', (e) => reject(new AgroError('download_failed', `${redactUrl(u)}: ${e.message}`)));
      res.on('end', () => {
        try {
          const self = decodeURIComponent(u.pathname).replace(/\/+$/, '');
          resolve(parseMultistatus(Buffer.concat(chunks).toString('utf8')).filter((e) => {
            let p = e.href;
            try {
              p = decodeURIComponent(new URL(e.href, u).pathname);
            } catch {
              /* relative or odd href: compare as is */
            }
            return p.replace(/\/+$/, '') !== self;
          }));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`PROPFIND stalled for ${timeoutMs} ms`)));
    req.on('error', (e) => reject(new AgroError('download_failed', `${redactUrl(u)}: ${e.message}`)));
    req.end(PROPFIND_BODY);
  });
}
