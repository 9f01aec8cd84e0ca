// Headerless `;`-delimited CSV read straight out of zip members (Receita's CNPJ files,
// SOURCES §10.2): no file is unpacked to disk. Bytes are ISO-8859-1 (one byte, one
// character: a chunk boundary never splits one); records end at LF (CRLF tolerated);
// fields are usually all double-quoted with doubled quotes inside, unquoted ones are
// accepted. A quote inside a quoted field that is not followed by the delimiter or the
// end of the record is text (Receita writes `"BAR "DO ZE" LTDA"` unescaped): kept, counted.
// A record whose count is wrong is read again with a doubled quote before the delimiter or
// the record's end closing its field (`"BAR "DO ZE"";`: the nickname's quote, then the close).
// Every record must have exactly `fieldCount` fields; others are malformed, counted with
// their record numbers, and never reach the consumer.
import { Writable } from 'node:stream';
import { streamZipMembers, type ZipLimits } from './archive.ts';
import { writeOrWait } from './copy.ts';
import { distrustIfDamaged } from './download.ts';
import { decodeWindows1252 } from './read/windows-1252.ts';

export interface CsvSinkStats {
  records: number;
  malformed: number;
  /** First record numbers (1-based, per member) of malformed records, with their field counts. */
  malformedSamples: { member: string; record: number; fields: number }[];
  /** Quotes inside quoted fields kept as text. */
  strayQuotes: number;
  bytes: number;
}

const SAMPLE_LIMIT = 20;

/** Consumer of well-formed records: returns the text to write downstream (or '' for nothing). */
export type RecordHandler = (fields: string[]) => string;

/**
 * A Writable that parses latin1 CSV bytes (0x80–0x9F as Windows-1252: read/windows-1252.ts) into records and writes what `onRecord` returns
 * to `out` in batches, honouring its back-pressure. It does not end `out`.
 */
export class CsvRecordSink extends Writable {
  private carry = '';
  private record = 0;
  constructor(
    private readonly member: string,
    private readonly fieldCount: number,
    private readonly onRecord: RecordHandler,
    private readonly out: Writable,
    private readonly stats: CsvSinkStats,
  ) {
    super({ highWaterMark: 1 << 20 });
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.stats.bytes += chunk.length;
    let text: string;
    try {
      text = this.parse(this.carry + decodeWindows1252(chunk), false);
    } catch (e) {
      return cb(e as Error);
    }
    this.emit('progress', chunk.length);
    this.send(text, cb);
  }

  override _final(cb: (e?: Error | null) => void): void {
    let text: string;
    try {
      text = this.carry.length ? this.parse(this.carry, true) : '';
    } catch (e) {
      return cb(e as Error);
    }
    this.send(text, cb);
  }

  private send(text: string, cb: (e?: Error | null) => void): void {
    if (!text) return cb();
    writeOrWait(this.out, text).then(() => cb(), cb);
  }

  private accept(fields: string[]): string {
    this.record++;
    if (fields.length === this.fieldCount) {
      this.stats.records++;
      return this.onRecord(fields);
    }
    // A blank line at the end of a member is no record.
    if (fields.length === 1 && fields[0] === '') {
      this.record--;
      return '';
    }
    this.stats.malformed++;
    if (this.stats.malformedSamples.length < SAMPLE_LIMIT) this.stats.malformedSamples.push({ member: this.member, record: this.record, fields: fields.length });
    return '';
  }

  /** Parses whole records of `s`; keeps an incomplete last one in `carry` (unless at the end). */
  private parse(s: string, atEnd: boolean): string {
    let out = '';
    let i = 0;
    while (i < s.length) {
      let r = this.parseRecord(s, i, atEnd);
      if (r === null) {
        this.carry = s.slice(i);
        return out;
      }
      // A name ending in an unescaped quoted nickname ("BAR "DO ZE"";…) reads as a doubled
      // quote that swallows the next field; when the count is wrong, that reading is retried.
      if (r.fields.length !== this.fieldCount && !(r.fields.length === 1 && r.fields[0] === '')) {
        const alt = this.parseRecord(s, i, atEnd, true);
        if (alt && alt.fields.length === this.fieldCount) r = alt;
      }
      this.stats.strayQuotes += r.stray;
      out += this.accept(r.fields);
      i = r.next;
    }
    this.carry = '';
    return out;
  }

