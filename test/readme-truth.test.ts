// README.md as operators read it: every environment variable the configuration reads is
// documented there, every one it documents is read, and every option `agro --help` names is
// described (contract §1: scripts rely on these names).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';

const ROOT = path.resolve(__dirname, '..');
const README = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');

/** The variables loadConfig reads, seen through an environment that records every lookup. */
function variablesRead(): string[] {
  const read = new Set<string>();
  const env = new Proxy({} as NodeJS.ProcessEnv, {
    get(_t, k) {
      if (typeof k === 'string') read.add(k);
      return undefined;
    },
  });
  loadConfig(env, ROOT);
  return [...read].sort();
}

describe('README: environment', () => {
  test('every variable src/config.ts reads is documented', () => {
    const read = variablesRead();
    expect(read).toContain('DATABASE_URL'); // the recording sees the reads
    // IBAMA's REST route takes SICAR's WFS settings under its own prefix ("the same settings as AGRO_IBAMA_REST_*").
    const documented = (name: string) =>
      new RegExp(`\\b${name}\\b`).test(README) ||
      (name.startsWith('AGRO_IBAMA_REST_') && README.includes('`AGRO_IBAMA_REST_*`') && README.includes(name.replace('AGRO_IBAMA_REST_', 'AGRO_SICAR_WFS_')));
    expect(read.filter((n) => !documented(n))).toEqual([]);
    expect(README).toContain('AGRO_SOURCE_<PIPELINE>'); // the per-pipeline source overrides (read by prefix)
  });

  test('every variable the README names is one the configuration reads', () => {
    const read = new Set(variablesRead());
    const named = new Set(README.match(/\b(?:AGRO|DATABASE|LOG)_[A-Z0-9_]*[A-Z0-9]\b|\b(?:PORT|HOST)\b(?=`)/g) ?? []);
    const unread = [...named].filter((n) => !read.has(n) && !n.startsWith('AGRO_SOURCE_') && n !== 'AGRO_IBAMA_REST');
    expect(unread).toEqual([]);
  });
});

describe('README: the command line', () => {
  test('every option `agro --help` names is in the README', () => {
    const help = spawnSync(process.execPath, [path.join(ROOT, 'bin/agro.mjs'), '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    const options = [...new Set(help.stdout.match(/--[a-z][a-z-]*/g))];
    expect(options.length).toBeGreaterThan(15);
    expect(options.filter((o) => !new RegExp(`${o}\\b`).test(README))).toEqual([]);
  });
});
