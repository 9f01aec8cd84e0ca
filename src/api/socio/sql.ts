// Every statement of the socio routes, one typed function each. They read only `serving`:
// the snapshot functions of sql/0045_socio_reads.sql, for the published month and for the
// months kept for `as_of` alike.
import type pg from 'pg';
import { AS_OF_ORDER } from '../as-of-order.ts';

type Db = pg.Pool | pg.ClientBase;

export const CNPJ_DATASET = 'receita-cnpj';

/** The statements, by route step (bench/api.ts runs the same texts through pgbench). */
export const SOCIO_SQL = {
  // readable months and those retention dropped after they answered (an as_of read of their dates must not take an older one)
  snapshots: `SELECT snapshot_id::int, to_char(as_of, 'YYYY-MM-DD') AS as_of, is_current, legivel
             FROM serving.snapshots_as_of WHERE dataset = $1 ORDER BY ${AS_OF_ORDER}`,
  empresa: `SELECT cnpj, cnpj_basico, identificador_matriz_filial, razao_social, nome_fantasia, situacao_cadastral,
                  to_char(data_inicio_atividade, 'YYYY-MM-DD') AS data_inicio_atividade, capital_social, natureza_juridica,
                  natureza_descricao, cnae_fiscal_principal, cnae_descricao, municipio, municipio_nome, codigo_municipio_ibge, uf, cep
             FROM serving.socio_empresa_snapshot($1, $2)`,
  // /socio/cnpj in one round trip: the month read ($1 as_of, or the published one), the
  // establishment ($2) and its company's partner list as JSON (null row: no month; null cnpj: not in it).
  cnpj: `WITH m AS (
             SELECT snapshot_id, to_char(as_of, 'YYYY-MM-DD') AS as_of, is_current, legivel FROM serving.snapshots_as_of
              WHERE dataset = 'receita-cnpj' AND CASE WHEN $1::date IS NULL THEN is_current ELSE as_of <= $1::date END
              ORDER BY ${AS_OF_ORDER} LIMIT 1)
           SELECT m.snapshot_id::int, m.as_of, m.is_current, m.legivel, e.cnpj, e.cnpj_basico, e.identificador_matriz_filial, e.razao_social, e.nome_fantasia,
                  e.situacao_cadastral, to_char(e.data_inicio_atividade, 'YYYY-MM-DD') AS data_inicio_atividade, e.capital_social,
                  e.natureza_juridica, e.natureza_descricao, e.cnae_fiscal_principal, e.cnae_descricao, e.municipio, e.municipio_nome,
                  e.codigo_municipio_ibge, e.uf, e.cep,
                  (SELECT coalesce(json_agg(json_build_object(
                            'identificador_de_socio', p.identificador_de_socio, 'nome_socio', p.nome_socio, 'cnpj_cpf_do_socio', p.cnpj_cpf_do_socio,
                            'qualificacao_socio', p.qualificacao_socio, 'qualificacao_descricao', p.qualificacao_descricao,
                            'data_entrada_sociedade', to_char(p.data_entrada_sociedade, 'YYYY-MM-DD')) ORDER BY p.nome_socio, p.socio_chave), '[]')
                     FROM serving.socio_qsa_snapshot(m.snapshot_id, e.cnpj_basico) p WHERE e.cnpj IS NOT NULL) AS qsa
             FROM m LEFT JOIN LATERAL serving.socio_empresa_snapshot(m.snapshot_id, $2) e ON true`,
  vinculos: `SELECT cnpj, cnpj_basico, razao_social, nome_socio, cnpj_cpf_do_socio, qualificacao_socio, qualificacao_descricao,
                  situacao_cadastral, socio_chave
             FROM serving.socio_vinculos_snapshot($1, $2)`,
  busca: `SELECT cnpj, razao_social, nome_fantasia, situacao_cadastral, uf, municipio_nome, cnae_fiscal_principal, cnae_descricao, score
             FROM serving.socio_busca_snapshot($1, $2, $3, $4, $5, $6)`,
};

export interface CnpjSnapshot {
  snapshot_id: number;
  as_of: string;
  is_current: boolean;
  /** Its tables are kept (false: retention dropped the month after it answered its dates). */
  legivel: boolean;
}

