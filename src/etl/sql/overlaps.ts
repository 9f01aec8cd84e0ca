// The derive stage's statements (sql/queries/overlap_*.sql), one typed function each: tables
// come in as qualified names, expressions as SQL the derive code wrote; nothing free-form.
import type pg from 'pg';
import { fillSql, type Sql } from '../../sql.ts';

/** A line layer snapshot (roads) cut into runs of at most 8 vertices (~1 km), once per layer snapshot. */
export async function createLinePieces(client: pg.ClientBase, v: { pieces: Sql; layer: Sql; id: Sql; filter: Sql }): Promise<void> {
  await client.query(fillSql('queries/overlap_line_pieces', v));
}

/** One part of a (CAR snapshot, road snapshot) pair: each property's exact geodesic distance to the nearest road, into `out`. */
export async function distancePair(client: pg.ClientBase, v: { out: Sql; car: Sql; pieces: Sql; part: Sql }): Promise<void> {
  await client.query(fillSql('queries/overlap_distance_pair', v));
}

/** What the three statements of an area pair read and write. */
export interface AreaPairTables {
  car: Sql;
  layer: Sql;
  /** The layer's id, active flag and row filter, as expressions over `l`. */
  id: Sql;
  active: Sql;
  filter: Sql;
  /** This part's share of the layer's features. */
  part: Sql;
  hits: Sql;
  pieces: Sql;
  out: Sql;
}

/** Area pair, step 1: every property that intersects a feature of this part of the layer. */
export async function areaHits(client: pg.ClientBase, v: AreaPairTables): Promise<void> {
  await client.query(fillSql('queries/overlap_area_hits', v));
}

/** Area pair, step 2: the large features some property crosses, cut into pieces of at most 256 vertices. */
export async function areaPieces(client: pg.ClientBase, v: AreaPairTables): Promise<void> {
  await client.query(fillSql('queries/overlap_area_pieces', v));
}

/** Area pair, step 3: hectares and share per (property, feature) into `out`; under 1 m² is no overlap. */
export async function areaPair(client: pg.ClientBase, v: AreaPairTables): Promise<void> {
  await client.query(fillSql('queries/overlap_area_pair', v));
}
