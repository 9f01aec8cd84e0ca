// Hosts that did not answer at all. A download whose every attempt failed before any answer
// (the name did not resolve, the connection was refused, unreachable or never accepted) marks
// its host; for the next 30 minutes another download from that host gets a single attempt
// while the host still does not answer, instead of its whole retry budget. A nightly of 27
// SICAR states against a dead WFS host otherwise spent ~4 minutes of backoff per state (about
// 1.8 hours), and the schedule's retries of the night multiplied that. Any answer (any HTTP
// status) forgets the host, and the download goes on with its budget.

/** Error codes of an attempt that never reached the server. */
const NO_ANSWER = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'CONNECT_TIMEOUT']);

/** How long a host stays marked after the last download that gave up on it. */
export const UNREACHABLE_MEMORY_MS = 30 * 60_000;

const marked = new Map<string, { at: number; code: string }>();

type NetError = { code?: unknown; syscall?: unknown; errors?: NetError[] } | null;

/**
 * The code of an error that means the server was never reached, else undefined. ETIMEDOUT
 * counts only from `connect` (it also ends established connections); trying every address of a
 * host (IPv4 and IPv6) fails with an AggregateError whose code and syscall are its first error's.
 */
export function noAnswerCode(e: unknown): string | undefined {
  const err = e as NetError;
  const code = err?.code;
  if (typeof code !== 'string') return undefined;
  if (code === 'ETIMEDOUT') return (err?.syscall ?? err?.errors?.[0]?.syscall) === 'connect' ? code : undefined;
  return NO_ANSWER.has(code) ? code : undefined;
}

export interface HostWatch {
  /** An attempt got an answer (any HTTP status, or a failure after the connection was made). */
  answered(): void;
  /** A failed attempt (`code` from noAnswerCode). True: the host was marked and still does not answer, so stop retrying. */
  failed(code: string | undefined): boolean;
  /** The download gives up: marks the host when no attempt reached it. Returns what to add to the error message. */
  gaveUp(): string;
}

/** One download's view of its host (`url`'s host and port). */
export function watchHost(url: string, now: () => number = Date.now): HostWatch {
  const host = new URL(url).host;
  const seen = marked.get(host);
  const earlier = seen && now() - seen.at < UNREACHABLE_MEMORY_MS ? seen : undefined;
  if (seen && !earlier) marked.delete(host);
  let reached = false;
  let last: string | undefined;
  return {
    answered() {
      reached = true;
      marked.delete(host);
    },
    failed(code) {
      if (!code) {
        this.answered();
        return false;
      }
      last = code;
      return earlier !== undefined && !reached;
    },
    gaveUp() {
      if (reached || !last) return '';
      marked.set(host, { at: now(), code: last });
      if (!earlier) return '';
      const minutes = Math.round((now() - earlier.at) / 60_000);
      return `; ${host} did not answer the download before either (${earlier.code}, ${minutes} min ago), so it got one attempt`;
    },
  };
}

/** Forgets every marked host (tests). */
export function forgetUnreachableHosts(): void {
  marked.clear();
}
