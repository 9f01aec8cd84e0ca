// Bulk loading through COPY FROM STDIN (text format). Rows are encoded to lines,
// gathered into ~1 MB chunks (one write per row is slow) and streamed with
// pipeline(), so a failure on either side aborts the COPY cleanly and memory stays flat.
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { progress } from '../progress.ts';

const CHUNK_BYTES = 1 << 20;

/**
 * What a NUL in a text value is loaded as: U+2400 SYMBOL FOR NULL ('␀'), which the text check
 * counts and shows (text-checks.ts) as it does stray C1 controls: a stray byte in a cell, not a
 * file read in the wrong encoding (U+FFFD, which blocks at one), so a few do not hold a month.
 */
export const NUL_STANDS_IN = '\u2400';

/**
 * JSON for a jsonb column (extra): JSON.stringify, with an escaped NUL (jsonb refuses \u0000:
 * a NUL in a column kept in extra failed the whole run as "internal error: unsupported Unicode
 * escape sequence") written as U+2400, like a NUL in text. An escaped backslash before
 * 'u0000' is left alone.
 */
export function jsonText(v: unknown): string {
  const json = JSON.stringify(v);
  return json.includes('\\u0000') ? json.replace(/(?<!\\)((?:\\\\)*)\\u0000/g, `$1${NUL_STANDS_IN}`) : json;
}

export type CopyValue = string | number | boolean | null | undefined;

/** Escapes one value for COPY text format; null/undefined become \N. */
export function copyField(v: CopyValue): string {
  if (v === null || v === undefined) return '\\N';
  if (typeof v !== 'string') return String(v);
  // Backslash first, then the separators COPY treats specially.
  // NUL cannot be stored in PostgreSQL text at all: it becomes U+2400, which the text check
  // counts and shows (dropping it turned NUM_TAD '57<NUL>48' into another term's '5748', uncounted).
  return /[\\\t\n\r\0]/.test(v)
    ? v.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\0/g, NUL_STANDS_IN)
    : v;
}

/**
 * Writes `chunk` to a COPY stream; when the stream is full, waits for it to drain. Fails
 * instead of waiting forever when the stream errors or is destroyed first (a failed family
 * destroys the others' streams, and a destroyed stream never drains).
 */
export async function writeOrWait(out: Writable, chunk: string | Buffer): Promise<void> {
  if (out.destroyed) throw out.errored ?? new Error('the COPY stream was closed');
  if (out.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const settle = (e?: Error | null) => {
      out.off('drain', onDrain);
      out.off('close', onClose);
      out.off('error', onError);
      if (e) reject(e);
      else resolve();
    };
    const onDrain = () => settle();
    const onError = (e: Error) => settle(e);
    const onClose = () => settle(out.errored ?? new Error('the COPY stream closed before it drained'));
    out.on('drain', onDrain);
    out.on('close', onClose);
    out.on('error', onError);
  });
}

export function copyLine(values: CopyValue[]): string {
  let line = '';
  for (let i = 0; i < values.length; i++) line += (i ? '\t' : '') + copyField(values[i]);
  return line + '\n';
}

async function* chunked(lines: Iterable<string> | AsyncIterable<string>): AsyncGenerator<string> {
  const p = progress();
  let buf = '';
  let n = 0;
  for await (const line of lines) {
    buf += line;
    n++;
    if (buf.length >= CHUNK_BYTES) {
      yield buf;
      p.rows(n);
      buf = '';
      n = 0;
    }
  }
  if (buf) yield buf;
  if (n) p.rows(n);
}

/** Streams encoded lines into `COPY <target> FROM STDIN`; returns the row count PostgreSQL reports. */
export async function copyLines(client: pg.ClientBase, target: string, lines: Iterable<string> | AsyncIterable<string>): Promise<number> {
  const stream = client.query(pgCopy.from(`COPY ${target} FROM STDIN`));
  await pipeline(Readable.from(chunked(lines)), stream);
  return Number(stream.rowCount ?? 0);
}
