// ibge-municipios's own statements, one typed function each.
import type pg from 'pg';
import type { LoadStep, ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, sqlText, type Sql } from '../../src/sql.ts';

/** Creates t.classified: why each staged mesh feature is kept or not, with its geometry (sql/queries/ibge_classify.sql). */
export async function classifyMesh({ client, t }: LoadStep): Promise<void> {
  await client.query(fillSql('queries/ibge_classify', { classified: t.classified, stage: t.stage, fix: t.fix }));
}

/**
 * The kept rows, one per code: features sharing a code are merged (union of their polygons,
 * attributes of the first one read), so no territory is lost.
 */
export const keptMunicipalities = (t: ShapeTables): Sql =>
  sqlText(`(SELECT c.geocodigo, min(c.src_seq) AS src_seq,
         CASE WHEN count(*) = 1 THEN (array_agg(c.g))[1]
              ELSE ST_Multi(ST_CollectionExtract(ST_UnaryUnion(ST_Collect(c.g)), 3)) END AS geom
    FROM ${t.classified} c WHERE c.verdict = 'ok' GROUP BY c.geocodigo)`);

export type MeshReportRow =
  | { kind: 'nao_municipio'; geocodigo: string; nome: string; uf: string; features: null }
  | { kind: 'codigo_repetido'; geocodigo: string; nome: null; uf: null; features: number };

/** Features that are not municipalities and codes several features shared (sql/queries/ibge_report.sql). */
export async function meshReport(client: pg.ClientBase, a: { target: Sql; classified: Sql }): Promise<MeshReportRow[]> {
  return (await client.query(fillSql('queries/ibge_report', a))).rows;
}
