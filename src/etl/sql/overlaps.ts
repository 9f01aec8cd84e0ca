// The derive stage's statements (sql/queries/overlap_*.sql), one typed function each: tables
// come in as qualified names, expressions as SQL the derive code wrote; nothing free-form.
import type pg from 'pg';
import { BUILD_TABLE, fillSql, type Sql } from '../../sql.ts';

/** A line layer snapshot (roads) cut into runs of at most 8 vertices (~1 km), once per layer snapshot. */
export async function createLinePieces(client: pg.ClientBase, v: { pieces: Sql; layer: Sql; id: Sql; filter: Sql }): Promise<void> {
  await client.query(fillSql('queries/overlap_line_pieces', v));
}

/** A road layer's pieces with their code's rank in the database's collation (ties go to the smallest code). */
export async function linePiecesRows(client: pg.ClientBase, v: { pieces: Sql }): Promise<{ pid: number; fid: string; rank: number; wkb: Buffer }[]> {
  const r = await client.query(
    `SELECT pid::float8 AS pid, fid, dense_rank() OVER (ORDER BY fid)::int AS rank, ST_AsBinary(geom) AS wkb FROM ${v.pieces} WHERE geom IS NOT NULL ORDER BY pid`,
  );
  return r.rows;
}

/** The (empty) table one part of a distance pair fills: the columns every overlap part has. */
export async function createDistanceOut(client: pg.ClientBase, v: { out: Sql; car: Sql }): Promise<void> {
  await client.query(`CREATE UNLOGGED TABLE ${v.out} ${BUILD_TABLE} AS
    SELECT c.car, c.uf, NULL::text AS fid, NULL::double precision AS area_sobreposta_ha, NULL::double precision AS percentual,
           NULL::boolean AS ativo, NULL::double precision AS distancia_km
    FROM ${v.car} c WITH NO DATA`);
}

/** COPY … TO STDOUT (binary) of one part of a CAR snapshot's non-empty geometries: car, uf, WKB. */
export function propertyGeometriesCopy(v: { car: Sql; part: Sql }): Sql {
  return `COPY (SELECT c.car, c.uf, ST_AsBinary(c.geom) FROM ${v.car} c
                WHERE ${v.part} AND c.geom IS NOT NULL AND NOT ST_IsEmpty(c.geom)) TO STDOUT (FORMAT binary)` as Sql;
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
