// Geometry repair, row by row under a statement timeout. Some national features
// (huge APP multipolygons in AM) take GEOS gigabytes and minutes to repair; such a
// feature is rejected and counted, never allowed to abort or stall the whole load.
import type pg from 'pg';
import { fillSql, tableName } from '../sql.ts';

export interface RepairResult {
  invalid: number;
  repaired: number;
  /** Repair failed or timed out. */
  rejected: number;
  /** Repair left nothing polygonal (e.g. a collapsed ring). */
  empty: number;
}

export interface RepairOptions {
  /** With a pool, the validity scan is split by src_seq range over two of its connections. */
  pool?: pg.Pool;
}

/**
 * Fills `fixTable` (src_seq, geom, status) with a repaired, polygonal geometry in the
 * source SRID for every invalid staged polygon. Valid rows are not touched. The invalid
 * rows are repaired in one statement under the timeout first; when that statement fails or
 * times out, one row at a time, each under the timeout (a row that still fails is rejected).
 */
export async function repairInvalidPolygons(client: pg.ClientBase, stageTable: string, fixTable: string, timeoutMs: number, o: RepairOptions = {}): Promise<RepairResult> {
  const vars = { stage: tableName(stageTable), fix: tableName(fixTable) };
  await client.query(fillSql('queries/repair_create', vars));
  const out = await repairRows(client, stageTable, timeoutMs, o, {
    repair: fillSql('queries/repair_rows', vars),
    reject: (seq, error) => client.query(`INSERT INTO ${fixTable} (src_seq, geom, status, error) VALUES ($1, NULL, 'rejected', $2)`, [seq, error]),
  });
  await client.query(`ANALYZE ${fixTable}`);
  return out;
}

/**
 * The same repairs without a second table: the staging table gains a `repair` column
 * ('repaired', 'empty', 'rejected'; NULL for the valid rows) and a repaired row's geometry is
 * replaced where it lies (in its source SRID). The typed pass then reads one table.
 */
export async function repairInPlace(client: pg.ClientBase, stageTable: string, timeoutMs: number, o: RepairOptions = {}): Promise<RepairResult> {
  await client.query(`ALTER TABLE ${stageTable} ADD COLUMN repair text`);
  return repairRows(client, stageTable, timeoutMs, o, {
    repair: fillSql('queries/repair_in_place', { stage: tableName(stageTable) }),
    reject: (seq) => client.query(`UPDATE ${stageTable} SET repair = 'rejected' WHERE src_seq = $1`, [seq]),
  });
}

/** Finds the invalid rows, then repairs them all in one statement under the timeout, or one at a time when that fails. */
async function repairRows(
  client: pg.ClientBase,
  stageTable: string,
  timeoutMs: number,
  o: RepairOptions,
  sql: { repair: string; reject: (seq: string, error: string) => Promise<unknown> },
): Promise<RepairResult> {
  const invalid = await findInvalid(client, stageTable, o.pool);
  const out: RepairResult = { invalid: invalid.length, repaired: 0, rejected: 0, empty: 0 };
  if (out.invalid === 0) return out;
  // Repairs fetch their rows by src_seq: without an index every fetch scans the whole
  // staging table (measured: 130 ms a row at 200,000 properties, 1,029 bow-ties).
  await client.query(`CREATE INDEX ON ${stageTable} (src_seq)`);
  const timeout = `SET statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`;
  const tally = (rows: { status: string }[]) => {
    for (const r of rows) r.status === 'repaired' ? out.repaired++ : out.empty++;
  };
  let batched = false;
  try {
    await client.query(timeout);
    tally((await client.query(sql.repair, [invalid])).rows);
    batched = true;
  } catch {
    // One slow or failing geometry: nothing of the batch was written; row by row below.
  } finally {
    await client.query(`SET statement_timeout = 0`);
  }
  for (const seq of batched ? [] : invalid) {
    try {
      await client.query(timeout);
      tally((await client.query(sql.repair, [[seq]])).rows);
    } catch (e) {
      out.rejected++;
      await client.query(`SET statement_timeout = 0`);
      await sql.reject(seq, (e as Error).message.slice(0, 500));
    } finally {
      await client.query(`SET statement_timeout = 0`);
    }
  }
  return out;
}

/** src_seq of the invalid staged geometries, in order; with a pool, the scan is split in two src_seq halves run on two connections at once. */
async function findInvalid(client: pg.ClientBase, stageTable: string, pool?: pg.Pool): Promise<string[]> {
  const find = fillSql('queries/repair_find_invalid', { stage: tableName(stageTable) });
  const seqs = (r: pg.QueryResult): string[] => r.rows.map((x: { src_seq: string }) => x.src_seq);
  const all: [number, number] = [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];
  if (!pool) return seqs(await client.query(find, all));
  const { lo, hi } = (await client.query(`SELECT min(src_seq) AS lo, max(src_seq) AS hi FROM ${stageTable}`)).rows[0];
  if (lo === null || Number(hi) - Number(lo) < 10_000) return seqs(await client.query(find, all));
  const mid = Math.floor((Number(lo) + Number(hi)) / 2);
  const other = await pool.connect();
  try {
    const [x, y] = await Promise.all([client.query(find, [all[0], mid]), other.query(find, [mid + 1, all[1]])]);
    return [...seqs(x), ...seqs(y)];
  } finally {
    other.release();
  }
}

/** Fails when a snapshot table's columns differ from its template (the current.* views need identical shapes). */
export async function assertSameShape(client: pg.ClientBase, template: string, table: string): Promise<void> {
  const q = `SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) AS s
               FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`;
  const [a, b] = await Promise.all([client.query(q, [template]), client.query(q, [table])]);
  if (a.rows[0].s !== b.rows[0].s) {
    throw new Error(`snapshot table ${table} does not match ${template}:\n  expected ${a.rows[0].s}\n  got      ${b.rows[0].s}`);
  }
}

