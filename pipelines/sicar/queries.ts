// sicar's own statements, one typed function each (tables in as Sql, typed rows out).
import type pg from 'pg';
import { CODES_NAMED } from '../../src/etl/quality.ts';
import { dateLiteral } from '../../src/etl/sql/shape.ts';
import { BUILD_TABLE, fillSql, sqlLiteral, sqlText, type Sql } from '../../src/sql.ts';
import { onTwoConnections } from '../../src/etl/two-connections.ts';

/** The typed pass of AREA_IMOVEL (sql/queries/sicar_typed_imovel.sql). */
export async function typeProperties(client: pg.ClientBase, a: { typed: Sql; stage: Sql; uf: string; asOf: string }): Promise<void> {
  await client.query(fillSql('queries/sicar_typed_imovel', { typed: a.typed, stage: a.stage, uf: sqlLiteral(a.uf), as_of: sqlText(dateLiteral(a.asOf)) }));
  // Statistics for the statements that read it (verdict counts and examples, the builds): a fresh table has none.
  await client.query(`ANALYZE ${a.typed}`);
}

/** How the polygons of layers without cod_imovel are linked (none: every layer has it). */
export interface ThemeLink {
  car: Sql;
  link_join: Sql;
  link_verdict: Sql;
}
export const NO_LINK: ThemeLink = { car: sqlText('s.car'), link_join: sqlText(''), link_verdict: sqlText('NULL::text') };

/** The typed pass of one theme (sql/queries/sicar_typed_tema.sql). */
export async function typeTheme(client: pg.ClientBase, a: { typed: Sql; stage: Sql; uf: string; tema: string; link: ThemeLink }): Promise<void> {
  await client.query(fillSql('queries/sicar_typed_tema', { typed: a.typed, stage: a.stage, uf: sqlLiteral(a.uf), tema: sqlLiteral(a.tema), ...a.link }));
  await client.query(`ANALYZE ${a.typed}`);
}

/** The winning properties in EPSG:4326, for linking themes without cod_imovel (indexed). */
export async function linkProperties(client: pg.ClientBase, a: { properties: Sql; typed: Sql }): Promise<void> {
  await client.query(fillSql('queries/sicar_link_properties', a));
  await client.query(`CREATE INDEX ON ${a.properties} USING gist (geom)`);
  await client.query(`ANALYZE ${a.properties}`);
}

/** Links the polygons of `layers` (without cod_imovel) to the property containing their point-on-surface; returns the link counts. */
export async function linkTheme(client: pg.ClientBase, a: { links: Sql; stage: Sql; properties: Sql; layers: string[] }): Promise<{ vinculados: number; sem_imovel: number; ambiguos: number }> {
  const layers = sqlText(`ARRAY[${a.layers.map((n) => sqlLiteral(n)).join(', ')}]`);
  await client.query(fillSql('queries/sicar_theme_link', { links: a.links, stage: a.stage, properties: a.properties, layers }));
  return (await client.query(
    `SELECT count(*) FILTER (WHERE matches = 1)::int AS vinculados, count(*) FILTER (WHERE matches = 0)::int AS sem_imovel,
            count(*) FILTER (WHERE matches > 1)::int AS ambiguos FROM ${a.links}`,
  )).rows[0];
}

/** The typed pass's columns for the car of a linked theme and its verdict when not linked. */
export function themeLink(links: Sql, layers: string[]): ThemeLink {
  const list = `ARRAY[${layers.map((n) => sqlLiteral(n)).join(', ')}]`;
  return {
    car: sqlText('coalesce(s.car, l.car)'),
    link_join: sqlText(`LEFT JOIN ${links} l ON l.src_seq = s.src_seq`),
    link_verdict: sqlText(`CASE WHEN s.src_layer = ANY(${list}) THEN CASE
      WHEN s.geom IS NULL THEN 'no_geometry' WHEN s.repair = 'rejected' THEN 'geometry_unrepairable'
      WHEN s.repair = 'empty' THEN 'geometry_empty_after_repair'
      WHEN l.matches = 0 THEN 'not_linked_no_property' WHEN l.matches > 1 THEN 'not_linked_ambiguous' END END`),
  };
}

