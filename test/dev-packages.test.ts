// Every program a test (or src) runs by name must be there on the CI's fresh machine: installed by
// ./dev (PACKAGES, TEST_PACKAGES) or in Debian's base system (Essential, or Priority required,
// which every debootstrap installs). One that only came along as another package's dependency
// here (pgrep: procps, pulled in by Chromium's GTK through dconf) breaks when that chain changes.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';

const ROOT = path.resolve(__dirname, '..');

function devPackages(): Set<string> {
  const dev = fs.readFileSync(path.join(ROOT, 'dev'), 'utf8');
  const lists = [...dev.matchAll(/^(?:TEST_)?PACKAGES\+?=\(([^)]*)\)/gm)].map((m) => m[1]);
  expect(lists.length).toBeGreaterThanOrEqual(2);
  return new Set(lists.flatMap((l) => l.trim().split(/\s+/)));
}

/** The programs spawned by a literal name (not process.execPath, not an absolute path). */
function spawnedPrograms(): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.ts')) {
        for (const m of fs.readFileSync(p, 'utf8').matchAll(/\b(?:spawn|spawnSync|execFile|execFileSync)\(\s*'([a-z][\w.-]*)'/g)) {
          if (!found.has(m[1])) found.set(m[1], path.relative(ROOT, p));
        }
      }
    }
  };
  walk(path.join(ROOT, 'test'));
  walk(path.join(ROOT, 'src'));
  return found;
}

/** The Debian package that ships a program on PATH (merged /usr: /bin and /usr/bin both tried). */
function packageOf(program: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(':').concat('/usr/bin', '/bin', '/usr/sbin', '/sbin')) {
    const file = path.join(dir, program);
    if (!fs.existsSync(file)) continue;
    for (const candidate of new Set([file, fs.realpathSync(file), path.join('/bin', program), path.join('/usr/bin', program), path.join('/sbin', program), path.join('/usr/sbin', program)])) {
      const r = spawnSync('dpkg', ['-S', candidate], { encoding: 'utf8' });
      if (r.status === 0) return r.stdout.split(':')[0];
    }
  }
  return null;
}

const baseSystem = (pkg: string) =>
  spawnSync('dpkg-query', ['-W', '-f=${Essential} ${Priority}', pkg], { encoding: 'utf8' }).stdout.trim().split(' ');

test('every program spawned by name is installed by ./dev or part of the base system', () => {
  const listed = devPackages();
  const programs = spawnedPrograms();
  expect([...programs.keys()]).toEqual(expect.arrayContaining(['script', 'pgrep', 'unzip']));
  const missing: string[] = [];
  for (const [program, where] of programs) {
    if (program === 'npx') continue; // node's own, installed with node
    const pkg = packageOf(program);
    if (!pkg) {
      missing.push(`${program} (${where}): not installed here`);
      continue;
    }
    const [essential, priority] = baseSystem(pkg);
    if (!listed.has(pkg) && essential !== 'yes' && priority !== 'required') missing.push(`${program} (${where}): package ${pkg}, Priority ${priority}, not in ./dev's lists`);
  }
  expect(missing).toEqual([]);
});

test('./dev installs the toolchain npm ci compiles gdal-async with (node-gyp: python3, make, g++)', () => {
  // On a machine where apt never ran they are not there: libgdal-dev brings neither make nor g++.
  expect(fs.readFileSync(path.join(ROOT, 'dev'), 'utf8')).toContain('npm_config_build_from_source=gdal-async');
  const listed = devPackages();
  for (const pkg of ['g++', 'make', 'python3']) expect([...listed], pkg).toContain(pkg);
});
