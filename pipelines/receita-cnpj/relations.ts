// Receita Federal CNPJ month (SOURCES §10): one declaration per relation (defineRelation),
// each with where the month holds it — which zips (by name prefix) and which members (by
// suffix, never the full name: the `K3241.K03200Y0.D61011` part changes every month) — and
// its columns in template order: the header-less CSV's fields at their record position (`at`)
// with Receita's names and how each becomes a value (`cell`, the streamed conversions of
// transform.ts), the columns the line builder derives, `extra` and `snapshot_id`; empty
// values counted per field; the indexes built after the data. The templates (migrations
// 0040 on) must list exactly these columns: every load checks it before copying anything,
// test/relations.test.ts checks it without one.
import { defineRelation, type ColumnDef, type RelationDef } from '../../src/etl/relation.ts';
import { streamedRelation, type StreamedRelation } from '../../src/etl/shape-stream.ts';

/** How a record's field becomes its value, in the line builder (transform.ts). */
export type CellKind =
  | 'text' // trimmed text, '' → NULL
  | 'code' // like text: a code compared as text (never a number)
  | 'code2' // a 2-character code of a fixed list (situação, porte): a lone digit is left-padded ('2' → '02', SOURCES §10.5), counted
  | 'uf' // a state sigla or EX (SOURCES §10.2): upper-cased when written in lower case (counted); anything else unparsed
  | 'tom' // Receita's 4-digit TOM municipality code (SOURCES §1.3): 1–3 digits lost their zeros (left-padded, counted); anything else unparsed
  | 'date' // YYYYMMDD, 0 / 00000000 → NULL, anything else unparsed → NULL (raw kept in extra)
  | 'money' // decimal comma, '.' thousands separators removed (a dot elsewhere: unparsed)
  | 'cep' // 8 digits; 7 digits (lost leading zero) left-padded and counted
  | 'list' // comma-separated codes → text[]
  | 'int' // small integer (faixa_etaria)
  | 'doc' // CNPJ part or partner document: text, upper-cased, never a number (alphanumeric CNPJs)
  | 'name' // a name served as text: a trailing CPF cut, any other CPF-looking run masked (transform.cleanName)
  | 'derived'; // not a field of the record: the line builder computes it (CNPJ, partner key, …)

export const CELLS: ReadonlySet<string> = new Set<CellKind>(['text', 'code', 'code2', 'uf', 'tom', 'date', 'money', 'cep', 'list', 'int', 'doc', 'name', 'derived']);

const TYPES: Record<Exclude<CellKind, 'derived'>, string> = {
  text: 'text', code: 'text', code2: 'text', uf: 'text', tom: 'text', date: 'date', money: 'numeric', cep: 'text', list: 'text[]', int: 'smallint', doc: 'text', name: 'text',
};

/** A relation of the month: its declaration and where the month holds it (zips, member suffix, record fields). */
export type CnpjRelation = StreamedRelation;

