// `agro monitors add --key <key_id> (car <numero> | cnpj <cnpj>)`, `agro monitors list [--key K]`,
// `agro monitors remove <id>`: the records a key watches for change events.
import { AgroError } from '../errors.ts';
import { addMonitor, eachMonitorBatch, removeMonitor, type Monitor } from '../events/monitors.ts';
import { print, printList, withDb, type Env } from './context.ts';
import type { Syntax } from './syntax.ts';

const ADD_FORM = 'monitors add --key <key_id> (car <numero> | cnpj <cnpj>)';
export const MONITORS_COMMANDS: Syntax[] = [
  { form: ADD_FORM, args: ['car|cnpj', '<numero|cnpj>'], does: 'watch a record for change events' },
  { form: 'monitors list [--key <key_id>]' },
  { form: 'monitors remove <id>', args: ['<id>'] },
];

const iso = (d: Date) => d.toISOString();

export async function cmdMonitors(env: Env): Promise<number> {
  const sub = env.args[1];
  const key = env.values.key as string | undefined;
  if (sub === 'add') {
    const [kind, value] = [env.args[2], env.args[3]];
    if (!key || !kind || !value) throw new AgroError('usage', ADD_FORM);
    const m = await withDb(env, (pool) => addMonitor(pool, key, kind, value));
    print(env, { ...m, created_at: iso(m.created_at) }, () => `${m.created ? 'monitor' : 'already monitored:'} ${m.id}  ${m.kind} ${m.record}  (key ${m.key_id})`);
    return 0;
  }
  if (sub === 'list') {
    // Printed a batch at a time as the cursor reads them: a national account may watch millions.
    await withDb(env, (pool) => printList<Omit<Monitor, 'created_at'> & { created_at: string }>(
      env, 'monitors',
      (emit) => eachMonitorBatch(pool, key ? [key] : null, (rows) => emit(rows.map((m) => ({ ...m, created_at: iso(m.created_at) })))),
      (m) => `${m.id}  ${m.key_id}  ${m.kind.padEnd(4)} ${m.record}  since ${m.created_at}`,
      'no monitors',
    ));
    return 0;
  }
  if (sub === 'remove') {
    const id = env.args[2];
    if (!id) throw new AgroError('usage', 'monitors remove <id>');
    const removed = await withDb(env, (pool) => removeMonitor(pool, id));
    if (!removed) throw new AgroError('not_found', `no monitor ${id}`);
    print(env, { id, removed }, () => `monitor ${id} removed`);
    return 0;
  }
  throw new AgroError('usage', 'monitors add|list|remove');
}
