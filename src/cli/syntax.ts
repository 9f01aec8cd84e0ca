// What each `agro` command takes, declared once: its usage line. The line names the command's
// words (`keys list`, `db start|stop|status|url`), and every option it names is one the command
// takes: `[--force]` (written in brackets alone) is a switch, `--uf UF` takes a value. The
// positionals after the words are listed by name in `args`. Anything else on the command line is
// a usage error naming it (an option that does nothing made its user believe it did something:
// `agro runs sicar --uf GO` listed every state's runs). --json and --help are every command's.
import type { ParseArgsConfig } from 'node:util';
import { AgroError } from '../errors.ts';

export interface Syntax {
  /** The usage line after `agro `: the command's words, positionals and options. */
  form: string;
  /** The positionals after the words, by name (`[x]`: optional); none when absent. */
  args?: readonly string[];
  /** What it does, after the form in `agro --help`. */
  does?: string;
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** The options every command takes. */
export const GLOBAL_OPTIONS: Options = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } };

/** The command words a form starts with: `db start|stop|status|url` → [['db'], ['start', 'stop', 'status', 'url']]. */
function wordsOf(form: string): string[][] {
  const words: string[][] = [];
  for (const t of form.split(/\s+/)) {
    if (!/^[a-z]+(\|[a-z]+)*$/.test(t)) break;
    words.push(t.split('|'));
  }
  return words;
}

/** The options a form names, each a switch (`[--force]`) or taking a value (`--uf UF`). */
export function optionsOf(form: string): Map<string, 'boolean' | 'string'> {
  const options = new Map<string, 'boolean' | 'string'>();
  for (const t of form.split(/\s+/)) {
    const m = /^[[(]*--([a-z][a-z-]*)(\]?)/.exec(t);
    if (m) options.set(m[1], m[2] ? 'boolean' : 'string');
  }
  return options;
}

export interface Grammar {
  /** For parseArgs: every option of every command, with its type. */
  options: Options;
  /** The forms the command line names by its leading words (backfill has two), or none. */
  find(positionals: readonly string[]): { forms: Syntax[]; words: number };
  /** Whether `word` is a command at all. */
  knows(word: string): boolean;
}

export function grammar(syntaxes: readonly Syntax[]): Grammar {
  const options: Options = { ...GLOBAL_OPTIONS };
  for (const s of syntaxes) {
    for (const [name, type] of optionsOf(s.form)) {
      const had = options[name];
      // One name, one type: parseArgs reads the command line before it knows the command.
      if (had && had.type !== type) throw new Error(`agro usage: --${name} is a ${had.type} in one form and a ${type} in "${s.form}"`);
      options[name] = { type };
    }
  }
  const parsed = syntaxes.map((s) => ({ syntax: s, words: wordsOf(s.form) }));
  return {
    options,
    find(positionals) {
      const hits = parsed.filter((p) => p.words.every((alts, i) => alts.includes(positionals[i])));
      const words = Math.max(0, ...hits.map((p) => p.words.length));
      return { forms: hits.filter((p) => p.words.length === words).map((p) => p.syntax), words };
    },
    knows(word) {
      return parsed.some((p) => p.words[0].includes(word));
    },
  };
}

/**
 * Refuses a positional or an option the command's usage line does not declare. A command word
 * that names no line (`keys frobnicate`) is left to the command, which lists its subcommands.
 */
export function checkSyntax(g: Grammar, positionals: readonly string[], values: Record<string, unknown>): void {
  const cmd = positionals[0];
  if (!g.knows(cmd)) throw new AgroError('usage', `unknown command "${cmd}"`);
  const { forms, words } = g.find(positionals);
  if (!forms.length) return;
  const command = `agro ${positionals.slice(0, words).join(' ')}`;
  const usage = `usage: ${forms.map((f) => `agro ${f.form}`).join('; ')}`;
  const args = forms.map((f) => f.args ?? []).reduce((a, b) => (b.length > a.length ? b : a));
  const stray = positionals[words + args.length];
  if (stray !== undefined) {
    throw new AgroError('usage', `unexpected argument "${stray}": ${command} takes ${args.length ? args.join(' ') : 'no argument'} (${usage})`);
  }
  const declared = new Set(forms.flatMap((f) => [...optionsOf(f.form).keys()]));
  const extra = Object.keys(values).filter((o) => !(o in GLOBAL_OPTIONS) && !declared.has(o));
  if (extra.length) throw new AgroError('usage', `${extra.map((o) => `--${o}`).join(', ')}: not an option of ${command} (${usage})`);
}

/** The lines of `agro --help`: the form, then what it does. */
export function usageLines(syntaxes: readonly Syntax[]): string {
  return syntaxes.map((s) => `  ${s.form}${s.does ? `${' '.repeat(Math.max(2, 34 - s.form.length))}${s.does}` : ''}`).join('\n');
}
