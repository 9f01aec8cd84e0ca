// derived.cnpj_qsa_changes (receita-cnpj's partner-list diff per month) and the diff itself. A
// leaf module: the publish path, the change events and the pipeline all call it, and the
// pipeline cannot import publish.ts (it would cycle through the registry).
import type pg from 'pg';
import { fillSql, type Sql } from '../../sql.ts';

/**
 * A month's partner-list diff goes with the month (retention, a failed run), and a rerun of
 * the same snapshot writes it afresh: the snapshot row stays (marked dropped), so its
 * ON DELETE CASCADE never fires.
 */
export async function forgetQsaChanges(db: pg.ClientBase | pg.Pool, snapshotId: number): Promise<void> {
  await db.query('DELETE FROM derived.cnpj_qsa_changes WHERE snapshot_id = $1', [snapshotId]);
}

/** The partner-list changes between two partner tables (or subqueries of them): cnpj_basico, entraram, sairam (sql/queries/cnpj_qsa_diff.sql). */
export const partnerListDiff = (socios: Sql, previous: Sql): Sql => fillSql('queries/cnpj_qsa_diff', { socios, previous });
