// receita-cnpj's own statements, one typed function each: tables come in as `Sql`
// (tableName), values as literals or parameters, never as free text.
import type pg from 'pg';
import { fillSql, sqlLiteral, type Sql } from '../../src/sql.ts';
import { forgetQsaChanges, partnerListDiff } from '../../src/etl/sql/qsa-changes.ts';

/** A month's lookup tables, for the facts queries' orphan codes. */
export interface LookupTables {
  naturezas: Sql;
  qualificacoes: Sql;
  motivos: Sql;
  paises: Sql;
  cnaes: Sql;
}

/** An orphan count: rows whose code is in no lookup, and a few such codes. */
type Orphans<K extends string> = { [k in K]: number } & { [k in `${K}_codigos`]: string[] };

export type CompanyFacts = { linhas: number; razao_vazia: number; cnpj_basico_repetido: number; cnpj_basico_invalido: number } & Orphans<'natureza_orfa' | 'qualificacao_orfa'>;
export type EstablishmentFacts = { linhas: number; situacao_desconhecida: number } & Orphans<'motivo_orfao' | 'pais_orfao' | 'cnae_orfao'>;
export type PartnerFacts = { linhas: number; empresas_com_socios: number; nome_vazio: number; chave_repetida: number; cnpj_basico_invalido: number } & Orphans<'qualificacao_orfa' | 'pais_orfao'>;

/** Companies: empty legal names, repeated roots, orphan legal natures and qualifications (sql/queries/cnpj_facts_empresas.sql). */
export async function companyFacts(client: pg.ClientBase, target: Sql, l: LookupTables): Promise<CompanyFacts> {
  return (await client.query(fillSql('queries/cnpj_facts_empresas', { target, naturezas: l.naturezas, qualificacoes: l.qualificacoes }))).rows[0];
}

/** Establishments: unknown statuses, orphan reasons, countries and CNAEs (sql/queries/cnpj_facts_estabelecimentos.sql). */
export async function establishmentFacts(client: pg.ClientBase, target: Sql, l: LookupTables): Promise<EstablishmentFacts> {
  return (await client.query(fillSql('queries/cnpj_facts_estabelecimentos', { target, motivos: l.motivos, paises: l.paises, cnaes: l.cnaes }))).rows[0];
}

/** Partners: companies with partners, empty names, repeated keys, orphan qualifications and countries (sql/queries/cnpj_facts_socios.sql). */
export async function partnerFacts(client: pg.ClientBase, target: Sql, l: LookupTables): Promise<PartnerFacts> {
  return (await client.query(fillSql('queries/cnpj_facts_socios', { target, qualificacoes: l.qualificacoes, paises: l.paises }))).rows[0];
}

/** IBGE's municipalities by normalised name and UF (empty when ibge-municipios is not loaded). */
export async function ibgeMunicipalities(client: pg.ClientBase): Promise<{ geocodigo: string; uf: string; nome: string }[]> {
  return (await client.query(`SELECT geocodigo, uf, etl.normalize_nome(nome) AS nome FROM serving.ibge_municipios`)).rows;
}

/** Names normalised as etl.normalize_nome does, in the order given. */
export async function normalisedNames(client: pg.ClientBase, names: string[]): Promise<string[]> {
  const r = await client.query(`SELECT etl.normalize_nome(x) AS n FROM unnest($1::text[]) WITH ORDINALITY AS t(x, i) ORDER BY i`, [names]);
  return r.rows.map((x) => x.n);
}

/** True when the table exists (a previous month's may have been dropped by retention). */
export async function tableExists(db: pg.ClientBase | pg.Pool, table: Sql): Promise<boolean> {
  return (await db.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [table])).rows[0].ok;
}

/** Writes the partner-list changes of every company against the previous month (sql/queries/cnpj_qsa_changes.sql), for the report; returns the companies changed. */
export async function writePartnerListDiff(db: pg.ClientBase | pg.Pool, a: { snapshotId: number; previousSnapshotId: number; socios: Sql; previous: Sql }): Promise<number> {
  await forgetQsaChanges(db, a.snapshotId); // a rerun of the same snapshot writes its diff afresh
  const sql = fillSql('queries/cnpj_qsa_changes', {
    snapshot_id: sqlLiteral(a.snapshotId), previous_snapshot_id: sqlLiteral(a.previousSnapshotId), diff: partnerListDiff(a.socios, a.previous),
  });
  return (await db.query(sql)).rowCount ?? 0;
}
