// icmbio-embargos's own statements, one typed function each (SQL in sql/queries/icmbio_*.sql).
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, type Sql } from '../../src/sql.ts';

/**
 * Creates t.classified: each staged embargo typed once (the declared columns with `columns`,
 * their check flags, the facts' flags and the verdict; queries/icmbio_typed.sql). The
 * document's HMAC key is a session setting for this statement only, never SQL text.
 */
export async function classifyEmbargoes(client: pg.ClientBase, t: ShapeTables, a: { columns: Sql; hmacKey: string }): Promise<void> {
  await client.query(`SELECT set_config('agro.hmac_key', $1, false)`, [a.hmacKey]);
  try {
    await client.query(fillSql('queries/icmbio_typed', { classified: t.classified, stage: t.stage, fix: t.fix, columns: a.columns }));
  } finally {
    await client.query(`SELECT set_config('agro.hmac_key', '', false)`);
  }
}

/** The counts of the report's `icmbio` facts, from the kept typed rows (queries/icmbio_facts.sql). */
export interface EmbargoCounts {
  /** Kept embargoes per document class ('cpf', 'cnpj', 'outro', 'mascarado', 'ausente'); a class without any is absent. */
  documentos: Record<string, number>;
  zeros_completados: number;
  /** num_emb values shared by loaded embargoes, and the embargoes sharing them. */
  grupos: number;
  repetidos: number;
  sem_uc: number;
}

export async function embargoCounts(client: pg.ClientBase, t: ShapeTables): Promise<EmbargoCounts> {
  return (await client.query(fillSql('queries/icmbio_facts', { classified: t.classified }))).rows[0];
}
