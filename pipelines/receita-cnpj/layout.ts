// Receita Federal CNPJ month (SOURCES §10): one declaration per relation. Each says which
// zips hold it (by name prefix) and which members (by suffix, never the full name: the
// `K3241.K03200Y0.D61011` part changes every month), the headerless CSV's fields in order
// with Receita's names, how each becomes a column (`kind`), the columns the loader adds, and
// the indexes built after the data. The migration (sql/0040_receita_cnpj.sql) creates the
// templates with exactly these columns (test/receita-cnpj.test.ts checks that they agree).

/** How a source field becomes a column. */
export type FieldKind =
  | 'text' // trimmed text, '' → NULL
  | 'code' // like text: a code compared as text (never a number)
  | 'date' // YYYYMMDD, 0 / 00000000 → NULL, anything else unparsed → NULL (raw kept in extra)
  | 'money' // decimal comma, '.' thousands separators removed
  | 'cep' // 8 digits; 7 digits (lost leading zero) left-padded and counted
  | 'list' // comma-separated codes → text[]
  | 'int' // small integer (faixa_etaria)
  | 'doc' // CNPJ part or partner document: text, upper-cased, never a number
  | 'name'; // a name served as text: a trailing CPF cut, any other CPF-looking run masked (transform.cleanName)

export interface FieldDecl {
  name: string;
  kind: FieldKind;
}

export interface IndexDecl {
  /** Index name suffix (`<table>_<name>`). */
  name: string;
  /** SQL of the indexed expression list, e.g. `cnpj_basico` or `etl.cnpj_busca(razao_social) gin_trgm_ops`. */
  on: string;
  using?: 'btree' | 'gin';
}

export interface RelationDecl {
  relation: string;
  /** Zip names of the month (without .zip) that hold this relation. */
  zips: string[];
  /** Member suffix inside those zips (upper-case comparison). */
  memberSuffix: RegExp;
  fields: FieldDecl[];
  /** Columns the loader adds after the source fields, in table order (before extra, snapshot_id). */
  derived: { name: string; type: string }[];
  indexes: IndexDecl[];
}

const f = (kind: FieldKind, ...names: string[]): FieldDecl[] => names.map((name) => ({ name, kind }));
const tenOf = (prefix: string) => Array.from({ length: 10 }, (_, i) => `${prefix}${i}`);

export const PG_TYPES: Record<FieldKind, string> = {
  text: 'text', code: 'text', date: 'date', money: 'numeric', cep: 'text', list: 'text[]', int: 'smallint', doc: 'text', name: 'text',
};

export const EMPRESAS: RelationDecl = {
  relation: 'cnpj_empresas',
  zips: tenOf('Empresas'),
  memberSuffix: /\.EMPRECSV$/i,
  fields: [
    ...f('doc', 'cnpj_basico'),
    ...f('name', 'razao_social'),
    ...f('code', 'natureza_juridica', 'qualificacao_responsavel'),
    ...f('money', 'capital_social'),
    ...f('code', 'porte'),
    ...f('text', 'ente_federativo_responsavel'),
  ],
  // The owner's CPF that MEI/EI legal names end with is cut from razao_social and kept masked
  // (every 'name' field is cleaned the same way; only the legal name keeps what it cut).
  derived: [{ name: 'cpf_titular_mascarado', type: 'text' }],
  indexes: [
    { name: 'cnpj_basico', on: 'cnpj_basico' },
    { name: 'razao_trgm', on: 'etl.cnpj_busca(razao_social) gin_trgm_ops', using: 'gin' },
  ],
};

export const ESTABELECIMENTOS: RelationDecl = {
  relation: 'cnpj_estabelecimentos',
  zips: tenOf('Estabelecimentos'),
  memberSuffix: /\.ESTABELE$/i,
  fields: [
    ...f('doc', 'cnpj_basico', 'cnpj_ordem', 'cnpj_dv'),
    ...f('code', 'identificador_matriz_filial'),
    ...f('name', 'nome_fantasia'),
    ...f('code', 'situacao_cadastral'),
    ...f('date', 'data_situacao_cadastral'),
    ...f('code', 'motivo_situacao_cadastral'),
    ...f('text', 'nome_cidade_exterior'),
    ...f('code', 'pais'),
    ...f('date', 'data_inicio_atividade'),
    ...f('code', 'cnae_fiscal_principal'),
    ...f('list', 'cnae_fiscal_secundaria'),
    ...f('text', 'tipo_logradouro', 'logradouro', 'numero', 'complemento', 'bairro'),
    ...f('cep', 'cep'),
    ...f('code', 'uf', 'municipio'),
    ...f('text', 'ddd_1', 'telefone_1', 'ddd_2', 'telefone_2', 'ddd_fax', 'fax', 'correio_eletronico', 'situacao_especial'),
    ...f('date', 'data_situacao_especial'),
  ],
  derived: [{ name: 'cnpj', type: 'text' }],
  indexes: [
    { name: 'cnpj', on: 'cnpj' },
    { name: 'cnpj_basico', on: 'cnpj_basico' },
    { name: 'fantasia_trgm', on: 'etl.cnpj_busca(nome_fantasia) gin_trgm_ops', using: 'gin' },
  ],
};

