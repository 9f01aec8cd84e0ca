// The terminal renderer on its own, with an injected clock: what the live line says as
// bytes and rows arrive, across several files of one stage, and how log lines go above it.
import { describe, expect, test } from 'vitest';
import { prettyLine } from '../src/log.ts';
import { TtyProgress } from '../src/progress.ts';

function terminal() {
  let screen = '';
  let t = 0;
  const tty = new TtyProgress({ write: (s: string) => ((screen += s), true), columns: 200 }, () => t, 0);
  /** The lines as a terminal shows them: \r returns to the start, ESC[2K clears the line. */
  const shown = () => screen.replace(/\x1b\[2K/g, '').split('\n').map((l) => l.split('\r').pop());
  return { tty, shown, at: (ms: number) => (t = ms), raw: () => screen };
}

/** A dumb terminal: \r returns to column 0 and later characters overwrite; nothing else is understood. */
function dumbScreen(raw: string): string[] {
  return raw.split('\n').map((line) =>
    line.split('\r').reduce((shown, seg) => seg + shown.slice(seg.length), ''),
  );
}

describe('a dumb terminal (TERM=dumb)', () => {
  test('no escape codes; a shorter live line or a log line leaves nothing of the longer one before it', () => {
    let raw = '';
    let t = 0;
    const tty = new TtyProgress({ write: (s: string) => ((raw += s), true), columns: 200 }, () => t, 0, true);
    tty.runStart('sicar GO');
    tty.stageStart('download');
    t = 2000;
    tty.bytes('a.zip', 1_000_000, 4_000_000);
    t = 2500;
    tty.bytes('a.zip', 4_000_000, 4_000_000); // a shorter line: no ETA any more
    expect(dumbScreen(raw).at(-1)!.trimEnd()).toBe('sicar GO · download · 4.0 MB of 4.0 MB (100 %) · 1.6 MB/s · 2.5 s');
    tty.line('WARN x');
    expect(dumbScreen(raw).at(-2)!.trimEnd()).toBe('WARN x');
    tty.stageEnd('download', true);
    expect(dumbScreen(raw).at(-2)!.trimEnd()).toMatch(/^✓ sicar GO · download · 4\.0 MB/);
    expect(raw).not.toContain('\x1b');
  });
});

describe('progress line', () => {
  test('bytes of total, rate and ETA; several files add up; the finished stage leaves one line', () => {
    const { tty, shown, at } = terminal();
    tty.runStart('sicar GO');
    at(0);
    tty.stageStart('download');
    at(2000);
    tty.bytes('a.zip', 1_000_000, 4_000_000);
    expect(shown().at(-1)).toBe('sicar GO · download · 1.0 MB of 4.0 MB (25 %) · 500.0 kB/s · ETA 6.0 s · 2.0 s');
    at(4000);
    tty.bytes('a.zip', 4_000_000, 4_000_000);
    tty.bytes('b.zip', 1_000_000, 2_000_000);
    expect(shown().at(-1)).toBe('sicar GO · download · file 2 · 5.0 MB of 6.0 MB (83 %) · 1.3 MB/s · ETA 0.8 s · 4.0 s');
    tty.line('18:00:00 WARN a log line');
    expect(shown().slice(-2)).toEqual(['18:00:00 WARN a log line', 'sicar GO · download · file 2 · 5.0 MB of 6.0 MB (83 %) · 1.3 MB/s · ETA 0.8 s · 4.0 s']);
    at(5000);
    tty.stageEnd('download', true);
    expect(shown().slice(-2)).toEqual(['✓ sicar GO · download · file 2 · 5.0 MB of 6.0 MB (83 %) · 1.0 MB/s · ETA 1.0 s · 5.0 s', '']);
  });

  test('rows per second while staging; a failed stage is marked', () => {
    const { tty, shown, at } = terminal();
    tty.runStart('zarc');
    at(0);
    tty.stageStart('read');
    at(500);
    tty.rows(20_000);
    tty.rows(30_000);
    expect(shown().at(-1)).toBe('zarc · read · 50,000 rows · 100,000 rows/s · 0.5 s');
    tty.stageEnd('read', false);
    expect(shown().at(-2)).toBe('✗ zarc · read · 50,000 rows · 100,000 rows/s · 0.5 s');
  });

  test('log lines for people: time, level (info unmarked), message, fields', () => {
    const t = Date.UTC(2026, 10, 23, 18, 1, 2);
    expect(prettyLine(JSON.stringify({ level: 40, time: t, run_id: 3, columns: ['gid'], msg: 'unknown columns' }))).toBe('18:01:02 WARN unknown columns  run_id=3 columns=["gid"]');
    expect(prettyLine(JSON.stringify({ level: 30, time: t, msg: 'scheduler started' }))).toBe('18:01:02 scheduler started');
  });
});
