// Quota refunds the database could not take: it went away while the request ran, the answer is
// a 503, and the unit reserved at admission stayed used — a failure billed. Kept in this
// process and made again once the database answers. A refund whose commit reached the database
// but whose answer was lost is made twice: one unit in the customer's favour, never a 5xx billed.
// A process that dies meanwhile loses them (as the history writer its last rows).
import type pg from 'pg';
import { isConnectionError } from '../db/pool.ts';
import type { Logger } from '../log.ts';
import { refundQuota } from './limits.ts';

const RETRY_MS = 1_000;

export class RefundRetries {
  /** Units to give back, per meter and month (`<meter> <month>`). */
  readonly #pending = new Map<string, { meter: string; month: string; units: number }>();
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Logger,
  ) {}

  /** Units waiting for the database. */
  get pending(): number {
    let n = 0;
    for (const p of this.#pending.values()) n += p.units;
    return n;
  }

  push(meter: string, month: string): void {
    const k = `${meter} ${month}`;
    const p = this.#pending.get(k) ?? { meter, month, units: 0 };
    p.units++;
    this.#pending.set(k, p);
    this.#timer ??= setTimeout(() => void this.retry(), RETRY_MS).unref();
  }

  /** Makes the pending refunds (one at a time); what the database still cannot take waits for the next try. */
  retry(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#running = this.#running.then(() => this.#refundAll());
    return this.#running;
  }

  async #refundAll(): Promise<void> {
    for (const [k, p] of this.#pending) {
      while (p.units > 0) {
        try {
          await refundQuota(this.pool, p.meter, p.month);
        } catch (err) {
          if (!isConnectionError(err)) {
            this.log.error({ err, meter: p.meter, month: p.month, units: p.units }, 'quota refund refused by the database: dropped');
            break;
          }
          this.#timer ??= setTimeout(() => void this.retry(), RETRY_MS).unref();
          return;
        }
        p.units--;
      }
      this.#pending.delete(k);
    }
  }

  /** A last try (server close). */
  async stop(): Promise<void> {
    await this.retry();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.pending > 0) this.log.error({ lost: this.pending }, 'quota refunds not made at close (database unreachable)');
  }
}
