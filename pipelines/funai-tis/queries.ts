// funai-tis's own statements, one typed function each.
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql } from '../../src/sql.ts';

/** uf_sigla values of the kept lands that are not UF siglas, with counts (sql/queries/funai_unknown_ufs.sql). */
export async function unknownUfs(client: pg.ClientBase, t: ShapeTables): Promise<{ name: string; n: number }[]> {
  return (await client.query(fillSql('queries/funai_unknown_ufs', { classified: t.classified, stage: t.stage }))).rows;
}
