// cnuc-ucs's own statements, one typed function each.
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, type Sql } from '../../src/sql.ts';

/** State names in the kept units' `uf` lists outside the 27-entry map, with counts (sql/queries/cnuc_unknown_ufs.sql). */
export async function unknownUfNames(client: pg.ClientBase, t: ShapeTables): Promise<{ name: string; n: number }[]> {
  return (await client.query(fillSql('queries/cnuc_unknown_ufs', { classified: t.classified, stage: t.stage }))).rows;
}

/** Units of the snapshot whose `uf` list was kept raw in extra (it named an unknown state). */
export async function unitsWithUnknownUf(client: pg.ClientBase, target: Sql): Promise<number> {
  return (await client.query(`SELECT count(*)::int AS n FROM ${target} WHERE extra ? 'ufs'`)).rows[0].n;
}
