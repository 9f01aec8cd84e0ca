// receita-cnpj's own facts: the report section `cnpj` (in Portuguese, as the API's), the gate
// rules of the month (a month that arrives emptied is blocked) and the notes it adds.
import type { SnapshotRow } from '../../src/etl/catalog.ts';
import { addCounts, type GateFailure, type QualityFacts } from '../../src/etl/quality.ts';
import type { RelationRead } from '../../src/etl/shape-stream.ts';
import type { CsvSinkStats } from '../../src/etl/zip-csv-stream.ts';
import type { CompanyFacts, EstablishmentFacts, PartnerFacts } from './queries.ts';
import type { DatesBound } from './reference-date.ts';
import type { CnpjRelation } from './relations.ts';
import type { TransformCounts } from './transform.ts';

/** Gate thresholds of this dataset (contract §2: a month that arrives emptied is blocked). */
export const CNPJ_GATE = {
  /** Largest drop of a family's row count against the previous month. */
  maxFamilyDrop: 0.2,
  /** Largest drop of partner rows per company against the previous month. */
  maxPartnersPerCompanyDrop: 0.2,
  /** Largest share of companies without a legal name / partners without a name. */
  maxEmptyNameShare: 0.01,
};

export interface FamilyFacts {
  /** Each zip, the members read from it and its well-formed records. */
  arquivos: { arquivo: string; membros: string[]; linhas: number }[];
  linhas: number;
  malformadas: number;
  amostras_malformadas: CsvSinkStats['malformedSamples'];
  aspas_soltas: number;
  bytes: number;
}

/** Pipeline-specific facts (report JSON `cnpj`). */
export interface CnpjFacts {
  mes: string;
  /** The last plausible date of the month's records and where it came from (its member names' reference date, else the month's last day). */
  limite_datas: DatesBound;
  familias: Record<string, FamilyFacts>;
  contagens: Record<string, number>;
  anterior: { snapshot_id: number; contagens: Record<string, number> } | null;
  socios_por_empresa: number | null;
  orfaos: Record<string, { linhas: number; codigos: string[] }>;
  capital_sentinela: Record<string, number>;
  cep_sem_zero_inicial: number;
  cep_invalido: number;
  /** Codes that lost their leading zeros (situacao_cadastral, porte: one digit; municipio: a TOM code of 1–3 digits): left-padded, per column. */
  codigo_sem_zero_inicial: Record<string, number>;
  /** Establishments whose uf was written in lower case: upper-cased. */
  uf_em_minusculas: number;
  cnpj_alfanumerico: number;
  cnpj_dv_invalido: number;
  cpf_no_nome_removido: number;
  /** CPF-looking runs cut or masked in served name fields, per column (legal names' trailing CPFs included). */
  cpf_em_nomes: Record<string, number>;
  socios_cpf_mascarado: number;
  chave_socio_repetida: number;
  cnpj_basico_repetido: number;
  /** Company and partner rows whose cnpj_basico is not 8 characters (leading zeros lost, say): kept as written, they match nothing (absent: none). */
  cnpj_basico_invalido?: { empresas: number; socios: number };
  razao_social_vazia: number;
  nome_socio_vazio: number;
  /** Establishments whose situacao_cadastral is none of 01, 02, 03, 04, 05, 08. */
  situacao_desconhecida: number;
  municipios: { ibge_carregado: boolean; codigos: number; casados: number; sem_par: number; sem_uf: number; exemplos_sem_par: string[] };
  qsa_alteradas: number | null;
}

