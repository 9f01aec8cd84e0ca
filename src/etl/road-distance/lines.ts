// The rows of a binary COPY (car, uf, WKB of the property) in, the rows of the distance pair
// out (COPY text): the framing the main thread cuts batches by, and the work a worker thread
// does on a batch.
import { copyField } from '../copy.ts';
import { Polygon, type RoadPieces } from './nearest.ts';

/** Bytes of the binary COPY header: signature, flags, extension length (and the extension). */
export function copyHeaderLength(b: Buffer): number {
  if (b.length < 19) return -1;
  if (b.toString('latin1', 0, 11) !== 'PGCOPY\n\xff\r\n\0') throw new Error('road distance: not a binary COPY stream');
  const ext = b.readUInt32BE(15);
  return b.length < 19 + ext ? -1 : 19 + ext;
}

/**
 * Where the last complete row starting at or after `from` ends (`from` itself if none is
 * complete); -1 at the trailer (field count −1).
 */
export function completeRows(b: Buffer, from: number): { end: number; trailer: boolean } {
  let at = from;
  for (;;) {
    if (at + 2 > b.length) return { end: at, trailer: false };
    const fields = b.readInt16BE(at);
    if (fields === -1) return { end: at, trailer: true };
    let p = at + 2;
    for (let f = 0; f < fields; f++) {
      if (p + 4 > b.length) return { end: at, trailer: false };
      const len = b.readInt32BE(p);
      p += 4 + (len > 0 ? len : 0);
    }
    if (p > b.length) return { end: at, trailer: false };
    at = p;
  }
}

/** Each row's nearest piece as `car, uf, fid, NULL, NULL, NULL, km`; properties without a nearest piece give no row. */
export function measureRows(roads: RoadPieces, b: Buffer): { out: string; rows: number } {
  let out = '';
  let rows = 0;
  for (let at = 0; at < b.length; ) {
    const fields = b.readInt16BE(at);
    if (fields !== 3) throw new Error(`road distance: a COPY row of ${fields} fields`);
    at += 2;
    const field = (): Buffer | null => {
      const len = b.readInt32BE(at);
      at += 4;
      if (len < 0) return null;
      const v = b.subarray(at, at + len);
      at += len;
      return v;
    };
    const car = field(), uf = field(), wkb = field();
    if (!car || !wkb) throw new Error('road distance: a COPY row without car or geometry');
    const hit = roads.nearest(Polygon.reused.setWkb(wkb));
    if (!hit) continue;
    out += `${copyField(car.toString('utf8'))}\t${uf ? copyField(uf.toString('utf8')) : '\\N'}\t${copyField(roads.fid[hit.piece])}\t\\N\t\\N\t\\N\t${hit.metres / 1000}\n`;
    rows++;
  }
  return { out, rows };
}
