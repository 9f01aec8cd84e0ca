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

/**
 * Fills `fixTable` (src_seq, geom, status) with a repaired, polygonal geometry in the
 * source SRID for every invalid staged polygon. Valid rows are not touched.
 */
export async function repairInvalidPolygons(client: pg.ClientBase, stageTable: string, fixTable: string, timeoutMs: number): Promise<RepairResult> {
  const vars = { stage: tableName(stageTable), fix: tableName(fixTable) };
  await client.query(fillSql('queries/repair_create', vars));
  const invalid = await client.query(fillSql('queries/repair_find_invalid', vars));
  const out: RepairResult = { invalid: invalid.rowCount ?? 0, repaired: 0, rejected: 0, empty: 0 };
  // Each repair fetches its row by src_seq: without an index every one of them scans the
  // whole staging table (measured: 130 ms a row at 200,000 properties, 1,029 bow-ties).
  if (out.invalid > 0) await client.query(`CREATE INDEX ON ${stageTable} (src_seq)`);
  const repairOne = fillSql('queries/repair_one', vars);
  for (const { src_seq } of invalid.rows) {
    try {
      await client.query(`SET statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
      const r = await client.query(repairOne, [src_seq]);
      if (r.rows[0]?.status === 'repaired') out.repaired++;
      else out.empty++;
    } catch (e) {
      out.rejected++;
      await client.query(`SET statement_timeout = 0`);
      await client.query(`INSERT INTO ${fixTable} (src_seq, geom, status, error) VALUES ($1, NULL, 'rejected', $2)`, [src_seq, (e as Error).message.slice(0, 500)]);
    } finally {
      await client.query(`SET statement_timeout = 0`);
    }
  }
  await client.query(`ANALYZE ${fixTable}`);
  return out;
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

