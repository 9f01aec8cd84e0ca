// The loop of a road-search worker thread: the grid arrives once (its typed arrays on
// shared memory), then pages of properties; each answer is the page's COPY lines.
import { parentPort } from 'node:worker_threads';
import { copyLine } from './copy.ts';
import { NearestLine, wkbPaths, type LineIndex } from './nearest-line.ts';

export interface PageRequest {
  id: number;
  cars: string[];
  ufs: string[];
  wkbs: Uint8Array[];
}

let nearest: NearestLine | undefined;
parentPort!.on('message', (m: { index: LineIndex } | PageRequest) => {
  if ('index' in m) {
    nearest = new NearestLine(m.index);
    return;
  }
  let lines = '';
  for (let i = 0; i < m.cars.length; i++)
    for (const c of nearest!.candidates(wkbPaths(m.wkbs[i]))) lines += copyLine([m.cars[i], m.ufs[i], c.fid, c.px, c.py, c.qx, c.qy]);
  parentPort!.postMessage({ id: m.id, lines });
});
