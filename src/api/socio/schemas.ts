// Schemas of the socio routes (reference "Company record", "Partner links record",
// GET /socio/search; contract §3–4).
import { Type } from 'typebox';
import { LGPD_BASES } from '../car/schemas.ts';
import { DateString, ErrorResponses, Nullable, Timestamp } from '../schemas.ts';

export const SITUACOES = { '01': 'nula', '02': 'ativa', '03': 'suspensa', '04': 'inapta', '08': 'baixada' } as const;

const AsOf = Type.Optional(Type.String({ format: 'date', description: 'answer from the Receita month current on that date (greatest month ≤ date among kept snapshots)' }));
const Situacao = Nullable(Type.String({ description: `company status: ${Object.entries(SITUACOES).map(([k, v]) => `${k}→${v}`).join(', ')}; an unknown Receita code is returned as published` }));
const Provenance = {
  consultado_em: Timestamp,
  fonte: Type.String({ description: 'source and month, e.g. "Receita Federal CNPJ 2026-10"' }),
  snapshot_id: Type.Integer(),
  as_of: DateString,
};
const Cnae = Nullable(Type.Object({
  codigo: Type.String({ pattern: '^[0-9]{4}-[0-9]/[0-9]{2}$', description: 'NNNN-N/NN' }),
  descricao: Nullable(Type.String({ description: 'null when the code is not in the month\'s CNAE table' })),
}));

export const QsaItem = Type.Object({
  nome: Nullable(Type.String()),
  tipo: Nullable(Type.String({ enum: ['pessoa_fisica', 'pessoa_juridica', 'estrangeiro'], description: "Receita's identificador_de_socio 2, 1, 3" })),
  cpf: Nullable(Type.String({ description: 'a person partner\'s CPF, masked (***.NNN.NNN-**) as Receita publishes it' })),
  cnpj: Nullable(Type.String({ description: 'a company partner\'s CNPJ, formatted' })),
  qualificacao: Nullable(Type.String({ description: 'qualification description (the code when the month\'s table lacks it)' })),
  participacao: Type.Null({ description: 'share of the capital: Receita does not publish it' }),
  data_entrada: Nullable(DateString),
});

export const CompanyRecord = Type.Object({
  cnpj: Type.String({ description: 'formatted, 12.345.678/0001-90 (alphanumeric root and order allowed)' }),
  razao_social: Nullable(Type.String()),
  nome_fantasia: Nullable(Type.String()),
  situacao: Situacao,
  data_abertura: Nullable(DateString),
  capital_social: Nullable(Type.Number()),
  natureza_juridica: Nullable(Type.String({ description: '"<code> - <description>" (the code alone when the month\'s table lacks it)' })),
  cnae_principal: Cnae,
  matriz: Type.Boolean({ description: 'head office (identificador_matriz_filial 1)' }),
  qsa: Type.Array(QsaItem),
  endereco: Type.Object({
    municipio: Nullable(Type.String({ description: "Receita's municipality name" })),
    codigo_municipio_ibge: Nullable(Type.String({ description: 'IBGE code from the month\'s crosswalk (null when unmatched)' })),
    uf: Nullable(Type.String()),
    cep: Nullable(Type.String()),
  }),
  ...Provenance,
});

const CnpjParam = Type.String({ maxLength: 32, description: 'CNPJ, masked (12.345.678/0001-90) or bare, alphanumeric root and order accepted' });

export const CnpjSchema = {
  summary: 'Company record with its partner list (QSA)',
  tags: ['socio'],
  params: Type.Object({ cnpj: CnpjParam }),
  querystring: Type.Object({ as_of: AsOf }),
  response: { 200: CompanyRecord, ...ErrorResponses },
};

export const Vinculo = Type.Object({
  cnpj: Nullable(Type.String({ description: "the company's head office (else first establishment), formatted" })),
  razao_social: Nullable(Type.String()),
  qualificacao: Nullable(Type.String()),
  participacao: Type.Null({ description: 'not published by Receita' }),
  situacao_pj: Situacao,
  nome: Nullable(Type.String({ description: 'the partner name on this link' })),
});

export const CpfSchema = {
  summary: 'Companies in whose partner list a CPF appears',
  tags: ['socio'],
  params: Type.Object({ cpf: Type.String({ maxLength: 32, description: 'CPF (11 digits, check digits verified) or as Receita masks it (***.456.789-**); matched on the six visible digits' }) }),
  querystring: Type.Object({
    nome: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'narrows to partners whose name has all these words (accent- and case-insensitive)' })),
    as_of: AsOf,
  }),
  headers: Type.Object({
    'x-lgpd-base-legal': Type.Optional(Type.String({ enum: [...LGPD_BASES], description: 'legal basis (LGPD art. 7)' })),
  }),
  response: {
    200: Type.Object({
      cpf_mascarado: Type.String({ pattern: '^\\*\\*\\*\\.[0-9]{3}\\.[0-9]{3}-\\*\\*$' }),
      nome: Nullable(Type.String({ description: 'the partner name when every link carries the same one, else null' })),
      vinculos: Type.Array(Vinculo),
      total: Type.Integer({ description: 'number of links' }),
      ...Provenance,
    }),
    ...ErrorResponses,
  },
};

export const SearchResult = Type.Object({
  cnpj: Type.String(),
  razao_social: Nullable(Type.String()),
  nome_fantasia: Nullable(Type.String()),
  situacao: Situacao,
  uf: Nullable(Type.String()),
  municipio: Nullable(Type.String()),
  cnae_principal: Cnae,
  score: Type.Number({ minimum: 0, maximum: 1, description: 'trigram word similarity of the query to the better of legal and trade name' }),
});

export const SearchSchema = {
  summary: 'Companies by legal or trade name (accent- and case-insensitive similarity)',
  tags: ['socio'],
  querystring: Type.Object({
    q: Type.String({ minLength: 3, maxLength: 200, description: 'search term, at least 3 characters' }),
    uf: Type.Optional(Type.String({ pattern: '^[A-Za-z]{2}$', description: 'state of the establishment (EX: abroad)' })),
    situacao: Type.Optional(Type.String({ enum: Object.values(SITUACOES) })),
    cnae: Type.Optional(Type.String({ pattern: '^[0-9]{4}-[0-9]/[0-9]{2}$', description: 'main activity, NNNN-N/NN' })),
    limit: Type.Integer({ minimum: 1, maximum: 50, default: 20 }),
    as_of: AsOf,
  }),
  response: {
    200: Type.Object({ results: Type.Array(SearchResult), count: Type.Integer(), ...Provenance }),
    ...ErrorResponses,
  },
};
