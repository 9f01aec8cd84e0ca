// Every statement of the socio routes, one typed function each. They read only `serving`:
// the snapshot functions of sql/0045_socio_reads.sql, for the published month and for the
// months kept for `as_of` alike.
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

export const CNPJ_DATASET = 'receita-cnpj';

/** The statements, by route step (bench/api.ts runs the same texts through pgbench). */
export const SOCIO_SQL = {
  snapshots: `SELECT snapshot_id::int, to_char(as_of, 'YYYY-MM-DD') AS as_of, is_current
             FROM serving.snapshots_legiveis WHERE dataset = $1 ORDER BY as_of DESC, snapshot_id DESC`,
  empresa: `SELECT cnpj, cnpj_basico, identificador_matriz_filial, razao_social, nome_fantasia, situacao_cadastral,
                  to_char(data_inicio_atividade, 'YYYY-MM-DD') AS data_inicio_atividade, capital_social, natureza_juridica,
                  natureza_descricao, cnae_fiscal_principal, cnae_descricao, municipio, municipio_nome, codigo_municipio_ibge, uf, cep
             FROM serving.socio_empresa_snapshot($1, $2)`,
  qsa: `SELECT socio_chave, identificador_de_socio, nome_socio, cnpj_cpf_do_socio, qualificacao_socio, qualificacao_descricao,
                  to_char(data_entrada_sociedade, 'YYYY-MM-DD') AS data_entrada_sociedade, faixa_etaria
             FROM serving.socio_qsa_snapshot($1, $2)`,
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
}

/** Readable receita-cnpj snapshots (tables kept), newest month first. */
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
  socio_chave: string;
  identificador_de_socio: string | null;
  nome_socio: string | null;
  cnpj_cpf_do_socio: string | null;
  qualificacao_socio: string | null;
  qualificacao_descricao: string | null;
  data_entrada_sociedade: string | null;
  faixa_etaria: number | null;
}

/** The partner list of a company (8-character root), from a snapshot. */
export async function qsaIn(db: Db, snapshotId: number, cnpjBasico: string): Promise<SocioRow[]> {
  const r = await db.query({
    name: 'api_socio_qsa',
    text: SOCIO_SQL.qsa,
    values: [snapshotId, cnpjBasico],
  });
  return r.rows;
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
