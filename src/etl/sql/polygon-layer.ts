// The classify statement of the national polygon layers (FUNAI, CNUC, INCRA): one typed
// function over sql/queries/layer_classify.sql.
import type pg from 'pg';
import { fillSql, type Sql } from '../../sql.ts';

/**
 * Creates `classified` (src_seq, codigo, geom, repair, verdict): the key, the final geometry
 * (repaired, polygonal, 2D, EPSG:4326, multi) and why each staged feature is kept or not.
 * Among copies of a key the latest `newest` wins, then the one read last.
 */
export async function classifyPolygons(
  client: pg.ClientBase,
  a: { classified: Sql; stage: Sql; fix: Sql; key: Sql; newest: Sql; keyJoin: Sql },
): Promise<void> {
  await client.query(fillSql('queries/layer_classify', { classified: a.classified, stage: a.stage, fix: a.fix, key: a.key, newest: a.newest, key_join: a.keyJoin }));
}