/** The dataset's own gate rules (contract §2): emptied names or partner lists block the month. */
export function gateFailures(c: CnpjFacts): GateFailure[] {
  const out: GateFailure[] = [];
  const g = CNPJ_GATE;
  const k = c.contagens;
  if (k.empresas > 0 && c.razao_social_vazia / k.empresas > g.maxEmptyNameShare) {
    out.push({ rule: 'cnpj_empty_names', message: `${c.razao_social_vazia} of ${k.empresas} companies have no razao_social`, value: c.razao_social_vazia / k.empresas, threshold: g.maxEmptyNameShare });
  }
  if (k.socios > 0 && c.nome_socio_vazio / k.socios > g.maxEmptyNameShare) {
    out.push({ rule: 'cnpj_empty_partner_names', message: `${c.nome_socio_vazio} of ${k.socios} partners have no nome_socio`, value: c.nome_socio_vazio / k.socios, threshold: g.maxEmptyNameShare });
  }
  for (const fam of ['empresas', 'estabelecimentos', 'socios', 'simples']) {
    if (k[fam] === 0) out.push({ rule: 'cnpj_empty_file', message: `no ${fam} rows in the month` });
  }
  const prev = c.anterior?.contagens;
  if (prev) {
    for (const fam of ['empresas', 'estabelecimentos', 'socios', 'simples']) {
      if (!prev[fam] || !k[fam]) continue;
      const drop = (prev[fam] - k[fam]) / prev[fam];
      if (drop > g.maxFamilyDrop) out.push({ rule: 'cnpj_family_drop', message: `${fam}: ${prev[fam]} → ${k[fam]} rows (−${(drop * 100).toFixed(1)} %) against snapshot ${c.anterior!.snapshot_id}`, value: drop, threshold: g.maxFamilyDrop });
    }
    if (prev.empresas && prev.socios && k.empresas) {
      const before = prev.socios / prev.empresas;
      const now = k.socios / k.empresas;
      const drop = before ? (before - now) / before : 0;
      if (drop > g.maxPartnersPerCompanyDrop) {
        out.push({ rule: 'cnpj_partners_drop', message: `partner rows per company fell from ${before.toFixed(3)} to ${now.toFixed(3)} (−${(drop * 100).toFixed(1)} %) against snapshot ${c.anterior!.snapshot_id}`, value: drop, threshold: g.maxPartnersPerCompanyDrop });
      }
    }
  }
  return out;
}

