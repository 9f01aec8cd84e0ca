// ibama-embargos's own statements, one typed function each (SQL in sql/queries/ibama_*.sql).
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { CODES_NAMED } from '../../src/etl/quality.ts';
import { fillSql, sqlLiteral, type Sql } from '../../src/sql.ts';

/**
 * Creates `geoms` (src_seq, src_srid, geom, state): the polygon of each staged term, from its
 * inline WKT (the CSV route: a bad cell is 'bad_wkt', never an abort) or the polygonal part of
 * the shapefile feature (state 'not_polygonal' when it has none). Repair reads this table.
 */
export async function createGeoms(client: pg.ClientBase, route: 'csv' | 'layers', a: { geoms: Sql; stage: Sql }): Promise<void> {
  await client.query(fillSql(route === 'csv' ? 'queries/ibama_geoms_csv' : 'queries/ibama_geoms_shp', a));
}

/**
 * Creates t.classified: each staged term typed once (the declared columns with `columns`,
 * their check flags, the facts' flags and the verdict; queries/ibama_typed.sql). The
 * document's HMAC key is a session setting for this statement only, never SQL text.
 */
export async function classifyTerms(client: pg.ClientBase, t: ShapeTables, a: { geoms: Sql; columns: Sql; hmacKey: string }): Promise<void> {
  await client.query(`SELECT set_config('agro.hmac_key', $1, false)`, [a.hmacKey]);
  try {
    await client.query(fillSql('queries/ibama_typed', { classified: t.classified, stage: t.stage, geoms: a.geoms, fix: t.fix, columns: a.columns }));
  } finally {
    await client.query(`SELECT set_config('agro.hmac_key', '', false)`);
  }
}

/** The counts of the report's `embargos` facts, from the typed terms (queries/ibama_facts.sql). */
export interface TermCounts {
  poligono: number;
  ponto: number;
  ponto_em_vez_de_poligono: number;
  polygons_unusable: number;
  polygons_outside: number;
  points_outside: number;
  problemas_poligono: Record<string, number>;
  ativos: number;
  cpf: number;
  cnpj: number;
  outro: number;
  mascarado: number;
  zeros_completados: number;
  ausente: number;
  /** NUM_TAD values shared by loaded terms, and the terms sharing them. */
  grupos: number;
  repetidos: number;
  stamps: number;
  stamp_min: string | null;
  stamp_max: string | null;
  /** [status label, terms], most frequent first: CODES_NAMED at most. */
  status_desconhecido: [string, number][];
  /** The labels past those: how many, on how many terms. */
  status_nao_listados: NotListed;
  /** ['SIT_CANCELADO "X"' (and/or SIT_DESEMBARGO), terms], most frequent first: CODES_NAMED at most. */
  flag_desconhecido: [string, number][];
  flag_nao_listados: NotListed;
  replacement_chars: number;
}

export interface NotListed {
  codigos: number;
  termos: number;
}

export async function termCounts(client: pg.ClientBase, t: ShapeTables): Promise<TermCounts> {
  return (await client.query(fillSql('queries/ibama_facts', { classified: t.classified, named: sqlLiteral(CODES_NAMED) }))).rows[0];
}
