// Admissions grouped into one round trip. A request's admission is sent at once when none of
// this process's is in flight; those that arrive meanwhile wait and leave together, as one
// statement (platform.admit_requests), when one returns. Under load a process thus makes one
// database round trip and one commit per handful of requests instead of one per request; idle,
// a request waits for nothing. The counts stay in the database, exact across processes.
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
    private readonly maxBatch = 8,
  ) {}

  admit(request: AdmissionRequest): Promise<Admission> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.maxInFlight && this.#queue.length > 0) {
      const batch = this.#queue.splice(0, this.maxBatch);
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