/** The theme hectares' table (filled by `themeAreaOf`, one theme at a time, then `indexThemeArea`): one row per property and theme. */
export async function createThemeArea(client: pg.ClientBase, theme_area: Sql): Promise<void> {
  await client.query(`CREATE UNLOGGED TABLE ${theme_area} (car text, tema_base text, ha double precision) ${BUILD_TABLE}`);
}

/**
 * Hectares per property of one theme, without double counting (sql/queries/sicar_theme_area.sql),
 * from `polygons`: that theme's kept typed rows (or car_tema's rows of it). One call per theme:
 * `indexThemeArea` refuses a theme given twice.
 */
export async function themeAreaOf(c: pg.ClientBase, a: { theme_area: Sql; polygons: Sql }): Promise<void> {
  await c.query(fillSql('queries/sicar_theme_area', { theme_area: a.theme_area, polygons: a.polygons }));
}

/** Unique per property and theme: a theme whose hectares were computed twice fails here rather than counting twice. */
export async function indexThemeArea(client: pg.ClientBase, theme_area: Sql): Promise<void> {
  await client.query(`CREATE UNIQUE INDEX ON ${theme_area} (car, tema_base)`);
  await client.query(`ANALYZE ${theme_area}`);
}

/** The theme hectares of `themes` (each its polygons), the themes on two connections, into one table, indexed. */
export async function themeAreas(pool: pg.Pool, client: pg.ClientBase, a: { theme_area: Sql; themes: Sql[] }): Promise<void> {
  await createThemeArea(client, a.theme_area);
  await onTwoConnections(pool, client, a.themes.map((polygons) => (c: pg.ClientBase) => themeAreaOf(c, { theme_area: a.theme_area, polygons })));
  await indexThemeArea(client, a.theme_area);
}

/** A property's hectares per theme, one row per property (from `theme_area`'s rows per property and theme). */
export const themeAreaByProperty = (themeArea: Sql): Sql =>
  sqlText(`(SELECT car, max(ha) FILTER (WHERE tema_base = 'APPS') AS app_ha,
          max(ha) FILTER (WHERE tema_base = 'RESERVA_LEGAL') AS reserva_legal_ha,
          max(ha) FILTER (WHERE tema_base = 'AREA_CONSOLIDADA') AS area_consolidada_ha
     FROM ${themeArea} GROUP BY car)`);

/** Of a CAR number's kept copies, the one loaded: the most recently updated, then the last read (contract §3). */
const WINNER_ORDER = 'car, updated DESC NULLS LAST, src_seq DESC';

export const winningProperties = (typed: Sql, themeArea: Sql | null, loaded: { apps: boolean; rl: boolean; ac: boolean }): Sql =>
  sqlText(`(SELECT DISTINCT ON (car) * FROM ${typed} WHERE verdict = 'ok' ORDER BY ${WINNER_ORDER}) s
  ${themeArea ? `LEFT JOIN ${themeAreaByProperty(themeArea)} ta ON ta.car = s.car` : 'CROSS JOIN (SELECT NULL::float8 AS app_ha, NULL::float8 AS reserva_legal_ha, NULL::float8 AS area_consolidada_ha) ta'}
  CROSS JOIN (SELECT ${sqlLiteral(loaded.apps)} AS apps_loaded, ${sqlLiteral(loaded.rl)} AS rl_loaded, ${sqlLiteral(loaded.ac)} AS ac_loaded) v`);

/** Over the typed rows `c`: a kept copy of a CAR number that winningProperties does not load (an older one). */
export const olderCopies = (typed: Sql): string =>
  `c.src_seq IN (SELECT src_seq FROM (
     SELECT src_seq, row_number() OVER (PARTITION BY car ORDER BY ${WINNER_ORDER}) AS rn FROM ${typed}
      WHERE verdict = 'ok' AND car IN (SELECT car FROM ${typed} WHERE verdict = 'ok' GROUP BY car HAVING count(*) > 1)) d WHERE d.rn > 1)`;

/** The kept rows of the themes' typed tables, together. */
export const keptThemeRows = (typed: Sql[]): Sql =>
  sqlText(`(${typed.map((t) => `SELECT * FROM ${t} WHERE verdict = 'ok'`).join('\nUNION ALL\n')}) s`);

