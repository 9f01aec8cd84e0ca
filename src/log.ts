// One logger for the process, writing JSON lines to stderr (stdout is for results).
// Every string that goes out is passed through the CPF mask.
import pino from 'pino';
import { maskCpfsInText } from './privacy.ts';

function scrub(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskCpfsInText(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) return { type: value.name, message: maskCpfsInText(value.message), stack: value.stack && maskCpfsInText(value.stack) };
  if (Array.isArray(value)) return value.map((v) => scrub(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrub(v, depth + 1);
  return out;
}

/**
 * `buffered`: lines are written in 4 KB batches instead of one write per line (the API's
 * request log: a syscall per request costs throughput); call flush() before exiting.
 */
export function createLogger(level: string, opts: { buffered?: boolean } = {}) {
  return pino(
    {
      level,
      base: undefined,
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((a) => scrub(a)) as Parameters<typeof method>);
        },
      },
    },
    opts.buffered ? pino.destination({ dest: 2, sync: false, minLength: 4096 }) : pino.destination({ dest: 2, sync: true }),
  );
}

export type Logger = ReturnType<typeof createLogger>;
