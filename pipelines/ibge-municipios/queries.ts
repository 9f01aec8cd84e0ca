// ibge-municipios's own statements, one typed function each.
import type pg from 'pg';
import type { RunContext } from '../../src/etl/pipeline.ts';
import type { LoadStep, ShapeTables } from '../../src/etl/shape.ts';
import { fillSql, sqlText, type Sql } from '../../src/sql.ts';
import { officialList, type NoList, type OfficialList } from './official-list.ts';

/** The official list each run read in its download stage (the one its source's SHA-256 covers; its facts report it), or why it had none. */
export const runLists = new WeakMap<RunContext, OfficialList | NoList>();

/** The run's list, read once. */
export async function runList(ctx: RunContext): Promise<OfficialList | NoList> {
  let list = runLists.get(ctx);
  if (!list) runLists.set(ctx, (list = await officialList(ctx)));
  return list;
}

/**
 * Creates t.classified: why each staged mesh feature is kept or not, with its geometry
 * (sql/queries/ibge_classify.sql). With an official list (SOURCES §9.7), a code is a
 * municipality when the list has it, and the listed codes the mesh lacks (or whose features
 * were all rejected) are then staged and kept as rows without geometry (counted as read:
 * they are rows of the source's list).
 */
export async function classifyMesh({ client, t, ctx, staged }: LoadStep): Promise<void> {
  const list = await runList(ctx);
  if (!('municipios' in list)) {
    await client.query(fillSql('queries/ibge_classify', { classified: t.classified, stage: t.stage, fix: t.fix, oficial: sqlText('etl.ibge_is_municipio(x.code)') }));
    return;
  }
  const table = t.aux('oficial');
  await client.query(`CREATE UNLOGGED TABLE ${table} (geocodigo text PRIMARY KEY, nome text NOT NULL)`);
  await client.query(`INSERT INTO ${table} SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(geocodigo text, nome text)`, [JSON.stringify(list.municipios)]);
  const oficial = sqlText(`EXISTS (SELECT 1 FROM ${table} o WHERE o.geocodigo = x.code)`);
  await client.query(fillSql('queries/ibge_classify', { classified: t.classified, stage: t.stage, fix: t.fix, oficial }));
  // After the classify: a listed code whose features were all rejected is kept too, without geometry.
  const added = await client.query(fillSql('queries/ibge_official_rows', { stage: t.stage, list: table, classified: t.classified }));
  if (staged) staged.rows += added.rowCount ?? 0;
}

/**
 * The kept rows, one per code: features sharing a code are merged (union of their polygons,
 * attributes of the first one read), so no territory is lost.
 */
export const keptMunicipalities = (t: ShapeTables): Sql =>
  sqlText(`(SELECT c.geocodigo, min(c.src_seq) AS src_seq, bool_or(c.oficial) AS oficial,
         CASE WHEN count(*) = 1 THEN (array_agg(c.g))[1]
              ELSE ST_Multi(ST_CollectionExtract(ST_UnaryUnion(ST_Collect(c.g)), 3)) END AS geom
    FROM ${t.classified} c WHERE c.verdict = 'ok' GROUP BY c.geocodigo)`);

export type MeshReportRow =
  | { kind: 'nao_municipio' | 'sem_malha' | 'fora_da_lista'; geocodigo: string; nome: string; uf: string; features: null }
  | { kind: 'codigo_repetido'; geocodigo: string; nome: null; uf: null; features: number };

/**
 * Features that are not municipalities, codes several features shared, official codes the
 * mesh lacks and mesh codes shaped like a municipality's that the official list lacks
 * (sql/queries/ibge_report.sql).
 */
export async function meshReport(client: pg.ClientBase, a: { target: Sql; classified: Sql }): Promise<MeshReportRow[]> {
  return (await client.query(fillSql('queries/ibge_report', a))).rows;
}