/** receita-cnpj snapshots as_of reads choose among (readable, or dropped after answering), newest month first. */
export async function cnpjSnapshots(db: Db): Promise<CnpjSnapshot[]> {
  const r = await db.query({
    name: 'api_cnpj_snapshots',
    text: SOCIO_SQL.snapshots,
    values: [CNPJ_DATASET],
  });
  return r.rows;
}

export interface EmpresaRow {
  cnpj: string;
  cnpj_basico: string;
  identificador_matriz_filial: string | null;
  razao_social: string | null;
  nome_fantasia: string | null;
  situacao_cadastral: string | null;
  data_inicio_atividade: string | null;
  capital_social: number | null;
  natureza_juridica: string | null;
  natureza_descricao: string | null;
  cnae_fiscal_principal: string | null;
  cnae_descricao: string | null;
  municipio: string | null;
  municipio_nome: string | null;
  codigo_municipio_ibge: string | null;
  uf: string | null;
  cep: string | null;
}

/** One establishment with its company and code descriptions, from a snapshot. */
export async function empresaIn(db: Db, snapshotId: number, cnpj: string): Promise<EmpresaRow | null> {
  const r = await db.query({
    name: 'api_socio_empresa',
    text: SOCIO_SQL.empresa,
    values: [snapshotId, cnpj],
  });
  return r.rows[0] ?? null;
}

export interface SocioRow {
  identificador_de_socio: string | null;
  nome_socio: string | null;
  cnpj_cpf_do_socio: string | null;
  qualificacao_socio: string | null;
  qualificacao_descricao: string | null;
  data_entrada_sociedade: string | null;
}

export interface CompanyAnswer {
  snapshot: CnpjSnapshot;
  /** null: the CNPJ is not in that month. */
  empresa: (EmpresaRow & { qsa: SocioRow[] }) | null;
}

/**
 * /socio/cnpj's read in one statement: the month current on `asOf` (or the published one),
 * the establishment with its company, and the partner list; null when no such month is kept.
 */
export async function companyAnswer(db: Db, asOf: string | null, cnpj: string): Promise<CompanyAnswer | null> {
  const r = await db.query({ name: 'api_socio_cnpj', text: SOCIO_SQL.cnpj, values: [asOf, cnpj] });
  const row = r.rows[0];
  if (!row) return null;
  const { snapshot_id, as_of, is_current, legivel, ...e } = row;
  return { snapshot: { snapshot_id, as_of, is_current, legivel }, empresa: e.cnpj === null ? null : e };
}

export interface VinculoRow {
  cnpj: string | null;
  cnpj_basico: string;
  razao_social: string | null;
  nome_socio: string | null;
  cnpj_cpf_do_socio: string | null;
  qualificacao_socio: string | null;
  qualificacao_descricao: string | null;
  situacao_cadastral: string | null;
  socio_chave: string;
}

/** Partner links of the six visible CPF digits, from a snapshot. */
export async function vinculosIn(db: Db, snapshotId: number, cpfMiolo: string): Promise<VinculoRow[]> {
  const r = await db.query({
    name: 'api_socio_vinculos',
    text: SOCIO_SQL.vinculos,
    values: [snapshotId, cpfMiolo],
  });
  return r.rows;
}

export interface BuscaRow {
  cnpj: string;
  razao_social: string | null;
  nome_fantasia: string | null;
  situacao_cadastral: string | null;
  uf: string | null;
  municipio_nome: string | null;
  cnae_fiscal_principal: string | null;
  cnae_descricao: string | null;
  score: number;
}

/** Name search in a snapshot (trigram word similarity; filters by Receita codes). */
export async function buscaIn(
  db: Db,
  snapshotId: number,
  o: { q: string; uf: string | null; situacao: string | null; cnae: string | null; limit: number },
): Promise<BuscaRow[]> {
  const r = await db.query({
    name: 'api_socio_busca',
    text: SOCIO_SQL.busca,
    values: [snapshotId, o.q, o.uf, o.situacao, o.cnae, o.limit],
  });
  return r.rows;
}
