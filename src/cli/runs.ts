// `agro runs [pipeline] [--limit N] [--json]`: the latest runs of the ledger, newest first,
// with status, duration, rows and error (CPFs masked like every output).
import type pg from 'pg';
import { AgroError } from '../errors.ts';
import { formatDuration } from '../progress.ts';
import { advisoryHeld, RUN_ALIVE_LOCK } from '../etl/run-locks.ts';
import { findPipeline, PIPELINES } from '../../pipelines/registry.ts';
import { print, withDb, type Env } from './context.ts';

export interface RunListRow {
  run_id: number;
  pipeline: string;
  uf: string | null;
  status: string;
  started_at: string;
  finished_at: string | null;
  duration_ms: number;
  rows_read: number | null;
  rows_loaded: number | null;
  rows_rejected: number | null;
  snapshot_id: number | null;
  stage: string | null;
  error_code: string | null;
  error: string | null;
}

/** The stage a run `r` is in, or ended in. */
const LAST_STAGE = `(SELECT s.stage FROM etl.run_stages s WHERE s.run_id = r.run_id ORDER BY s.seq DESC LIMIT 1)`;
/** A running run `r` whose alive lock nobody holds is dead (run-locks.ts): not cleaned up yet. */
const DEAD = (classParam: string) => `(r.status = 'running' AND NOT ${advisoryHeld(classParam, 'r.run_id')})`;

/** The latest runs (of one pipeline), with the stage a running run is in; a running run whose process died is `dead`. */
export async function listRuns(db: pg.Pool | pg.ClientBase, pipeline: string | null, limit: number): Promise<RunListRow[]> {
  const r = await db.query(
    `SELECT r.run_id::int, r.pipeline, nullif(r.scope, '') AS uf, r.status, r.started_at, r.finished_at,
            (extract(epoch FROM coalesce(r.finished_at, now()) - r.started_at) * 1000)::bigint AS duration_ms,
            r.rows_read::bigint, r.rows_loaded::bigint, r.rows_rejected::bigint, r.snapshot_id::int, r.error_code, r.error,
            ${LAST_STAGE} AS stage, ${DEAD('$3')} AS dead
       FROM etl.runs r
      WHERE $1::text IS NULL OR r.pipeline = $1
      ORDER BY r.run_id DESC LIMIT $2`,
    [pipeline, limit, RUN_ALIVE_LOCK],
  );
  return r.rows.map(({ dead, ...x }) => ({
    ...x,
    ...(dead ? { status: 'dead', error: `the process running it died${x.stage ? ` during ${x.stage}` : ''}; the next run of any pipeline cleans up after it` } : {}),
    started_at: x.started_at.toISOString(),
    finished_at: x.finished_at?.toISOString() ?? null,
    duration_ms: Number(x.duration_ms),
    rows_read: x.rows_read === null ? null : Number(x.rows_read),
    rows_loaded: x.rows_loaded === null ? null : Number(x.rows_loaded),
    rows_rejected: x.rows_rejected === null ? null : Number(x.rows_rejected),
  }));
}

/** Runs left `running` by a process that died (their alive lock is free), not cleaned up yet. */
export async function deadRuns(db: pg.Pool | pg.ClientBase): Promise<{ run_id: number; pipeline: string; uf: string | null; stage: string | null }[]> {
  const r = await db.query(
    `SELECT r.run_id::int, r.pipeline, nullif(r.scope, '') AS uf, ${LAST_STAGE} AS stage
       FROM etl.runs r WHERE ${DEAD('$1')} ORDER BY r.run_id`,
    [RUN_ALIVE_LOCK],
  );
  return r.rows;
}

const num = (n: number | null) => (n === null ? '' : n.toLocaleString('en-US'));

/** Words of `text` in lines of at most `width` characters (a longer word is cut), each after `indent`. */
function wrapped(text: string, width: number, indent: string): string[] {
  const room = Math.max(20, width - indent.length);
  const lines: string[] = [];
  let cur = '';
  for (const word of text.split(' ')) {
    if (cur && cur.length + 1 + word.length > room) {
      lines.push(cur);
      cur = '';
    }
    cur = cur ? `${cur} ${word}` : word;
    while (cur.length > room) {
      lines.push(cur.slice(0, room));
      cur = cur.slice(room);
    }
  }
  if (cur) lines.push(cur);
  return lines.map((l) => indent + l);
}

/**
 * A table for people: aligned columns, the error last. At a terminal too narrow for a row,
 * each error goes on its own lines under its run, wrapped: nothing is cut off.
 */
export function runsTable(rows: RunListRow[], width: number | undefined): string {
  if (rows.length === 0) return 'no runs';
  const head = ['run', 'pipeline', 'uf', 'status', 'started (UTC)', 'duration', 'read', 'loaded', 'rejected', 'snapshot', 'error'];
  const body = rows.map((r) => [
    String(r.run_id), r.pipeline, r.uf ?? '', r.status === 'running' && r.stage ? `running (${r.stage})` : r.status,
    r.started_at.slice(0, 16).replace('T', ' '), formatDuration(r.duration_ms), num(r.rows_read), num(r.rows_loaded), num(r.rows_rejected),
    r.snapshot_id === null ? '' : String(r.snapshot_id), r.error ? `${r.error_code ? r.error_code + ': ' : ''}${r.error.replace(/\s+/g, ' ')}` : '',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const right = new Set([0, 5, 6, 7, 8, 9]);
  const line = (cells: string[]) => cells.map((c, i) => (i === head.length - 1 ? c : right.has(i) ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd();
  const table = [line(head), ...body.map(line)];
  if (!width || table.every((l) => l.length <= width)) return table.join('\n');
  return [line(head.slice(0, -1)), ...body.flatMap((b) => [line(b.slice(0, -1)), ...(b.at(-1) ? wrapped(b.at(-1)!, width, '     ') : [])])].join('\n');
}

export async function cmdRuns(env: Env): Promise<number> {
  const name = env.args[1] ?? null;
  if (name && !findPipeline(name)) throw new AgroError('usage', `unknown pipeline "${name}" (known: ${PIPELINES.map((p) => p.name).join(', ')})`);
  const limitText = (env.values.limit as string | undefined) ?? '20';
  const limit = Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new AgroError('usage', `--limit must be a whole number from 1 to 10000, got "${limitText}"`);
  const runs = await withDb(env, (pool) => listRuns(pool, name, limit));
  print(env, { runs }, () => runsTable(runs, process.stdout.isTTY ? process.stdout.columns : undefined));
  return 0;
}
