// The API server of bench/platform.ts: `agro serve`'s server, with the metering bypass switch
// (the benchmark's anchor) when started with --bypass. Prints {"url": …} once listening.
import { buildServer, createApiPool } from '../src/api/server.ts';
import { loadConfig } from '../src/config.ts';
import { createLogger } from '../src/log.ts';

const cfg = loadConfig(process.env);
const pool = createApiPool(cfg, cfg.databaseUrl!);
const app = await buildServer({ cfg, pool, log: createLogger('warn'), benchBypassMetering: process.argv.includes('--bypass') });
await app.listen({ port: 0, host: '127.0.0.1' });
const addr = app.server.address() as { port: number };
process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${addr.port}` }) + '\n');
const stop = async () => {
  await app.close();
  await pool.end();
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