/** Unknown codes past the CODES_NAMED (src/etl/quality.ts) named ones: how many codes, in how many rows. */
export interface MoreCodes {
  codes: number;
  n: number;
}

export interface PropertyFacts {
  dates: { col: string; kind: string; n: number }[];
  numbers: { num_area: number; mod_fiscal: number; num_area_overflow: number; mod_fiscal_overflow: number };
  /** At most CODES_NAMED per field, the most frequent. */
  unknownCodes: { field: string; code: string; n: number }[];
  /** Per field, the codes past those. */
  moreCodes: ({ field: string } & MoreCodes)[];
}

/**
 * What the facts count of the properties loaded, read from the typed pass: the copy of each
 * CAR number that winningProperties loads, so that a date or number counted as kept raw in
 * `extra` is in the snapshot (an other-state row or an older copy, dropped, was counted too).
 */
export async function propertyFacts(client: pg.ClientBase, typed: Sql): Promise<PropertyFacts> {
  const r = (await client.query(
    `WITH k AS MATERIALIZED (
       SELECT DISTINCT ON (car) num_area_unparsed, mod_fiscal_unparsed, num_area_overflow, mod_fiscal_overflow,
              dat_criaca_kind, dat_atuali_kind, unknown_status, unknown_tipo
         FROM ${typed} WHERE verdict = 'ok' ORDER BY ${WINNER_ORDER}),
     u AS MATERIALIZED (
       SELECT field, code, n, row_number() OVER (PARTITION BY field ORDER BY n DESC, code COLLATE "C") AS rn FROM (
         SELECT 'ind_status' AS field, unknown_status AS code, count(*)::int AS n FROM k WHERE unknown_status IS NOT NULL GROUP BY 2
         UNION ALL SELECT 'ind_tipo', unknown_tipo, count(*)::int FROM k WHERE unknown_tipo IS NOT NULL GROUP BY 2) a)
     SELECT count(*) FILTER (WHERE num_area_unparsed)::int AS num_area, count(*) FILTER (WHERE mod_fiscal_unparsed)::int AS mod_fiscal,
            count(*) FILTER (WHERE num_area_overflow)::int AS num_area_overflow, count(*) FILTER (WHERE mod_fiscal_overflow)::int AS mod_fiscal_overflow,
            (SELECT coalesce(jsonb_agg(d), '[]') FROM (
               SELECT col, kind, count(*)::int AS n FROM k, LATERAL (VALUES ('dat_criaca', dat_criaca_kind), ('dat_atuali', dat_atuali_kind)) x(col, kind)
                WHERE kind IN ('placeholder', 'bad', 'implausible') GROUP BY 1, 2) d) AS dates,
            (SELECT coalesce(jsonb_agg(jsonb_build_object('field', field, 'code', code, 'n', n) ORDER BY field, rn), '[]') FROM u WHERE rn <= $1) AS codes,
            (SELECT coalesce(jsonb_agg(m ORDER BY field), '[]') FROM (
               SELECT field, count(*)::int AS codes, sum(n)::int AS n FROM u WHERE rn > $1 GROUP BY field) m) AS more
       FROM k`,
    [CODES_NAMED],
  )).rows[0];
  return {
    dates: r.dates, numbers: { num_area: r.num_area, mod_fiscal: r.mod_fiscal, num_area_overflow: r.num_area_overflow, mod_fiscal_overflow: r.mod_fiscal_overflow },
    unknownCodes: r.codes, moreCodes: r.more,
  };
}

/**
 * The properties of the state whose every row was rejected (verdicts other than ok, a bad CAR
 * number or another state's), into `rejected`, with the status their row gives (the one
 * car_imovel would have kept, WINNER_ORDER): still in the registry, the change events compare
 * them as the loaded properties, never taking them for gone. Returns how many.
 */
export async function writeRejectedProperties(client: pg.ClientBase, a: { rejected: Sql; typed: Sql; car_imovel: Sql }): Promise<number> {
  await client.query(`CREATE TABLE ${a.rejected} (car text PRIMARY KEY, situacao text) ${BUILD_TABLE}`);
  return (await client.query(
    `INSERT INTO ${a.rejected} (car, situacao) SELECT DISTINCT ON (car) t.car, t.situacao FROM ${a.typed} t
      WHERE t.verdict NOT IN ('ok', 'bad_car_number', 'other_state') AND NOT EXISTS (SELECT 1 FROM ${a.car_imovel} c WHERE c.car = t.car)
      ORDER BY ${WINNER_ORDER}`,
  )).rowCount ?? 0;
}