/** The month's notes, in the report's order. */
export function cnpjNotes(facts: QualityFacts, c: CnpjFacts): void {
  const n = facts.notes;
  n.push(`month ${c.mes}: ${c.contagens.empresas} companies, ${c.contagens.estabelecimentos} establishments, ${c.contagens.socios} partners, ${c.contagens.simples} Simples rows`);
  const b = c.limite_datas;
  const refused = b.recusadas.length ? ` (${b.recusadas.join(', ')} refused)` : '';
  if (b.origem === 'fim_do_mes') n.push(`no member name gives a reference date plausible for month ${c.mes}${refused}: dates are bounded by the month's last day ${b.data}`);
  else if (refused) n.push(`reference dates of member names not plausible for month ${c.mes}${refused}: the bound is ${b.data}`);
  for (const [fam, f] of Object.entries(c.familias)) {
    if (f.malformadas) n.push(`${fam}: ${f.malformadas} malformed rows (wrong field count) rejected, e.g. ${f.amostras_malformadas.slice(0, 5).map((s) => `${s.member} record ${s.record} (${s.fields} fields)`).join(', ')}`);
    if (f.aspas_soltas) n.push(`${fam}: ${f.aspas_soltas} quotes inside quoted fields kept as text`);
  }
  for (const [k, o] of Object.entries(c.orfaos)) if (o.linhas) n.push(`orphan ${k} codes: ${o.linhas} rows (${o.codigos.join(', ')}), kept`);
  const sent = Object.entries(c.capital_sentinela);
  if (sent.length) n.push(`sentinel capital_social values: ${sent.map(([v, k]) => `${v} ×${k}`).join(', ')}`);
  if (c.cep_sem_zero_inicial) n.push(`${c.cep_sem_zero_inicial} CEPs had lost their leading zero: left-padded, source text kept in extra`);
  const padded = Object.entries(c.codigo_sem_zero_inicial).sort(([a], [b]) => a.localeCompare(b));
  if (padded.length) n.push(`codes that lost their leading zeros, left-padded (to 2: '2' is '02'; TOM municipality codes to 4: '643' is '0643'): ${padded.map(([k, v]) => `${k} ×${v}`).join(', ')}`);
  if (c.uf_em_minusculas) n.push(`${c.uf_em_minusculas} establishments' uf written in lower case: upper-cased ('sp' is SP)`);
  if (c.cnpj_dv_invalido) n.push(`${c.cnpj_dv_invalido} establishments whose CNPJ check digits do not verify: kept`);
  if (c.situacao_desconhecida) n.push(`${c.situacao_desconhecida} establishments with a situacao_cadastral outside 01/02/03/04/05/08: kept`);
  if (c.cnpj_alfanumerico) n.push(`${c.cnpj_alfanumerico} alphanumeric CNPJs`);
  if (c.cpf_no_nome_removido) n.push(`${c.cpf_no_nome_removido} legal names ended with the owner's CPF: cut from razao_social, kept masked in cpf_titular_mascarado`);
  const inNames = Object.entries(c.cpf_em_nomes);
  if (inNames.length) n.push(`CPF-looking numbers in served names: ${inNames.map(([k, v]) => `${k} ×${v}`).join(', ')} (a trailing one cut, others masked as ***.NNN.NNN-**)`);
  if (c.chave_socio_repetida) n.push(`${c.chave_socio_repetida} partner rows repeat another row of the same company exactly (same partner key): kept`);
  if (c.cnpj_basico_repetido) n.push(`${c.cnpj_basico_repetido} company rows repeat a cnpj_basico: kept`);
  const bad = c.cnpj_basico_invalido;
  if (bad) n.push(`cnpj_basico not 8 characters (leading zeros lost?), kept as written, matching no company or establishment: ${bad.empresas} company rows, ${bad.socios} partner rows`);
  const m = c.municipios;
  if (!m.ibge_carregado) n.push(`ibge-municipios is not loaded: municipalities keep Receita's TOM code, no IBGE code (${m.codigos} codes)`);
  else n.push(`municipalities: ${m.casados} of ${m.codigos} TOM codes matched to IBGE by name + UF, ${m.sem_par} unmatched${m.exemplos_sem_par.length ? ` (${m.exemplos_sem_par.slice(0, 10).join('; ')})` : ''}, ${m.sem_uf} not used by any establishment`);
  if (c.qsa_alteradas !== null) n.push(`${c.qsa_alteradas} companies changed their partner list against snapshot ${c.anterior?.snapshot_id}`);
}

/** What the month's facts are made of: the engine's read of each relation, the transforms' counts, each family table's facts, the crosswalk's, the month before. */
export interface MonthFactsInput {
  asOf: string;
  relations: CnpjRelation[];
  read: Record<string, RelationRead>;
  counts: TransformCounts;
  tables: TableFacts;
  municipios: CnpjFacts['municipios'];
  previous: SnapshotRow | null;
  datesBound: DatesBound;
}

/** Each family table's facts (queries.ts), queried right after its indexes. */
export interface TableFacts {
  cnpj_empresas: CompanyFacts;
  cnpj_estabelecimentos: EstablishmentFacts;
  cnpj_socios: PartnerFacts;
}

/** A relation's key in the report (`cnpj_socios` → `socios`). */
export const familyKey = (rel: CnpjRelation): string => rel.name.replace(/^cnpj_/, '');

