// Every command takes only the arguments and options its usage line declares (and the global
// --json, --help): a stray word or an option another command takes is a usage error naming it
// and the command's usage. They were ignored: `agro runs sicar --uf GO` listed every state's
// runs, `agro keys list extra` and `agro serve --force` ran as if they were not there.
// The database is unreachable on purpose: a refusal happens before anything is opened, and a
// command that (wrongly) went ahead ends `database_unavailable` (exit 1) instead of running.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { checkSyntax, grammar, optionsOf } from '../src/cli/syntax.ts';

const AGRO = path.resolve(__dirname, '../bin/agro.mjs');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cli-strict-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

interface Result { code: number | null; stdout: string; stderr: string }

function agro(args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [AGRO, ...args, '--json'], {
      env: { ...process.env, DATABASE_URL: 'postgres://agro@127.0.0.1:9/agro', AGRO_DATA_DIR: dataDir, LOG_LEVEL: 'warn', AGRO_SCHEDULE_FILE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    // A command that went ahead and serves (the bug) is stopped rather than left running.
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs them a few at a time (the machine is shared). */
async function all<T, R>(items: T[], fn: (x: T) => Promise<R>, width = 4): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  }));
  return out;
}

// [the command's words, a form it accepts, a stray positional, a stray option (with its value)]
const COMMANDS: [string, string[], string, string[]][] = [
  ['db start|stop|status|url', ['db', 'start'], 'extra', ['--force']],
  ['db start|stop|status|url', ['db', 'stop'], 'extra', ['--uf', 'GO']],
  ['db start|stop|status|url', ['db', 'status'], 'extra', ['--limit', '5']],
  ['db start|stop|status|url', ['db', 'url'], 'extra', ['--as-of', '2024-01-01']],
  ['migrate', ['migrate'], 'extra', ['--force']],
  ['run', ['run', 'ibge-municipios'], 'extra', ['--limit', '5']],
  ['backfill', ['backfill', 'zarc', '--as-of', '2024-01-01', '--source', '/nonexistent'], 'extra', ['--limit', '5']],
  ['schedule', ['schedule'], 'extra', ['--uf', 'GO']],
  ['schedule', ['schedule', '--check'], 'extra', ['--force']],
  ['runs', ['runs', 'sicar'], 'extra', ['--uf', 'GO']],
  ['doctor', ['doctor'], 'extra', ['--force']],
  ['nightly', ['nightly'], 'extra', ['--uf', 'GO']],
  ['snapshots', ['snapshots', 'sicar'], 'extra', ['--limit', '5']],
  ['rollback', ['rollback', 'sicar', '--uf', 'GO'], 'extra', ['--force']],
  ['publish', ['publish', '1'], 'extra', ['--release']],
  ['keep', ['keep', '1'], 'extra', ['--force']],
  ['report', ['report', '1'], 'extra', ['--uf', 'GO']],
  ['demo', ['demo'], 'extra', ['--sources', 'official']],
  ['serve', ['serve'], 'extra', ['--force']],
  ['keys create', ['keys', 'create', '--env', 'test', '--plan', 'starter'], 'extra', ['--grace-hours', '2']],
  ['keys list', ['keys', 'list'], 'extra', ['--as-of', '2024-01-01']],
  ['keys revoke', ['keys', 'revoke', 'key_x'], 'extra', ['--name', 'x']],
  ['keys rotate', ['keys', 'rotate', 'key_x'], 'extra', ['--force']],
  ['sandbox load', ['sandbox', 'load'], 'extra', ['--uf', 'GO']],
  ['platform purge', ['platform', 'purge'], 'extra', ['--force']],
  ['monitors add', ['monitors', 'add', '--key', 'key_x', 'car', 'GO-5200000-X'], 'extra', ['--url', 'http://x']],
  ['monitors list', ['monitors', 'list'], 'extra', ['--limit', '5']],
  ['monitors remove', ['monitors', 'remove', 'mon_x'], 'extra', ['--key', 'key_x']],
  ['webhooks add', ['webhooks', 'add', '--key', 'key_x', '--url', 'https://example.org/h', '--events', 'quota.threshold'], 'extra', ['--once']],
  ['webhooks list', ['webhooks', 'list'], 'extra', ['--limit', '5']],
  ['webhooks remove', ['webhooks', 'remove', 'whe_x'], 'extra', ['--key', 'key_x']],
  ['webhooks log', ['webhooks', 'log', 'whe_x'], 'extra', ['--key', 'key_x']],
  ['webhooks deliver', ['webhooks', 'deliver'], 'extra', ['--limit', '5']],
  ['webhooks replay', ['webhooks', 'replay', 'evt_x'], 'extra', ['--key', 'key_x']],
  ['webhooks rotate', ['webhooks', 'rotate', 'whe_x'], 'extra', ['--force']],
  ['webhooks test', ['webhooks', 'test', 'whe_x'], 'extra', ['--endpoint', 'whe_y']],
  ['webhooks enable', ['webhooks', 'enable', 'whe_x'], 'extra', ['--once']],
];

