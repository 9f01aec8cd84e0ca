// One logger for the process, writing JSON lines to stderr (stdout is for results).
// Every string that goes out is passed through the CPF mask.
import pino from 'pino';
import { maskCpfsDeep } from './privacy.ts';

const scrub = (value: unknown) => maskCpfsDeep(value);

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
