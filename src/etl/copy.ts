// Bulk loading through COPY FROM STDIN (text format). Rows are encoded to lines,
// gathered into ~1 MB chunks (one write per row is slow) and streamed with
// pipeline(), so a failure on either side aborts the COPY cleanly and memory stays flat.
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { progress } from '../progress.ts';

const CHUNK_BYTES = 1 << 20;

export type CopyValue = string | number | boolean | null | undefined;

/** Escapes one value for COPY text format; null/undefined become \N. */
export function copyField(v: CopyValue): string {
  if (v === null || v === undefined) return '\\N';
  if (typeof v !== 'string') return String(v);
  // Backslash first, then the separators COPY treats specially.
  // NUL cannot be stored in PostgreSQL text at all; it is dropped.
  return /[\\\t\n\r\0]/.test(v)
    ? v.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/\0/g, '')
    : v;
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
