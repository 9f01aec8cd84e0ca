// zarc's own statements, one typed function each (SQL in sql/queries/zarc_*.sql).
import type pg from 'pg';
import type { ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, sqlLiteral, sqlText, type Sql } from '../../src/sql.ts';

const DECS = Array.from({ length: 36 }, (_, i) => i + 1);

/** dec1, …, dec36 over the row `prefix`. */
export const decNames = (prefix: string): Sql => sqlText(DECS.map((n) => `${prefix}dec${n}`).join(', '));

/** The season of each staged file from its name (NULL: none in the name), by t.stage.src_file. */
function fileSafra(seasons: (string | null)[]): Sql {
  if (!seasons.length) return sqlText('NULL::text');
  return sqlText(`(CASE s.src_file ${seasons.map((v, i) => `WHEN ${i} THEN ${sqlLiteral(v)}::text`).join(' ')} END)`);
}

/**
 * The classify: t.classified holds every staged row typed once (verdict, every declared
 * column, and what the facts count) — sql/queries/zarc_typed.sql.
 */
export async function classifyZarc(client: pg.ClientBase, t: ShapeTables, seasons: (string | null)[], snapshotId: number): Promise<void> {
  const decs = DECS.map((n) => `etl.zarc_risco(s.dec${n}) AS dec${n}`).join(', ');
  const invalidJson = `(SELECT jsonb_object_agg('dec' || x.n, x.v) FROM unnest(ARRAY[${decNames('s.')}]) WITH ORDINALITY AS x(v, n) WHERE etl.zarc_risco_invalido(x.v))`;
  // Most rows hold only the common spellings: one array test per row spares them 36 checks.
  let common = `ARRAY[${decNames('s.')}]`;
  for (const v of ['0', '', '20', '30', '40']) common = `array_remove(${common}, '${v}')`;
  const invalid = `CASE WHEN cardinality(${common}) = 0 THEN 0 ELSE ${DECS.map((n) => `etl.zarc_risco_invalido(s.dec${n})::int`).join(' + ')} END`;
  await client.query(
    fillSql('queries/zarc_typed', {
      classified: t.classified, stage: t.stage, file_safra: fileSafra(seasons), decs: sqlText(decs), snapshot_id: sqlLiteral(snapshotId),
      invalid_cells: sqlText(invalid), invalid_json: sqlText(invalidJson),
    }),
  );
}

/**
 * The rows the build reads: one per chave, the last one read (files in name order, then rows
 * in file order: src_seq runs on across the files).
 */
export const lastReadPerKey = (classified: Sql): Sql =>
  sqlText(`(SELECT DISTINCT ON (chave) * FROM ${classified} WHERE verdict = 'ok' ORDER BY chave, ${LAST_READ_FIRST})`);

/** Of a chave's copies, the order that puts the one loaded first (the last read), for every statement that picks it. */
const LAST_READ_FIRST = 'src_seq DESC';

/**
 * Over the typed rows `c`: the copies of a chave the build does not load (lastReadPerKey keeps
 * the last read), as zarc_duplicates.sql counts them — `exact`: a copy of the same risk cells
 * as a copy read after it (duplicate_row); `conflicting`: the last read of its risk cells but
 * not of its key (conflicting_duplicate).
 */
export const droppedCopies = (classified: Sql, kind: 'exact' | 'conflicting'): string =>
  `c.src_seq IN (SELECT src_seq FROM (
     SELECT src_seq, row_number() OVER (PARTITION BY chave ORDER BY ${LAST_READ_FIRST}) AS rk,
            row_number() OVER (PARTITION BY chave, ARRAY[${decNames('')}] ORDER BY ${LAST_READ_FIRST}) AS rg
       FROM ${classified}
      WHERE verdict = 'ok' AND chave IN (SELECT chave FROM ${classified} WHERE verdict = 'ok' GROUP BY chave HAVING count(*) > 1)) d
    WHERE ${kind === 'exact' ? 'd.rg > 1' : 'd.rg = 1 AND d.rk > 1'})`;

export interface ZarcStats {
  replacement_char: number;
  uf_mismatch: number;
}

/** Totals over every typed row (sql/queries/zarc_stats.sql). */
export async function zarcStats(client: pg.ClientBase, classified: Sql): Promise<ZarcStats> {
  return (await client.query(fillSql('queries/zarc_stats', { classified }))).rows[0];
}

/** Copies of a chave among the kept rows: exact ones and conflicting ones, with sample keys (sql/queries/zarc_duplicates.sql). */
export async function zarcDuplicates(client: pg.ClientBase, classified: Sql): Promise<{ exact: number; conflicting: number; conflict_samples: string[] }> {
  return (await client.query(fillSql('queries/zarc_duplicates', { classified, dec_names: decNames('t.') }))).rows[0];
}

/** 'dec1', …, 'dec36' as a list of literals. */
const decKeys = (): Sql => sqlText(DECS.map((n) => `'dec${n}'`).join(', '));

export interface KeptRaw {
  /** Per column, loaded rows whose value did not parse (NULL, source text in `extra`). */
  unparsed: Record<string, number>;
  invalid_cells: number;
  invalid_rows: number;
  /** Loaded rows with an optional code that is not digits. */
  bad_code: number;
  /** Invalid risk cells per value, and their first occurrences (file number, src_seq, decêndio). */
  values: Record<string, number>;
  samples: { file_no: number; src_seq: number; decendio: number; valor: string }[];
}

/** What the rows loaded keep raw in `extra`, from the typed rows (sql/queries/zarc_kept_raw.sql). */
export async function keptRaw(client: pg.ClientBase, classified: Sql): Promise<KeptRaw> {
  return (await client.query(fillSql('queries/zarc_kept_raw', { classified, dec_keys: decKeys(), last_read_first: sqlText(LAST_READ_FIRST) }))).rows[0];
}

/** Rows of the snapshot per season. */
export async function seasonCounts(client: pg.ClientBase, target: Sql): Promise<{ safra: string; n: string }[]> {
  return (await client.query(`SELECT safra, count(*)::bigint AS n FROM ${target} GROUP BY 1 ORDER BY 1`)).rows;
}

/**
 * Municipalities whose rows carry more than one Bacen code (Cod_Munic): serving.ref_municipio
 * leaves their cod_municipio_bacen NULL rather than pick one (sql/0093), so the load names them.
 */
export async function bacenConflicts(client: pg.ClientBase, target: Sql): Promise<{ geocodigo: string; cod_municipio_bacen: string[] }[]> {
  const r = await client.query(
    `SELECT geocodigo, array_agg(DISTINCT cod_municipio_bacen ORDER BY cod_municipio_bacen) AS cod_municipio_bacen
       FROM (SELECT DISTINCT geocodigo, cod_municipio_bacen FROM ${target} WHERE cod_municipio_bacen IS NOT NULL) p
      GROUP BY geocodigo HAVING count(*) > 1 ORDER BY geocodigo LIMIT 200`,
  );
  return r.rows;
}
