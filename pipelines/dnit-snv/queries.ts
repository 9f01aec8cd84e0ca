// dnit-snv's own statements, one typed function each.
import type pg from 'pg';
import type { LoadStep } from '../../src/etl/shape.ts';
import { fillSql, sqlLiteral, type Sql } from '../../src/sql.ts';

/** Creates t.classified: why each staged segment is kept or not, its line made valid, 2D, multi, EPSG:4326 (sql/queries/dnit_classify.sql). */
export async function classifySegments({ client, t }: LoadStep): Promise<void> {
  await client.query(fillSql('queries/dnit_classify', { classified: t.classified, stage: t.stage }));
}

/** Invalid lines read, those made valid and kept, those that collapsed (the classify repairs lines itself). */
export async function geometryCounts(client: pg.ClientBase, classified: Sql): Promise<{ invalid: number; repaired: number; emptyAfterRepair: number }> {
  const r = await client.query(
    `SELECT count(*) FILTER (WHERE was_invalid)::int AS invalid,
            count(*) FILTER (WHERE was_invalid AND verdict = 'ok')::int AS repaired,
            count(*) FILTER (WHERE verdict = 'geometry_empty_after_repair')::int AS "emptyAfterRepair"
       FROM ${classified}`,
  );
  return r.rows[0];
}

export interface SnvReportRow {
  kind: 'superficie' | 'extensao_divergente' | 'sem_extensao_declarada' | 'codigo_repetido';
  codigo: string | null;
  n: number | null;
  extensao_km: number | null;
  calculada_km: number | null;
}

/** Surface values, segments whose drawn length differs from the declared one by more than `limit`, shared codes (sql/queries/dnit_report.sql). */
export async function snvReport(client: pg.ClientBase, a: { target: Sql; limit: number }): Promise<SnvReportRow[]> {
  return (await client.query(fillSql('queries/dnit_report', { target: a.target, limit: sqlLiteral(a.limit) }))).rows;
}

/** Segments whose vl_br is not a BR number (their br is the code's, the text kept in extra.br). */
export async function brNotNumbers(client: pg.ClientBase, target: Sql): Promise<number> {
  return (await client.query(`SELECT count(*)::int AS n FROM ${target} WHERE extra ? 'br'`)).rows[0].n;
}
