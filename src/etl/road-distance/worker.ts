// A worker thread of the road distance: rebuilds the pieces once from the flat arrays it is
// given, then measures the batches of binary COPY rows it is sent (threads.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { measureRows } from './lines.ts';
import { RoadPieces, type RoadPiecesFlat } from './nearest.ts';

const roads = new RoadPieces(workerData as RoadPiecesFlat);
parentPort!.on('message', (m: { id: number; batch: ArrayBuffer }) => {
  try {
    parentPort!.postMessage({ id: m.id, ...measureRows(roads, Buffer.from(m.batch)) });
  } catch (e) {
    parentPort!.postMessage({ id: m.id, error: e instanceof Error ? e.message : String(e) });
  }
});
