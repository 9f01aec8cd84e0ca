// One logger for the process, on stderr (stdout is for results): JSON lines, or readable
// lines for people when stderr is a terminal (LOG_FORMAT=json forces JSON).
// Every string that goes out is passed through the CPF mask.
import pino from 'pino';
import { maskCpfsDeep } from './privacy.ts';
import { activeTerminal } from './progress.ts';

const scrub = (value: unknown) => maskCpfsDeep(value);

export type LogFormat = 'json' | 'pretty';

const LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };

/** A JSON log line as a person reads it: time, level, message, then the other fields as key=value. */
export function prettyLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json);
  } catch {
    return json.trimEnd();
  }
  const { level, time, msg, ...rest } = o;
  const t = typeof time === 'number' ? new Date(time).toISOString().slice(11, 19) : '';
  const lvl = LEVELS[level as number] ?? String(level);
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' ');
  return `${t} ${lvl === 'info' ? '' : lvl.toUpperCase() + ' '}${msg ?? ''}${fields ? `  ${fields}` : ''}`;
}

const prettyStream = {
  write(s: string) {
    const text = prettyLine(s);
    const term = activeTerminal();
    if (term && /"msg":"stage done"/.test(s)) return true; // the terminal's ✓ line says it
    if (term) term.line(text);
    else process.stderr.write(text + '\n');
    return true;
  },
};

/**
 * `format`: JSON lines, or readable lines for a terminal (src/progress.ts decides).
 * `buffered`: JSON lines are written in 4 KB batches instead of one write per line (the API's
 * request log: a syscall per request costs throughput); call flush() before exiting.
 */
export function createLogger(level: string, format: LogFormat = 'json', opts: { buffered?: boolean } = {}) {
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
    format === 'pretty'
      ? prettyStream
      : opts.buffered
        ? pino.destination({ dest: 2, sync: false, minLength: 4096 })
        : pino.destination({ dest: 2, sync: true }),
  );
}

export type Logger = ReturnType<typeof createLogger>;
