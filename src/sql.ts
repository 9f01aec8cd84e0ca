// Named SQL files: statements too long for a typed helper live in sql/queries/*.sql
// and are loaded by name, so SQL stays in named places.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SQL_DIR = path.join(ROOT_DIR, 'sql');

const cache = new Map<string, string>();

/** Loads sql/<name>.sql (cached). */
export function namedSql(name: string): string {
  let text = cache.get(name);
  if (text === undefined) {
    text = fs.readFileSync(path.join(SQL_DIR, `${name}.sql`), 'utf8');
    cache.set(name, text);
  }
  return text;
}

/** Replaces {{placeholders}} with already-quoted identifiers or literals. */
export function render(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_m, k: string) => {
    if (!(k in vars)) throw new Error(`SQL template: missing {{${k}}}`);
    return vars[k];
  });
}
