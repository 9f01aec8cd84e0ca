// A worker thread of the road distance: wraps the pieces' search structures it is sent
// (shared memory, nothing rebuilt), then measures the batches of binary COPY rows it is sent
// (threads.ts).
import { parentPort } from 'node:worker_threads';
import { measureRows } from './lines.ts';
import { RoadPieces, type RoadIndex } from './nearest.ts';

let roads: RoadPieces | undefined;
parentPort!.on('message', (m: { roads: RoadIndex } | { id: number; batch: ArrayBuffer }) => {
  // pieces that cannot be wrapped end the thread: its error reaches every batch (threads.ts)
  if ('roads' in m) {
    roads = new RoadPieces(m.roads);
    return;
  }
  try {
    if (!roads) throw new Error('road distance: a batch before the pieces');
    parentPort!.postMessage({ id: m.id, ...measureRows(roads, Buffer.from(m.batch)) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) });
  }
});
