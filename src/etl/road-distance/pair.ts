// One part of a (CAR snapshot, road snapshot) pair: every property's distance to the
// nearest road piece (nearest.ts), into `out`. The pieces are read once; the properties
// stream out of PostgreSQL (COPY TO) in batches to worker threads (threads.ts), and the
// rows they return go to a temporary file that is copied into `out` at the end: one
// connection (it may be a publish transaction's), memory flat however large the state.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { createDistanceOut, linePiecesRows, propertyGeometriesCopy } from '../sql/overlaps.ts';
import type { Sql } from '../../sql.ts';
import { RoadPieces, type RoadPiecesFlat } from './nearest.ts';
import { NearestThreads } from './threads.ts';
import { lineStringCoords } from './wkb.ts';

/** About 150 properties of 50 vertices: big enough to keep the message overhead small. */
const BATCH_CHARS = 256 * 1024;

/** A road layer's pieces as the worker threads receive them. */
export async function loadRoadFlat(client: pg.ClientBase, pieces: Sql): Promise<RoadPiecesFlat> {
  const rows = await linePiecesRows(client, { pieces });
  return RoadPieces.flatten(rows.map((r) => ({ pid: r.pid, fid: r.fid, rank: r.rank, coords: lineStringCoords(r.wkb) })));
}

/** A road layer's pieces, searchable in this thread. */
export async function loadRoadPieces(client: pg.ClientBase, pieces: Sql): Promise<RoadPieces> {
  return new RoadPieces(await loadRoadFlat(client, pieces));
}

/** Fills `out` (created here) with car, uf, fid and distancia_km for each property of the part. */
export async function distancePair(client: pg.ClientBase, v: { out: Sql; car: Sql; pieces: Sql; part: Sql }): Promise<{ rows: number }> {
  const roads = await loadRoadFlat(client, v.pieces);
  await createDistanceOut(client, { out: v.out, car: v.car });
  if (roads.pid.length === 0) return { rows: 0 };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agro-road-'));
  const file = path.join(dir, 'rows.tsv');
  let fd: number | undefined = fs.openSync(file, 'w');
  const threads = new NearestThreads(roads);
  let rows = 0;
  // A failure stops the work but not the reading: the COPY is drained, so the connection
  // comes back usable, and the first error is thrown once it has.
  let failure: unknown;
  const inFlight = new Set<Promise<void>>();
  const send = async (batch: string) => {
    if (failure !== undefined) return;
    try {
      await threads.room();
    } catch (e) {
      failure ??= e;
      return;
    }
    const job = threads.measure(batch).then(
      (r) => {
        if (r.out && fd !== undefined) fs.writeSync(fd, r.out);
        rows += r.rows;
      },
      (e) => {
        failure ??= e;
      },
    );
    inFlight.add(job);
    void job.finally(() => inFlight.delete(job));
  };
  try {
    const decoder = new StringDecoder('utf8');
    let rest = '';
    const source = client.query(pgCopy.to(propertyGeometriesCopy({ car: v.car, part: v.part })));
    for await (const chunk of source as AsyncIterable<Buffer>) {
      rest += decoder.write(chunk);
      if (rest.length < BATCH_CHARS) continue;
      const cut = rest.lastIndexOf('\n') + 1;
      if (cut === 0) continue;
      await send(rest.slice(0, cut));
      rest = rest.slice(cut);
    }
    rest += decoder.end();
    if (rest) await send(rest);
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
    fs.closeSync(fd);
    fd = undefined; // closed once: the number may belong to another file by the end
    await pipeline(fs.createReadStream(file), client.query(pgCopy.from(`COPY ${v.out} (car, uf, fid, area_sobreposta_ha, percentual, ativo, distancia_km) FROM STDIN`)));
  } finally {
    await threads.close();
    if (fd !== undefined) fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return { rows };
}