/** A record's field at position `at` (counted when empty, as every field of the month). */
const field = (at: number, name: string, cell: Exclude<CellKind, 'derived'>): ColumnDef => ({ name, type: TYPES[cell], cell, at, counted: true });
/** Fields in record order from position `at`, all converted the same way. */
const fields = (at: number, cell: Exclude<CellKind, 'derived'>, ...names: string[]): ColumnDef[] => names.map((n, i) => field(at + i, n, cell));
/** A column the line builder derives from the record. */
const derived = (name: string): ColumnDef => ({ name, type: 'text', cell: 'derived' });
const TAIL: ColumnDef[] = [{ name: 'extra', type: 'jsonb', role: 'extra' }, { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' }];
const tenOf = (prefix: string) => Array.from({ length: 10 }, (_, i) => `${prefix}${i}`);

function monthRelation(where: { zips: string[]; member: RegExp }, def: Omit<RelationDef, 'columns'> & { columns: ColumnDef[] }): CnpjRelation {
  const rel = defineRelation({ ...def, columns: [...def.columns, ...TAIL] });
  for (const c of rel.columns) if (c.cell !== undefined && !CELLS.has(c.cell)) throw new Error(`${rel.name}.${c.name}: unknown cell ${c.cell}`);
  return streamedRelation(rel, where);
}

export const EMPRESAS = monthRelation({ zips: tenOf('Empresas'), member: /\.EMPRECSV$/i }, {
  name: 'cnpj_empresas',
  columns: [
    field(0, 'cnpj_basico', 'doc'),
    field(1, 'razao_social', 'name'),
    ...fields(2, 'code', 'natureza_juridica', 'qualificacao_responsavel'),
    field(4, 'capital_social', 'money'),
    field(5, 'porte', 'code2'),
    field(6, 'ente_federativo_responsavel', 'text'),
    // The owner's CPF that MEI/EI legal names end with, cut from razao_social and kept masked
    // (every 'name' field is cleaned the same way; only the legal name keeps what it cut).
    derived('cpf_titular_mascarado'),
  ],
  indexes: { btree: ['cnpj_basico'], trigram: [{ name: 'razao_trgm', on: 'etl.cnpj_busca(razao_social)' }] },
});

export const ESTABELECIMENTOS = monthRelation({ zips: tenOf('Estabelecimentos'), member: /\.ESTABELE$/i }, {
  name: 'cnpj_estabelecimentos',
  columns: [
    ...fields(0, 'doc', 'cnpj_basico', 'cnpj_ordem', 'cnpj_dv'),
    field(3, 'identificador_matriz_filial', 'code'),
    field(4, 'nome_fantasia', 'name'),
    field(5, 'situacao_cadastral', 'code2'),
    field(6, 'data_situacao_cadastral', 'date'),
    field(7, 'motivo_situacao_cadastral', 'code'),
    field(8, 'nome_cidade_exterior', 'text'),
    field(9, 'pais', 'code'),
    field(10, 'data_inicio_atividade', 'date'),
    field(11, 'cnae_fiscal_principal', 'code'),
    field(12, 'cnae_fiscal_secundaria', 'list'),
    ...fields(13, 'text', 'tipo_logradouro', 'logradouro', 'numero', 'complemento', 'bairro'),
    field(18, 'cep', 'cep'),
    field(19, 'uf', 'uf'),
    field(20, 'municipio', 'tom'),
    ...fields(21, 'text', 'ddd_1', 'telefone_1', 'ddd_2', 'telefone_2', 'ddd_fax', 'fax', 'correio_eletronico', 'situacao_especial'),
    field(29, 'data_situacao_especial', 'date'),
    // The full 14-character CNPJ (basico + ordem + dv), alphanumeric ones as they are.
    derived('cnpj'),
  ],
  indexes: { btree: ['cnpj', 'cnpj_basico'], trigram: [{ name: 'fantasia_trgm', on: 'etl.cnpj_busca(nome_fantasia)' }] },
});

export const SOCIOS = monthRelation({ zips: tenOf('Socios'), member: /\.SOCIOCSV$/i }, {
  name: 'cnpj_socios',
  columns: [
    field(0, 'cnpj_basico', 'doc'),
    field(1, 'identificador_de_socio', 'code'),
    field(2, 'nome_socio', 'name'),
    field(3, 'cnpj_cpf_do_socio', 'doc'),
    field(4, 'qualificacao_socio', 'code'),
    field(5, 'data_entrada_sociedade', 'date'),
    field(6, 'pais', 'code'),
    field(7, 'representante_legal', 'doc'),
    field(8, 'nome_do_representante', 'name'),
    field(9, 'qualificacao_representante_legal', 'code'),
    field(10, 'faixa_etaria', 'int'),
    // A masked CPF is not unique inside a company (SOURCES §10.7): partners are keyed by a
    // hash of what identifies them; cpf_miolo: the six visible CPF digits (/socio/cpf).
    derived('socio_chave'),
    derived('cpf_miolo'),
  ],
  indexes: { btree: ['cnpj_basico', 'cpf_miolo', { name: 'documento', columns: ['cnpj_cpf_do_socio'] }] },
});

export const SIMPLES = monthRelation({ zips: ['Simples'], member: /\.SIMPLES\.CSV(\..*)?$/i }, {
  name: 'cnpj_simples',
  columns: [
    field(0, 'cnpj_basico', 'doc'),
    field(1, 'opcao_pelo_simples', 'code'),
    ...fields(2, 'date', 'data_opcao_simples', 'data_exclusao_simples'),
    field(4, 'opcao_mei', 'code'),
    ...fields(5, 'date', 'data_opcao_mei', 'data_exclusao_mei'),
  ],
  indexes: { btree: ['cnpj_basico'] },
});

const lookup = (name: string, zip: string, member: RegExp, more: ColumnDef[] = []): CnpjRelation =>
  monthRelation({ zips: [zip], member }, { name, columns: [field(0, 'codigo', 'code'), field(1, 'descricao', 'text'), ...more], indexes: { btree: ['codigo'] } });

/** uf and codigo_ibge: the TOM → IBGE crosswalk (by normalised name + the establishments' UF), written after the families (crosswalk.ts). */
export const MUNICIPIOS = lookup('cnpj_municipios', 'Municipios', /\.MUNICCSV$/i, [derived('uf'), derived('codigo_ibge')]);

/** The code tables, loaded before the families (their facts count orphan codes against them). */
export const LOOKUPS: CnpjRelation[] = [
  lookup('cnpj_cnaes', 'Cnaes', /\.CNAECSV$/i),
  lookup('cnpj_motivos', 'Motivos', /\.MOTICSV$/i),
  MUNICIPIOS,
  lookup('cnpj_naturezas', 'Naturezas', /\.NATJUCSV$/i),
  lookup('cnpj_paises', 'Paises', /\.PAISCSV$/i),
  lookup('cnpj_qualificacoes', 'Qualificacoes', /\.QUALSCSV$/i),
];

/** The big families, loaded in parallel COPY streams (the lookups first, one after another). */
export const FAMILIES: CnpjRelation[] = [ESTABELECIMENTOS, EMPRESAS, SOCIOS, SIMPLES];
export const RELATIONS: CnpjRelation[] = [...FAMILIES, ...LOOKUPS];

/** Every zip of a complete month (37): a month missing one is not loaded (SOURCES §10.7). */
export const MONTH_ZIPS: string[] = RELATIONS.flatMap((r) => r.zips);