/** Theme polygons of the snapshot whose car has no row in car_imovel. */
export async function orphanThemePolygons(client: pg.ClientBase, a: { car_tema: Sql; car_imovel: Sql }): Promise<number> {
  return (await client.query(`SELECT count(*)::int AS n FROM ${a.car_tema} m WHERE NOT EXISTS (SELECT 1 FROM ${a.car_imovel} c WHERE c.car = m.car)`)).rows[0].n;
}

export interface ThemeFacts {
  /** Polygons whose num_area is text that is not a number (area_ha NULL, text kept in extra). */
  areaUnparsed: number;
  /** ind_status codes that are none of §2.5's (situacao NULL, text kept in extra), with counts: the CODES_NAMED most frequent. */
  unknownStatus: { code: string; n: number }[];
  /** Kept polygons' cod_tema (as written) outside the theme's vocabulary, with counts: the CODES_NAMED most frequent. */
  unknownCodes: { code: string; n: number }[];
  /** The status codes and cod_tema past the named ones (null: none). */
  moreStatus: MoreCodes | null;
  moreCodes: MoreCodes | null;
}

/**
 * What the facts count of one theme's kept typed rows (the polygons loaded: a value kept raw
 * in `extra` is in the snapshot), in one scan (grouping sets: the whole table,
 * per unknown status, per code outside the vocabulary; three scans of 1 M APPS rows cost the
 * load's critical path): `vocabulary` is the theme's cod_tema list (SOURCES §2.5), compared
 * as sicar_theme_area.sql reads codes (any case, blanks and hyphens as underscores).
 */
export async function themeFacts(client: pg.ClientBase, typed: Sql, vocabulary: readonly string[]): Promise<ThemeFacts> {
  const rows: { status: string | null; code: string | null; n: number; area: number; g: number; codes: number; rows: number; rn: number }[] = (await client.query(
    `WITH s AS (
       SELECT unknown_status AS status, code_out AS code, count(*)::int AS n, count(*) FILTER (WHERE area_unparsed)::int AS area,
              GROUPING(unknown_status, code_out) AS g
         FROM (SELECT area_unparsed, unknown_status,
                      CASE WHEN cod_tema IS NOT NULL AND upper(translate(cod_tema, ' -', '__')) <> ALL ($1::text[]) THEN cod_tema END AS code_out
                 FROM ${typed} WHERE verdict = 'ok') t
        GROUP BY GROUPING SETS ((), (unknown_status), (code_out))),
     -- GROUPING: 3 = the whole table, 1 = per status (code_out rolled up), 2 = per code; the named
     -- ones of each list are its most frequent, the others only counted
     l AS (SELECT *, row_number() OVER (PARTITION BY g ORDER BY n DESC, coalesce(status, code) COLLATE "C") AS rn,
                  count(*) OVER (PARTITION BY g)::int AS codes, sum(n) OVER (PARTITION BY g)::int AS rows
             FROM s WHERE g = 3 OR (g = 1 AND status IS NOT NULL) OR (g = 2 AND code IS NOT NULL))
     SELECT * FROM l WHERE rn <= $2 OR g = 3`,
    [vocabulary, CODES_NAMED],
  )).rows;
  const listed = (g: number, key: 'status' | 'code') => rows.filter((r) => r.g === g)
    .map((r) => ({ code: r[key]!, n: r.n })).sort((x, y) => y.n - x.n || (x.code < y.code ? -1 : x.code > y.code ? 1 : 0));
  const more = (g: number): MoreCodes | null => {
    const named = rows.filter((r) => r.g === g);
    if (!named.length || named[0].codes <= named.length) return null;
    return { codes: named[0].codes - named.length, n: named[0].rows - named.reduce((t, r) => t + r.n, 0) };
  };
  return { areaUnparsed: rows.find((r) => r.g === 3)?.area ?? 0, unknownStatus: listed(1, 'status'), unknownCodes: listed(2, 'code'), moreStatus: more(1), moreCodes: more(2) };
}