/** The report section `cnpj` (the facts stage). */
export function monthFacts(m: MonthFactsInput): CnpjFacts {
  const { cnpj_empresas: emp, cnpj_estabelecimentos: est, cnpj_socios: soc } = m.tables;
  const counts = m.counts;
  const contagens: Record<string, number> = {};
  for (const rel of m.relations) contagens[familyKey(rel)] = m.read[rel.name].records;
  contagens.empresas_com_socios = soc.empresas_com_socios;
  const prevCounts = (m.previous?.quality as { facts?: { cnpj?: CnpjFacts } } | null)?.facts?.cnpj?.contagens ?? null;
  return {
    mes: m.asOf.slice(0, 7),
    limite_datas: m.datesBound,
    familias: Object.fromEntries(m.relations.map((rel) => {
      const s = m.read[rel.name];
      return [familyKey(rel), {
        arquivos: s.files.map((f) => ({ arquivo: f.file, membros: f.members, linhas: f.records })),
        linhas: s.records, malformadas: s.malformed, amostras_malformadas: s.malformedSamples, aspas_soltas: s.strayQuotes, bytes: s.bytes,
      }];
    })),
    contagens,
    anterior: m.previous && prevCounts ? { snapshot_id: m.previous.snapshot_id, contagens: prevCounts } : null,
    socios_por_empresa: contagens.empresas ? contagens.socios / contagens.empresas : null,
    orfaos: {
      motivo: { linhas: est.motivo_orfao, codigos: est.motivo_orfao_codigos },
      pais_estabelecimento: { linhas: est.pais_orfao, codigos: est.pais_orfao_codigos },
      cnae_principal: { linhas: est.cnae_orfao, codigos: est.cnae_orfao_codigos },
      natureza_juridica: { linhas: emp.natureza_orfa, codigos: emp.natureza_orfa_codigos },
      qualificacao_responsavel: { linhas: emp.qualificacao_orfa, codigos: emp.qualificacao_orfa_codigos },
      qualificacao_socio: { linhas: soc.qualificacao_orfa, codigos: soc.qualificacao_orfa_codigos },
      pais_socio: { linhas: soc.pais_orfao, codigos: soc.pais_orfao_codigos },
    },
    capital_sentinela: counts.capitalSentinel,
    cep_sem_zero_inicial: counts.cepPadded,
    cep_invalido: counts.cepInvalid,
    codigo_sem_zero_inicial: counts.codesPadded,
    uf_em_minusculas: counts.ufLowerCase,
    cnpj_alfanumerico: counts.cnpjAlphanumeric,
    cnpj_dv_invalido: counts.cnpjBadCheckDigits,
    cpf_no_nome_removido: counts.cpfInName,
    cpf_em_nomes: counts.cpfInNames,
    socios_cpf_mascarado: counts.partnersMaskedCpf,
    chave_socio_repetida: soc.chave_repetida,
    cnpj_basico_repetido: emp.cnpj_basico_repetido,
    ...(emp.cnpj_basico_invalido || soc.cnpj_basico_invalido ? { cnpj_basico_invalido: { empresas: emp.cnpj_basico_invalido, socios: soc.cnpj_basico_invalido } } : {}),
    razao_social_vazia: emp.razao_vazia,
    nome_socio_vazio: soc.nome_vazio,
    situacao_desconhecida: est.situacao_desconhecida,
    municipios: m.municipios,
    qsa_alteradas: null,
  };
}

const mergeCounts = (into: Record<string, number>, from: Record<string, number>, prefix = '') => {
  for (const [k, v] of Object.entries(from)) into[prefix + k] = (into[prefix + k] ?? 0) + v;
};

/** The transforms' counts in the report's common sections (empty values, date placeholders, values that did not parse). */
export function addTransformCounts(facts: QualityFacts, counts: TransformCounts): void {
  facts.fields.empty = counts.empty;
  mergeCounts(facts.dates.placeholders, counts.datePlaceholders);
  mergeCounts(facts.dates.unparseable, counts.dateUnparsed);
  addCounts(facts, 'implausible', counts.dateImplausible);
  addCounts(facts, 'unparsed', counts.unparsed);
}
