// incra-quilombos's own statements, one typed function each.
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, type Sql } from '../../src/sql.ts';

/** Creates `keys` (src_seq, codigo, origem): stable fallback keys for rows without a usable cd_quilomb (sql/queries/incra_keys.sql). */
export async function createFallbackKeys(client: pg.ClientBase, a: { keys: Sql; stage: Sql }): Promise<void> {
  await client.query(fillSql('queries/incra_keys', a));
}

/** Kept territories per fallback-key origin ('processo', 'comunidade', 'geometria'). */
export async function fallbackKeyCounts(client: pg.ClientBase, a: { keys: Sql; classified: Sql }): Promise<{ origem: string; n: number }[]> {
  return (
    await client.query(
      `SELECT k.origem, count(*)::int AS n FROM ${a.keys} k JOIN ${a.classified} c ON c.src_seq = k.src_seq
        WHERE c.verdict = 'ok' AND k.origem IS NOT NULL GROUP BY 1 ORDER BY 1`,
    )
  ).rows;
}

/** cd_uf values of the kept territories that are not UF siglas, with counts (sql/queries/incra_unknown_ufs.sql). */
export async function unknownUfs(client: pg.ClientBase, t: ShapeTables): Promise<{ name: string; n: number }[]> {
  return (await client.query(fillSql('queries/incra_unknown_ufs', { classified: t.classified, stage: t.stage }))).rows;
}
