// Worker threads for the road distance: the machine's cores measure batches of properties
// while the main thread streams them out of PostgreSQL and their rows back in. The threads
// start before the pieces are read (loading their modules takes a while); then each is sent
// the pieces' search structures, built once in shared memory, and wraps them.
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { RoadIndex } from './nearest.ts';

const WORKER = new URL('./worker-entry.mjs', import.meta.url);

/** The road threads a machine gets by default: one a core, at most four. */
export const threadsForCores = (): number => Math.max(1, Math.min(4, os.availableParallelism()));

interface Pending {
  resolve: (r: { out: string; rows: number }) => void;
  reject: (e: Error) => void;
}

export class NearestThreads {
  private readonly workers: Worker[];
  private readonly load: number[];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private failure: Error | undefined;
  private waiters: (() => void)[] = [];
  private closing = false;
  private shared = false;

  /** `heapMb`: each thread's heap limit (V8 would otherwise let each thread's garbage grow with the state). */
  constructor(threads = threadsForCores(), heapMb = 192) {
    // no thread at all would leave room() waiting for ever
    if (!Number.isInteger(threads) || threads < 1) throw new Error(`road distance: ${threads} worker threads (at least 1)`);
    if (!(heapMb > 0)) throw new Error(`road distance: a heap of ${heapMb} MB a thread`);
    this.workers = [];
    try {
      for (let k = 0; k < threads; k++) this.workers.push(new Worker(WORKER, { resourceLimits: { maxOldGenerationSizeMb: heapMb } }));
    } catch (e) {
      // the threads already started would keep the process alive
      for (const w of this.workers) void w.terminate();
      throw e;
    }
    this.load = this.workers.map(() => 0);
    this.workers.forEach((w, i) => {
      w.on('message', (m: { id: number; out?: string; rows?: number; error?: string }) => {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        this.load[i]--;
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve({ out: m.out!, rows: m.rows! });
        this.wake();
      });
      w.on('error', (e) => this.fail(e));
      w.on('messageerror', (e) => this.fail(e));
      // a thread only ends when closed: any other exit leaves its batches unanswered
      w.on('exit', (code) => {
        if (!this.closing) this.fail(new Error(`road distance: a worker thread exited (code ${code})`));
      });
    });
  }

  /**
   * Sends every thread the pieces to search (their numbers are shared, not copied), before
   * any batch; again for another road layer, once the batches in flight are answered.
   */
  share(roads: RoadIndex): void {
    if (this.pending.size) throw new Error('road distance: new pieces while batches are in flight');
    this.shared = true;
    for (const w of this.workers) w.postMessage({ roads });
  }

  /** A thread failed or exited: these threads take no more batches. */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Resolves once fewer than two batches a thread are in flight (backpressure for the reader). */
  async room(): Promise<void> {
    while (this.pending.size >= 2 * this.workers.length && !this.failure) await new Promise<void>((r) => this.waiters.push(r));
    if (this.failure) throw this.failure;
  }

  /** Hands a batch of binary COPY rows (its memory moves, not copied) to the least busy thread. */
  measure(batch: ArrayBuffer): Promise<{ out: string; rows: number }> {
    if (this.failure) return Promise.reject(this.failure);
    if (!this.shared) return Promise.reject(new Error('road distance: a batch before the pieces'));
    const worker = this.load.indexOf(Math.min(...this.load));
    const id = this.nextId++;
    this.load[worker]++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.workers[worker].postMessage({ id, batch }, [batch]);
    });
  }

  /** Ends the threads; batches still in flight are rejected, and so is any later one. */
  async close(): Promise<void> {
    this.closing = true;
    this.fail(new Error('road distance: the worker threads were closed'));
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  private fail(e: Error): void {
    this.failure ??= e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
