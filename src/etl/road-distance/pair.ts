// One part of a (CAR snapshot, road snapshot) pair: every property's distance to the
// nearest road piece (nearest.ts), into `out`. The pieces are read once and their search
// structures built once, in shared memory, while the worker threads start (once per derive
// run with a RoadSession, which keeps both for the next CAR state); the properties
// stream out of PostgreSQL (binary COPY TO) in batches to worker threads (threads.ts), and the
// rows they return go to a temporary file that is copied into `out` at the end: one
// connection (it may be a publish transaction's), memory flat however large the state.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { createDistanceOut, linePiecesRows, propertyGeometriesCopy } from '../sql/overlaps.ts';
import type { Sql } from '../../sql.ts';
import { flattenPieces, RoadPieces, type RoadIndex } from './nearest.ts';
import { completeRows, copyHeaderLength } from './lines.ts';
import { NearestThreads } from './threads.ts';
import { agroTempDir } from '../temp-dirs.ts';

/** About 250 properties of 50 vertices: big enough to keep the message overhead small. */
const BATCH_BYTES = 256 * 1024;

/** A road layer's pieces and search structures, in shared memory, as the worker threads receive them. */
export async function loadRoadIndex(client: pg.ClientBase, pieces: Sql): Promise<RoadIndex> {
  const rows = await linePiecesRows(client, { pieces });
  return RoadPieces.buildIndex(flattenPieces(rows.map((r) => ({ pid: r.pid, fid: r.fid, rank: r.rank, points: r.wkb }))));
}

/** How many worker threads and each one's heap limit (NearestThreads' defaults when absent). */
export interface ThreadOptions {
  count?: number;
  heapMb?: number;
}

/**
 * The worker threads and the pieces' search structures, kept across the road pairs of one
 * derive run (ensureOverlaps): the threads start once, and each road layer's pieces are read
 * and indexed once, however many CAR states are measured against them. The pieces tables do
 * not change once built (overlaps.ts builds each once per road snapshot). Its owner closes it.
 */
export class RoadSession {
  private threads: NearestThreads | undefined;
  /** the pieces table whose structures the threads hold */
  private held: Sql | undefined;
  private readonly indexes = new Map<Sql, RoadIndex>();

  constructor(private readonly options: ThreadOptions = {}) {}

  /** The threads, started now if need be (new ones when the last ones failed). */
  async start(): Promise<NearestThreads> {
    if (this.threads?.failed) {
      await this.threads.close();
      this.threads = this.held = undefined;
    }
    return (this.threads ??= new NearestThreads(this.options.count, this.options.heapMb));
  }

  /** The pieces of `pieces` and their search structures: read and built the first time only. */
  async index(client: pg.ClientBase, pieces: Sql): Promise<RoadIndex> {
    let ix = this.indexes.get(pieces);
    if (!ix) this.indexes.set(pieces, (ix = await loadRoadIndex(client, pieces)));
    return ix;
  }

  /** Gives the threads the structures of `pieces`, unless they hold them already. */
  share(pieces: Sql, ix: RoadIndex): void {
    if (this.held === pieces) return;
    this.threads!.share(ix);
    this.held = pieces;
  }

  async close(): Promise<void> {
    const t = this.threads;
    this.threads = this.held = undefined;
    this.indexes.clear();
    await t?.close();
  }
}

/**
 * Fills `out` (created here) with car, uf, fid and distancia_km for each property of the
 * part. `session`: threads and pieces kept across the pairs of a derive run; without one the
 * pair starts its own threads (`threads`) and closes them.
 */
export async function distancePair(
  client: pg.ClientBase,
  v: { out: Sql; car: Sql; pieces: Sql; part: Sql; session?: RoadSession; threads?: ThreadOptions },
): Promise<{ rows: number }> {
  let dir: string | undefined;
  let fd: number | undefined;
  const session = v.session ?? new RoadSession(v.threads);
  let threads: NearestThreads | undefined;
  let done = 0;
  // A failure stops the work but not the reading: the COPY is drained (reading without
  // measuring is quick), so the connection comes back usable, and the first error is
  // thrown once it has.
  let failure: unknown;
  const inFlight = new Set<Promise<void>>();
  const send = async (rows: Buffer) => {
    if (failure !== undefined) return;
    try {
      await threads!.room();
    } catch (e) {
      failure ??= e;
      return;
    }
    // a copy of its own, so its memory can move to the thread
    const batch = new Uint8Array(rows).buffer;
    const job = threads!.measure(batch).then(
      (r) => {
        if (r.out && fd !== undefined) fs.writeSync(fd, r.out);
        done += r.rows;
      },
      (e) => {
        failure ??= e;
      },
    );
    inFlight.add(job);
    void job.finally(() => inFlight.delete(job));
  };
  try {
    // started first: each thread loads its modules while this one reads and indexes the pieces
    threads = await session.start();
    const roads = await session.index(client, v.pieces);
    await createDistanceOut(client, { out: v.out, car: v.car });
    if (roads.pid.length === 0) return { rows: 0 };
    session.share(v.pieces, roads);
    // threads already known to have died starting (a heap too small, a module that does
    // not load) fail the pair here, not after the whole property stream
    await threads.room();
    dir = agroTempDir('road');
    const file = path.join(dir, 'rows.tsv');
    fd = fs.openSync(file, 'w');
    // binary COPY: no hex to write or read; batches are cut at row boundaries
    let buf: Buffer = Buffer.alloc(0);
    let start = -1; // where the rows begin (after the header), once it has been read
    let trailer = false;
    const source = client.query(pgCopy.to(propertyGeometriesCopy({ car: v.car, part: v.part })));
    for await (const chunk of source as AsyncIterable<Buffer>) {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      if (start < 0) {
        start = copyHeaderLength(buf);
        if (start < 0) continue;
      }
      if (buf.length - start < BATCH_BYTES || trailer) continue;
      const r = completeRows(buf, start);
      trailer = r.trailer;
      if (r.end > start) await send(buf.subarray(start, r.end));
      buf = buf.subarray(r.end);
      start = 0;
    }
    if (start >= 0 && !trailer) {
      const r = completeRows(buf, start);
      if (!r.trailer) failure ??= new Error('road distance: the COPY stream ended inside a row');
      if (r.end > start) await send(buf.subarray(start, r.end));
    }
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
    closeFile();
    await pipeline(fs.createReadStream(file), client.query(pgCopy.from(`COPY ${v.out} (car, uf, fid, area_sobreposta_ha, percentual, ativo, distancia_km) FROM STDIN`)));
  } finally {
    if (!v.session) await session.close();
    closeFile();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }
  // closed once: by the end its number may belong to another file
  function closeFile(): void {
    const f = fd;
    fd = undefined;
    if (f !== undefined) fs.closeSync(f);
  }
  return { rows: done };
}
