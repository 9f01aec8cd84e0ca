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
