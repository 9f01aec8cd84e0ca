// Worker threads for the road search: the machine has two cores, and the search is the
// derive stage's one piece of work outside the database. The grid is shared (its typed
// arrays are copied once onto SharedArrayBuffers), pages are split across the threads.
import { Worker } from 'node:worker_threads';
import type { LineIndex } from './nearest-line.ts';
import type { PageRequest } from './nearest-line-thread.ts';

const WORKER = new URL('./nearest-line-worker.mjs', import.meta.url);

function shared<T extends Float64Array | Int32Array>(a: T): T {
  const ctor = a.constructor as { new (b: SharedArrayBuffer): T };
  const out = new ctor(new SharedArrayBuffer(a.byteLength));
  out.set(a);
  return out;
}

export class NearestLinePool {
  private readonly workers: Worker[] = [];
  private next = 0;
  private readonly waiting = new Map<number, { resolve: (s: string) => void; reject: (e: unknown) => void }>();

  constructor(index: LineIndex, threads: number) {
    const ix: LineIndex = {
      ...index,
      xy: shared(index.xy),
      feature: shared(index.feature),
      part: shared(index.part),
      cellStart: shared(index.cellStart),
      cellEdges: shared(index.cellEdges),
      cellXyz: shared(index.cellXyz),
    };
    for (let t = 0; t < threads; t++) {
      const w = new Worker(WORKER);
      w.on('message', (m: { id: number; lines: string }) => {
        this.waiting.get(m.id)?.resolve(m.lines);
        this.waiting.delete(m.id);
      });
      w.on('error', (e) => {
        for (const x of this.waiting.values()) x.reject(e);
        this.waiting.clear();
      });
      w.postMessage({ index: ix });
      w.unref(); // referenced only while a page is out (page())
      this.workers.push(w);
    }
  }

  /** The COPY lines of a page of properties, the page split across the threads. */
  async page(cars: string[], ufs: string[], wkbs: Uint8Array[]): Promise<string> {
    const n = this.workers.length;
    const size = Math.ceil(cars.length / n);
    const parts: Promise<string>[] = [];
    for (let t = 0; t < n && t * size < cars.length; t++) {
      const id = this.next++;
      const req: PageRequest = { id, cars: cars.slice(t * size, (t + 1) * size), ufs: ufs.slice(t * size, (t + 1) * size), wkbs: wkbs.slice(t * size, (t + 1) * size) };
      parts.push(new Promise<string>((resolve, reject) => this.waiting.set(id, { resolve, reject })));
      this.workers[t].ref();
      this.workers[t].postMessage(req);
    }
    try {
      return (await Promise.all(parts)).join('');
    } finally {
      for (const w of this.workers) w.unref();
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
