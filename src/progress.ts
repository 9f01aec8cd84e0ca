// Progress of a run for people at a terminal. The engine reports a few events (a run
// starts, a stage starts or ends, bytes downloaded, rows staged) to the reporter of the
// current async context; nothing is reported unless a command installed one (a TTY).
// The TTY renderer keeps one live line per stage, redrawn in place, and prints log lines
// above it so that the two never interleave.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface ProgressReporter {
  runStart(label: string): void;
  stageStart(stage: string): void;
  stageEnd(stage: string, ok: boolean): void;
  /** Bytes of the file `file` downloaded so far, and its size when the server declared one. */
  bytes(file: string, done: number, total: number | null): void;
  /** Rows written to staging since the last call. */
  rows(added: number): void;
}

const NOOP: ProgressReporter = { runStart() {}, stageStart() {}, stageEnd() {}, bytes() {}, rows() {} };
const store = new AsyncLocalStorage<ProgressReporter>();

/** The reporter of the current run (a no-op outside one). */
export const progress = (): ProgressReporter => store.getStore() ?? NOOP;

export function withProgress<T>(reporter: ProgressReporter, fn: () => Promise<T>): Promise<T> {
  return store.run(reporter, fn);
}

/** Installs a reporter for the rest of this async flow (a command's whole life). */
export function enterProgress(reporter: ProgressReporter): void {
  store.enterWith(reporter);
}

/**
 * For a command at a terminal (stderr a TTY, LOG_FORMAT not json): readable log lines and
 * live progress lines. Returns the log format to use.
 */
export function setupTerminal(logFormat: 'json' | 'auto', dumbTerminal = false, stderr: NodeJS.WriteStream = process.stderr): 'json' | 'pretty' {
  if (logFormat === 'json' || !stderr.isTTY) return 'json';
  const t = new TtyProgress(stderr, Date.now, 100, dumbTerminal);
  setTerminal(t);
  enterProgress(t);
  return 'pretty';
}

export function formatBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${s} s`;
  const m = Math.floor(s / 60);
  return m < 60 ? `${m} min ${s % 60} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');

interface StageState {
  stage: string;
  t0: number;
  /** Bytes (and declared sizes) of the files finished in this stage, and of the one under way. */
  doneBytes: number;
  doneTotal: number | null;
  file: number;
  fileTotal: number | null;
  files: number;
  fileName: string | null;
  rows: number;
}

/** What the live line of a stage says at `now` (ETA only when the total is known). */
export function describeStage(label: string, s: StageState, now: number): string {
  const secs = Math.max((now - s.t0) / 1000, 0.001);
  const parts = [`${label} · ${s.stage}`];
  const bytes = s.doneBytes + s.file;
  // A total is known while every file so far declared its size (the ETA is for the file under way).
  const total = s.fileTotal !== null && s.doneTotal !== null ? s.doneTotal + s.fileTotal : null;
  if (bytes > 0) {
    if (s.files > 1) parts.push(`file ${s.files}`);
    parts.push(total ? `${formatBytes(bytes)} of ${formatBytes(total)} (${Math.floor((100 * bytes) / total)} %)` : formatBytes(bytes));
    const rate = bytes / secs;
    parts.push(`${formatBytes(rate)}/s`);
    if (total && total > bytes && rate > 0) parts.push(`ETA ${formatDuration(((total - bytes) / rate) * 1000)}`);
  }
  if (s.rows > 0) parts.push(`${int(s.rows)} rows`, `${int(s.rows / secs)} rows/s`);
  parts.push(formatDuration(now - s.t0));
  return parts.join(' · ');
}

/** A terminal line writer: log lines go above the live progress line. */
export class TtyProgress implements ProgressReporter {
  private label = '';
  private cur: StageState | null = null;
  private live = '';
  private lastDraw = 0;

  constructor(
    private readonly out: NodeJS.WriteStream | { write(s: string): boolean; columns?: number },
    private readonly now: () => number = Date.now,
    private readonly minIntervalMs = 100,
    /** TERM=dumb (an editor's shell buffer, a serial console): no escape codes, spaces clear the line. */
    private readonly dumb = false,
  ) {}

  /** What the live line shows now, for a dumb terminal's clearing. */
  private shown = 0;

  /** Back to the start of the live line, cleared. */
  private clear(): string {
    return this.dumb ? `\r${' '.repeat(this.shown)}\r` : '\r\x1b[2K';
  }

  /** Prints a finished line (a log line, a stage summary) and redraws the live line below it. */
  line(text: string): void {
    this.out.write(`${this.clear()}${text}\n${this.live}`);
    this.shown = this.live.length;
  }

  private trailing: NodeJS.Timeout | null = null;

  private draw(force = false): void {
    if (!this.cur) return;
    const t = this.now();
    if (!force && t - this.lastDraw < this.minIntervalMs) {
      // Throttled: the latest state is drawn a little later, so a stall shows where it stalled.
      this.trailing ??= setTimeout(() => {
        this.trailing = null;
        this.draw(true);
      }, this.minIntervalMs - (t - this.lastDraw)).unref();
      return;
    }
    this.lastDraw = t;
    const width = Math.max(40, (this.out.columns || 120) - 1);
    this.live = describeStage(this.label, this.cur, t).slice(0, width);
    this.out.write(`${this.clear()}${this.live}`);
    this.shown = this.live.length;
  }

  runStart(label: string): void {
    this.label = label;
  }

  stageStart(stage: string): void {
    this.cur = { stage, t0: this.now(), doneBytes: 0, doneTotal: 0, file: 0, fileTotal: null, files: 0, fileName: null, rows: 0 };
    this.draw(true);
  }

  stageEnd(stage: string, ok: boolean): void {
    if (!this.cur || this.cur.stage !== stage) return;
    const summary = describeStage(this.label, this.cur, this.now());
    this.cur = null;
    this.live = '';
    this.line(`${ok ? '✓' : '✗'} ${summary}`);
  }

  bytes(file: string, done: number, total: number | null): void {
    const c = this.cur;
    if (!c) return;
    if (c.fileName !== file) {
      c.fileName = file;
      if (c.files > 0) {
        c.doneBytes += c.file;
        c.doneTotal = c.doneTotal !== null && c.fileTotal !== null ? c.doneTotal + c.fileTotal : null;
      }
      c.files++;
    }
    c.file = done;
    c.fileTotal = total && total > 0 ? total : null;
    this.draw();
  }

  rows(added: number): void {
    if (!this.cur) return;
    this.cur.rows += added;
    this.draw();
  }
}

let terminal: TtyProgress | null = null;

/** The process's terminal renderer, when stderr is a TTY and a command installed one. */
export const activeTerminal = (): TtyProgress | null => terminal;

export function setTerminal(t: TtyProgress | null): void {
  terminal = t;
}
