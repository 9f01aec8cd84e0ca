// One part of a (CAR snapshot, road snapshot) pair: every property's distance to the
// nearest road piece (nearest.ts), into `out`. The pieces are read once into memory; the
// properties stream out of PostgreSQL (COPY TO), and their rows go to a temporary file
// that is copied into `out` at the end: one connection (it may be a publish transaction's),
// memory flat however many properties the state has.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { copyField } from '../copy.ts';
import { createDistanceOut, linePiecesRows, propertyGeometriesCopy } from '../sql/overlaps.ts';
import type { Sql } from '../../sql.ts';
import { Polygon, RoadPieces } from './nearest.ts';
import { lineStringCoords, polygonRings } from './wkb.ts';

const FLUSH_BYTES = 1 << 20;

export async function loadRoadPieces(client: pg.ClientBase, pieces: Sql): Promise<RoadPieces> {
  const rows = await linePiecesRows(client, { pieces });
  return new RoadPieces(rows.map((r) => ({ pid: r.pid, fid: r.fid, rank: r.rank, coords: lineStringCoords(r.wkb) })));
}

/** Fills `out` (created here) with car, uf, fid and distancia_km for each property of the part. */
export async function distancePair(client: pg.ClientBase, v: { out: Sql; car: Sql; pieces: Sql; part: Sql }): Promise<{ rows: number }> {
  const roads = await loadRoadPieces(client, v.pieces);
  await createDistanceOut(client, { out: v.out, car: v.car });
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'agro-road-')), 'rows.tsv');
  let fd: number | undefined = fs.openSync(file, 'w');
  let rows = 0;
  try {
    let buf = '';
    const emit = (line: string) => {
      buf += line;
      rows++;
      if (buf.length >= FLUSH_BYTES) {
        fs.writeSync(fd!, buf);
        buf = '';
      }
    };
    // A failure on one line stops the work but not the reading: the COPY is drained, so the
    // connection comes back usable, and the error is thrown once it has.
    let failure: unknown;
    const onLine = (line: string) => {
      if (failure !== undefined) return;
      try {
        const t1 = line.indexOf('\t');
        const t2 = line.indexOf('\t', t1 + 1);
        if (t1 < 0 || t2 < 0) throw new Error(`road distance: unexpected COPY line: ${line.slice(0, 80)}`);
        const poly = Polygon.reused.set(polygonRings(Buffer.from(line.slice(t2 + 1), 'hex')));
        const hit = roads.nearest(poly);
        if (!hit) return;
        // car and uf arrive as COPY text and leave as COPY text: no unescaping needed
        emit(`${line.slice(0, t1)}\t${line.slice(t1 + 1, t2)}\t${copyField(roads.fid[hit.piece])}\t\\N\t\\N\t\\N\t${hit.metres / 1000}\n`);
      } catch (e) {
        failure = e;
      }
    };
    const decoder = new StringDecoder('utf8');
    let rest = '';
    const source = client.query(pgCopy.to(propertyGeometriesCopy({ car: v.car, part: v.part })));
    for await (const chunk of source as AsyncIterable<Buffer>) {
      const text = rest + decoder.write(chunk);
      let from = 0;
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
        onLine(text.slice(from, nl));
        from = nl + 1;
      }
      rest = text.slice(from);
    }
    rest += decoder.end();
    if (rest) onLine(rest);
    if (failure !== undefined) throw failure;
    if (buf) fs.writeSync(fd, buf);
    fs.closeSync(fd);
    fd = undefined; // closed once: the number may belong to another part's file by the end
    await pipeline(fs.createReadStream(file), client.query(pgCopy.from(`COPY ${v.out} (car, uf, fid, area_sobreposta_ha, percentual, ativo, distancia_km) FROM STDIN`)));
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
  return { rows };
}