export const SOCIOS: RelationDecl = {
  relation: 'cnpj_socios',
  zips: tenOf('Socios'),
  memberSuffix: /\.SOCIOCSV$/i,
  fields: [
    ...f('doc', 'cnpj_basico'),
    ...f('code', 'identificador_de_socio'),
    ...f('name', 'nome_socio'),
    ...f('doc', 'cnpj_cpf_do_socio'),
    ...f('code', 'qualificacao_socio'),
    ...f('date', 'data_entrada_sociedade'),
    ...f('code', 'pais'),
    ...f('doc', 'representante_legal'),
    ...f('name', 'nome_do_representante'),
    ...f('code', 'qualificacao_representante_legal'),
    ...f('int', 'faixa_etaria'),
  ],
  // socio_chave: a masked CPF is not unique inside a company (SOURCES §10.7), so partners are
  // keyed by a hash of what identifies them; cpf_miolo: the six visible digits (/socio/cpf).
  derived: [{ name: 'socio_chave', type: 'text' }, { name: 'cpf_miolo', type: 'text' }],
  indexes: [
    { name: 'cnpj_basico', on: 'cnpj_basico' },
    { name: 'cpf_miolo', on: 'cpf_miolo' },
    { name: 'documento', on: 'cnpj_cpf_do_socio' },
  ],
};

export const SIMPLES: RelationDecl = {
  relation: 'cnpj_simples',
  zips: ['Simples'],
  memberSuffix: /\.SIMPLES\.CSV(\..*)?$/i,
  fields: [
    ...f('doc', 'cnpj_basico'),
    ...f('code', 'opcao_pelo_simples'),
    ...f('date', 'data_opcao_simples', 'data_exclusao_simples'),
    ...f('code', 'opcao_mei'),
    ...f('date', 'data_opcao_mei', 'data_exclusao_mei'),
  ],
  derived: [],
  indexes: [{ name: 'cnpj_basico', on: 'cnpj_basico' }],
};

const lookup = (relation: string, zip: string, suffix: RegExp, derived: RelationDecl['derived'] = []): RelationDecl => ({
  relation, zips: [zip], memberSuffix: suffix, fields: [...f('code', 'codigo'), ...f('text', 'descricao')], derived,
  indexes: [{ name: 'codigo', on: 'codigo' }],
});

export const LOOKUPS: RelationDecl[] = [
  lookup('cnpj_cnaes', 'Cnaes', /\.CNAECSV$/i),
  lookup('cnpj_motivos', 'Motivos', /\.MOTICSV$/i),
  // uf and codigo_ibge: the TOM → IBGE crosswalk (by normalised name + the establishments' UF).
  lookup('cnpj_municipios', 'Municipios', /\.MUNICCSV$/i, [{ name: 'uf', type: 'text' }, { name: 'codigo_ibge', type: 'text' }]),
  lookup('cnpj_naturezas', 'Naturezas', /\.NATJUCSV$/i),
  lookup('cnpj_paises', 'Paises', /\.PAISCSV$/i),
  lookup('cnpj_qualificacoes', 'Qualificacoes', /\.QUALSCSV$/i),
];

/** The big families, loaded in parallel COPY streams. */
export const FAMILIES: RelationDecl[] = [ESTABELECIMENTOS, EMPRESAS, SOCIOS, SIMPLES];
export const RELATIONS: RelationDecl[] = [...FAMILIES, ...LOOKUPS];

/** Every zip of a complete month (37): a month missing one is not loaded (SOURCES §10.7). */
export const MONTH_ZIPS: string[] = RELATIONS.flatMap((r) => r.zips);

/** Table columns of a relation, in order (source fields, derived columns, extra, snapshot_id). */
export function tableColumns(r: RelationDecl): { name: string; type: string }[] {
  return [
    ...r.fields.map((x) => ({ name: x.name, type: PG_TYPES[x.kind] })),
    ...r.derived,
    { name: 'extra', type: 'jsonb' },
    { name: 'snapshot_id', type: 'bigint' },
  ];
}
