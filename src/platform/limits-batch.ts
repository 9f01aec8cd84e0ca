// Admissions grouped into one round trip. A request's admission is sent at once when fewer
// than maxInFlight of this process's are in flight; those that arrive meanwhile wait and leave
// together, as one statement (platform.admit_requests), when one returns. Under load a process
// thus makes one database round trip and one commit per handful of requests instead of one per
// request (measured: about a sixth less CPU per metered request, server and database together);
// idle, a request waits for nothing. The counts stay in the database, exact across processes.
//
// A batch takes at most one request per API key: a batch holds its keys' counter rows locked
// until it commits, so a key's burst goes through one request per batch, interleaved with the
// other processes' requests for that key as before batching, and a key flooding one process
// delays only its own requests, never another key's.
import type pg from 'pg';
import { admitRequests, type Admission, type AdmissionRequest } from './limits.ts';

interface Waiting {
  request: AdmissionRequest;
  resolve(a: Admission): void;
  reject(e: unknown): void;
}

export class Admitter {
  #queue: Waiting[] = [];
  #inFlight = 0;

  constructor(
    private readonly pool: pg.Pool,
    /** Batches in flight at once (each holds a pooled connection while it runs). */
    private readonly maxInFlight = 2,
    private readonly maxBatch = 64,
  ) {}

  admit(request: AdmissionRequest): Promise<Admission> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      this.#pump();
    });
  }

  /** The next batch: the oldest waiting request of each key, up to maxBatch, in arrival order. */
  #take(): Waiting[] {
    const keys = new Set<string>();
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    for (const w of this.#queue) {
      if (batch.length < this.maxBatch && !keys.has(w.request.keyId)) {
        keys.add(w.request.keyId);
        batch.push(w);
      } else rest.push(w);
    }
    this.#queue = rest;
    return batch;
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#queue.length > 0) {
      const batch = this.#take();
      this.#inFlight++;
      admitRequests(this.pool, batch.map((w) => w.request))
        .then((as) => batch.forEach((w, i) => w.resolve(as[i])), (e) => batch.forEach((w) => w.reject(e)))
        .finally(() => {
          this.#inFlight--;
          this.#pump();
        });
    }
  }
}