test('the table covers every line of agro --help', async () => {
  const help = JSON.parse((await agro(['--help'])).stdout).usage as string;
  const forms = help.split('\n').filter((l) => /^  [a-z]/.test(l)).map((l) => l.trim().split(/\s{2,}/)[0].split(' ').filter((w, i, ws) => ws.slice(0, i + 1).every((x) => /^[a-z|]+$/.test(x))).join(' '));
  expect(forms.length).toBeGreaterThan(30);
  expect(forms.filter((f) => !COMMANDS.some(([words]) => words === f))).toEqual([]);
}, 60_000);

test('the usage line is the declaration: a bracketed option alone is a switch, one followed by a word takes it', () => {
  expect([...optionsOf('backfill <pipeline> --series DIR | --series-file F [--uf UF] [--force]')]).toEqual([['series', 'string'], ['series-file', 'string'], ['uf', 'string'], ['force', 'boolean']]);
  // parseArgs reads the line before it knows the command: one name cannot be both.
  expect(() => grammar([{ form: 'a [--force]' }, { form: 'b [--force F]' }])).toThrow(/--force/);
  const g = grammar([{ form: 'x start|stop [--force]' }, { form: 'y <id>', args: ['<id>'] }]);
  expect(() => checkSyntax(g, ['x', 'stop'], { force: true, json: true })).not.toThrow();
  expect(() => checkSyntax(g, ['x', 'stop', 'now'], {})).toThrow(/unexpected argument "now": agro x stop takes no argument \(usage: agro x start\|stop \[--force\]\)/);
  expect(() => checkSyntax(g, ['y', '1'], { force: true })).toThrow(/--force: not an option of agro y/);
  expect(() => checkSyntax(g, ['z'], {})).toThrow(/unknown command "z"/);
  expect(() => checkSyntax(g, ['x', 'frob', 'extra'], {})).not.toThrow(); // the command lists its subcommands
});

test('a command missing what its line requires says its usage line as declared', async () => {
  // webhooks add repeated its line by hand and it had drifted: the message left out --secret-file.
  const args = ['webhooks', 'add', '--key', 'key_x'];
  expect(usageError(args, await agro(args))).toBe('usage error: webhooks add --key <key_id> --url URL --events a,b [--secret whsec_…] [--secret-file PATH|-]');
}, 60_000);

/** The one JSON object a usage error prints, with exit 2. */
function usageError(args: string[], r: Result): string {
  const what = `${args.join(' ')} → exit ${r.code}: ${r.stdout.slice(0, 300)} ${r.stderr.slice(-300)}`;
  expect(r.code, what).toBe(2);
  const lines = r.stdout.split('\n').filter(Boolean);
  expect(lines, what).toHaveLength(1);
  const o = JSON.parse(lines[0]);
  expect(o, what).toEqual({ error: { code: 'usage', message: expect.any(String) } });
  return o.error.message;
}

describe('every command refuses what it does not take', () => {
  test('a stray positional, naming it and the usage of the command', async () => {
    const cases = COMMANDS.map(([words, form, stray]) => ({ words, args: [...form, stray], stray }));
    const results = await all(cases, (c) => agro(c.args));
    cases.forEach((c, i) => {
      const msg = usageError(c.args, results[i]);
      expect(msg, c.args.join(' ')).toContain(`"${c.stray}"`);
      expect(msg, c.args.join(' ')).toContain(`usage: agro ${c.words}`);
    });
  }, 300_000);

  test('an option of another command, naming it and the usage of the command', async () => {
    const cases = COMMANDS.map(([words, form, , option]) => ({ words, args: [...form, ...option], option: option[0] }));
    const results = await all(cases, (c) => agro(c.args));
    cases.forEach((c, i) => {
      const msg = usageError(c.args, results[i]);
      expect(msg, c.args.join(' ')).toContain(c.option);
      expect(msg, c.args.join(' ')).toContain(`usage: agro ${c.words}`);
    });
  }, 300_000);

  test('what a command declares is accepted (it goes on to the database), --json and --help are global', async () => {
    const accepted = [
      ['runs', 'sicar', '--limit', '5'], ['keys', 'list'], ['keys', 'rotate', 'key_x', '--grace-hours', '2'], ['monitors', 'list', '--key', 'key_x'],
      ['webhooks', 'log', 'whe_x', '--limit', '5'], ['webhooks', 'replay', 'evt_x', '--endpoint', 'whe_y'], ['publish', '1', '--force'], ['keep', '1', '--release'],
      ['nightly', '--sources', 'fixtures', '--force'], ['snapshots', 'sicar', '--uf', 'GO'], ['backfill', 'zarc', '--as-of', '2024-01-01', '--source', '/nonexistent', '--force'],
    ];
    const results = await all(accepted, agro);
    accepted.forEach((args, i) => {
      const r = results[i];
      expect(r.code, `${args.join(' ')}: ${r.stdout} ${r.stderr.slice(-300)}`).toBe(1);
      expect(JSON.parse(r.stdout).error.code, args.join(' ')).toBe('database_unavailable');
    });
    const help = await agro(['keys', 'list', '--help']);
    expect(help.code).toBe(0);
    expect(JSON.parse(help.stdout).usage).toMatch(/^usage: agro/);
  }, 300_000);
});
