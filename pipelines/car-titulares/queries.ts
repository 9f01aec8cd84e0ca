// car-titulares' own statements, one typed function each (SQL in sql/queries/titulares_*.sql).
// No document ever leaves them: counts and record numbers only.
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, sqlLiteral, type Sql } from '../../src/sql.ts';

/**
 * Creates t.classified: each staged row normalised, checked, given its verdict and every
 * column of the snapshot (sql/queries/titulares_classify.sql). The HMAC key is a
 * transaction-local setting: it never outlives the statement that needs it.
 */
export async function classifyTitulares(client: pg.ClientBase, t: ShapeTables, a: { snapshotId: number; hmacKey: string }): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(`SELECT set_config('agro.hmac_key', $1, true)`, [a.hmacKey]);
    await client.query(fillSql('queries/titulares_classify', { classified: t.classified, stage: t.stage, snapshot_id: sqlLiteral(a.snapshotId) }));
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** Per verdict: its rows and the src_seq of its first 20. */
export async function verdictRecords(client: pg.ClientBase, classified: Sql): Promise<{ verdict: string; n: number; registros: number[] }[]> {
  return (
    await client.query(
      `SELECT verdict, count(*)::int AS n, ((array_agg(src_seq ORDER BY src_seq))[1:20])::int[] AS registros
         FROM ${classified} GROUP BY verdict ORDER BY verdict`,
    )
  ).rows;
}

export interface TitularesCounts {
  proprietario: number;
  possuidor: number;
  cpf: number;
  cnpj: number;
  cnpj_alfanumerico: number;
  sem_nome: number;
  cars: number;
  documentos: number;
  ausentes_vinculos: number;
  ausentes_cars: number;
  ausentes_ufs: string[];
  ufs_car: string[];
  fffd: number;
}

/** Links per vinculo and document type, and those whose CAR is in no current CAR snapshot (sql/queries/titulares_facts.sql). */
export async function titularesCounts(client: pg.ClientBase, a: { target: Sql; classified: Sql }): Promise<TitularesCounts> {
  return (await client.query(fillSql('queries/titulares_facts', a))).rows[0];
}
