// Counts the zip members inflated while a function runs (archive.ts publishes each inflation
// on the 'agro:zip-inflate' channel): how the tests show that a zip is inflated once.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import path from 'node:path';

/** Every member inflated while `fn` runs, as "<zip name>:<member>" → times. */
export async function countInflations(fn: () => Promise<unknown>): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  const onInflate = (m: unknown) => {
    const { file, member } = m as { file: string; member: string };
    const key = `${path.basename(file)}:${member}`;
    seen.set(key, (seen.get(key) ?? 0) + 1);
  };
  subscribe('agro:zip-inflate', onInflate);
  try {
    await fn();
  } finally {
    unsubscribe('agro:zip-inflate', onInflate);
  }
  return seen;
}
