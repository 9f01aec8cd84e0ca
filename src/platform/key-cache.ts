// Checked API keys, cached in the server so that a data request costs one database round
// trip, not two. Correctness rests on LISTEN: the trigger of sql/0020 notifies every change
// to a key row, and the entry goes at once. While the listening connection is down the cache
// is off (every request reads the database) and emptied; it comes back when it reconnects. A
// connection that stops answering without closing is found by a heartbeat and treated the same.
import type pg from 'pg';
import pgLib from 'pg';
import type { Logger } from '../log.ts';
import { findActiveKey, keySha256, type ActiveKey } from './keys.ts';

const CHANNEL = 'agro_api_keys';

export class KeyCache {
  readonly #entries = new Map<string, { key: ActiveKey; at: number }>();
  #client: pg.Client | null = null;
  #live = false;
  #stopped = false;
  /** Bumped by every notification: a read that started before one must not fill the cache. */
  #generation = 0;
  #retry: NodeJS.Timeout | null = null;
  #heartbeat: NodeJS.Timeout | null = null;

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly log: Logger,
    private readonly ttlMs = 60_000,
    /** A connection cut without a word (a load balancer or NAT dropping an idle one) delivers no notification and no error: asked every this often, under ttlMs. */
    private readonly heartbeatMs = 20_000,
  ) {}

  /** Starts listening in the background (never throws: without it the cache stays off). */
  start(): void {
    void this.#connect();
  }

  async #connect(): Promise<void> {
    if (this.#stopped) return;
    // Every statement of this connection answers within half a beat, or it is taken for dead (the heartbeat below).
    const client = new pgLib.Client({ ...this.connection, query_timeout: Math.max(1_000, this.heartbeatMs / 2) });
    const down = () => {
      if (this.#client !== client) return;
      if (this.#heartbeat) clearInterval(this.#heartbeat);
      this.#heartbeat = null;
      this.#live = false;
      this.#entries.clear();
      this.#generation++;
      this.#client = null;
      client.end().catch(() => {});
      if (!this.#stopped) this.#retry = setTimeout(() => void this.#connect(), 5_000);
    };
    this.#client = client;
    client.on('error', down);
    client.on('end', down);
    client.on('notification', (n) => {
      this.#generation++;
      if (n.payload) this.#entries.delete(n.payload);
      else this.#entries.clear();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      // A read that started before this point may hold a key changed before the LISTEN (no
      // notification will come for it): it must not fill the cache.
      this.#generation++;
      this.#live = !this.#stopped;
      // An answer within the beat, or the connection is taken for dead: the cache goes off and listens anew.
      this.#heartbeat = setInterval(() => {
        client.query('SELECT 1').catch((e: unknown) => {
          this.log.warn({ err: e }, 'API key cache: the listening connection does not answer; off until it listens again');
          down();
        });
      }, this.heartbeatMs);
      this.#heartbeat.unref();
    } catch (e) {
      this.log.warn({ err: e }, 'API key cache off: cannot listen for key changes');
      down();
    }
  }

  /** The active key with this value when the cache holds it, else null (never reads the database). */
  cached(key: string): ActiveKey | null {
    return this.#hit(keySha256(key).toString('hex'));
  }

  #hit(hash: string): ActiveKey | null {
    const hit = this.#live ? this.#entries.get(hash) : undefined;
    // A rotated key's grace period ends without any notification: checked on every hit.
    if (hit && Date.now() - hit.at < this.ttlMs && (hit.key.revoked_at === null || hit.key.revoked_at.getTime() > Date.now())) return hit.key;
    return null;
  }

  /** The active key with this value, from the cache or the database. */
  async find(pool: pg.Pool, key: string): Promise<ActiveKey | null> {
    const hash = keySha256(key).toString('hex');
    const hit = this.#hit(hash);
    if (hit) return hit;
    const generation = this.#generation;
    const found = await findActiveKey(pool, key);
    if (found && this.#live && generation === this.#generation) this.#entries.set(hash, { key: found, at: Date.now() });
    return found;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#live = false;
    if (this.#retry) clearTimeout(this.#retry);
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    const c = this.#client;
    this.#client = null;
    // A connection that stopped answering may never finish its goodbye: the server's close does not wait on it.
    if (c) await Promise.race([c.end().catch(() => {}), new Promise((r) => setTimeout(r, 2_000).unref())]);
  }
}
