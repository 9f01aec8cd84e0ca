// Requests in flight per key, in the process: the data pool is shared by every key, and
// /v1/enriquecimento/territorial runs several statements at once, each up to the statement
// timeout, so one key firing many requests at once could hold every connection. A request
// counts the connections its route may hold at once (route config `connections`, 1 by
// default); over the limit a key's request is refused (429, Retry-After: 1) — a request alone is
// always let in. Its units are held until the route's handler has settled and the response is
// closed, whichever is later: a client that aborts does not free them while its statements
// still run, and an error or a refusal before the handler frees them with the response.
import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { AgroError } from '../errors.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's hold on its key's in-flight units (set once admitted). */
    inFlight?: Hold;
  }
  interface FastifyContextConfig {
    /** Database connections a request of this route may hold at once (the per-key in-flight limit counts these). */
    connections?: number;
  }
}

class Hold {
  #running = false;
  #closed = false;
  #freed = false;
  constructor(
    private readonly take: () => void,
    private readonly free: () => void,
  ) {}

  enter(): void {
    // Closed (the client gone) before the handler started: its statements still run, so it holds again.
    if (this.#freed) {
      this.#freed = false;
      this.take();
    }
    this.#running = true;
  }

  leave = (): void => {
    this.#running = false;
    if (this.#closed) this.#release();
  };

  closed = (): void => {
    this.#closed = true;
    if (!this.#running) this.#release();
  };

  #release(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.free();
  }
}

export class KeyConcurrency {
  readonly #held = new Map<string, number>();

  /** `limit`: units (connections) one key may hold at once. */
  constructor(private readonly limit: number) {}

  /** Units `meter` holds now. */
  held(meter: string): number {
    return this.#held.get(meter) ?? 0;
  }

  /** Takes the request's units for its key until it is done, or throws 429 rate_limited. */
  admit(req: FastifyRequest, reply: FastifyReply): void {
    const meter = req.apiKey!.meter;
    const units = Math.max(1, req.routeOptions.config?.connections ?? 1);
    const held = this.held(meter);
    if (held > 0 && held + units > this.limit) {
      reply.header('retry-after', '1');
      throw new AgroError('rate_limited', `concurrency limit: this key has requests in flight holding ${held} of its ${this.limit} database connections${units > 1 ? ` and this one would take ${units}` : ''}; retry in 1 s`);
    }
    const take = () => this.#held.set(meter, this.held(meter) + units);
    take();
    const hold = new Hold(take, () => {
      const left = this.held(meter) - units;
      if (left > 0) this.#held.set(meter, left);
      else this.#held.delete(meter);
    });
    req.inFlight = hold;
    reply.raw.once('close', hold.closed);
  }
}

/** onRoute: wraps the route's handler so that a request's hold lasts until the handler settles. */
export function holdThroughHandler(route: RouteOptions): void {
  const handler = route.handler;
  route.handler = function (this: unknown, req: FastifyRequest, reply: FastifyReply) {
    const hold = req.inFlight;
    if (!hold) return handler.call(this as never, req, reply);
    hold.enter();
    let out: unknown;
    try {
      out = handler.call(this as never, req, reply);
    } catch (e) {
      hold.leave();
      throw e;
    }
    if (out !== reply && typeof (out as PromiseLike<unknown> | undefined)?.then === 'function') (out as PromiseLike<unknown>).then(hold.leave, hold.leave);
    else hold.leave();
    return out;
  } as RouteOptions['handler'];
}
