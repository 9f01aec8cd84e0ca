// One batch of COPY lines (car, uf, hex WKB of the property) in, the rows of the distance
// pair out (COPY text): the work a worker thread does for distancePair.
import { copyField } from '../copy.ts';
import { Polygon, type RoadPieces } from './nearest.ts';
import { polygonRings } from './wkb.ts';

/** Each line's nearest piece as `car, uf, fid, NULL, NULL, NULL, km`; properties without a nearest piece give no row. */
export function measureLines(roads: RoadPieces, batch: string): { out: string; rows: number } {
  let out = '';
  let rows = 0;
  for (let from = 0; from < batch.length; ) {
    let nl = batch.indexOf('\n', from);
    if (nl < 0) nl = batch.length;
    const line = batch.slice(from, nl);
    from = nl + 1;
    if (!line) continue;
    const t1 = line.indexOf('\t');
    const t2 = line.indexOf('\t', t1 + 1);
    if (t1 < 0 || t2 < 0) throw new Error(`road distance: unexpected COPY line: ${line.slice(0, 80)}`);
    const hit = roads.nearest(Polygon.reused.set(polygonRings(Buffer.from(line.slice(t2 + 1), 'hex'))));
    if (!hit) continue;
    // car and uf arrive as COPY text and leave as COPY text: no unescaping needed
    out += `${line.slice(0, t2)}\t${copyField(roads.fid[hit.piece])}\t\\N\t\\N\t\\N\t${hit.metres / 1000}\n`;
    rows++;
  }
  return { out, rows };
}
