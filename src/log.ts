// One logger for the process, writing JSON lines to stderr (stdout is for results).
// Every string that goes out is passed through the CPF mask.
import pino from 'pino';
import { maskCpfsDeep } from './privacy.ts';

const scrub = (value: unknown) => maskCpfsDeep(value);

export function createLogger(level: string) {
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
    pino.destination({ dest: 2, sync: true }),
  );
}

export type Logger = ReturnType<typeof createLogger>;