  /**
   * One record from `i`, or null when it may continue in the next chunk. With `closeDoubled`, a
   * doubled quote before the delimiter or the record's end is a quote that ends the field.
   */
  private parseRecord(s: string, i: number, atEnd: boolean, closeDoubled = false): { fields: string[]; next: number; stray: number } | null {
    const n = s.length;
    const fields: string[] = [];
    // Counted only once the record is complete: an incomplete one is parsed again with the next chunk.
    let stray = 0;
    for (;;) {
      if (i < n && s.charCodeAt(i) === 34 /* " */) {
        let value = '';
        let from = i + 1;
        for (;;) {
          const q = s.indexOf('"', from);
          if (q < 0) {
            if (!atEnd) return null;
            fields.push(value + s.slice(from));
            return { fields, next: n, stray };
          }
          if (q + 1 >= n && !atEnd) return null; // cannot tell yet what follows the quote
          const next = s.charCodeAt(q + 1);
          if (next === 34) {
            if (closeDoubled) {
              const after = s.charCodeAt(q + 2);
              if ((q + 2 >= n || (after === 13 && q + 3 >= n)) && !atEnd) return null;
              if (q + 2 >= n || after === 59 || after === 10 || (after === 13 && (q + 3 >= n || s.charCodeAt(q + 3) === 10))) {
                stray++;
                value += s.slice(from, q + 1);
                i = q + 2;
                break;
              }
            }
            value += s.slice(from, q + 1); // doubled quote
            from = q + 2;
            continue;
          }
          if (next === 13 && q + 2 >= n && !atEnd) return null;
          if (q + 1 >= n || next === 59 /* ; */ || next === 10 || (next === 13 && (q + 2 >= n || s.charCodeAt(q + 2) === 10))) {
            value += s.slice(from, q);
            i = q + 1;
            break;
          }
          stray++;
          value += s.slice(from, q + 1);
          from = q + 1;
        }
        fields.push(value);
      } else {
        let j = i;
        while (j < n) {
          const c = s.charCodeAt(j);
          if (c === 59 || c === 10) break;
          j++;
        }
        if (j >= n && !atEnd) return null;
        const v = s.slice(i, j);
        fields.push(v.endsWith('\r') ? v.slice(0, -1) : v);
        i = j;
      }
      if (i >= n) return { fields, next: n, stray };
      const c = s.charCodeAt(i);
      if (c === 59) {
        i++;
        continue;
      }
      if (c === 13) i++;
      if (i < n && s.charCodeAt(i) === 10) i++;
      return { fields, next: i, stray };
    }
  }
}

export interface MemberReadOptions {
  /** Members to read, by name (Receita: by suffix). */
  pick: (name: string) => boolean;
  fieldCount: number;
  onRecord: RecordHandler;
  /** Where the handler's text goes (a COPY stream); not ended here. */
  out: Writable;
  stats: CsvSinkStats;
  limits?: ZipLimits;
  /** Called with the bytes of every chunk read (progress). */
  onBytes?: (n: number) => void;
}

export const emptySinkStats = (): CsvSinkStats => ({ records: 0, malformed: 0, malformedSamples: [], strayQuotes: 0, bytes: 0 });

/**
 * Reads the picked CSV members of one zip into `out`. Errors of the consumer side (the
 * COPY) come back as themselves, not as a corrupt archive.
 */
export async function readZipCsv(file: string, o: MemberReadOptions): Promise<string[]> {
  let downstream: Error | null = null;
  const onOutError = (e: Error) => (downstream ??= e);
  o.out.on('error', onOutError);
  try {
    return await streamZipMembers(file, o.pick, (name) => {
      const sink = new CsvRecordSink(name, o.fieldCount, o.onRecord, o.out, o.stats);
      if (o.onBytes) sink.on('progress', o.onBytes);
      return sink;
    }, o.limits);
  } catch (e) {
    // A failed or destroyed COPY (the stream's own error may be emitted only later) is not
    // the zip's fault: the archive reader labels what its sink throws as corrupt, so the zip
    // is distrusted only when the output is intact (download.ts).
    const fromOut = downstream ?? o.out.errored ?? (o.out.destroyed ? e : null);
    if (fromOut) throw fromOut;
    await distrustIfDamaged(file, e);
    throw e;
  } finally {
    o.out.off('error', onOutError);
  }
}
