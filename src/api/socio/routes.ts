// GET /v1/socio/cnpj/{cnpj}, GET /v1/socio/cpf/{cpf}, GET /v1/socio/search (contract §3–4).
// Every answer reads one receita-cnpj snapshot: the published month, or with `as_of` the
// month current on that date among the kept ones.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { isValidCnpj, isValidCpf, normalizeDocument } from '../../documents.ts';
import { AgroError } from '../../errors.ts';
import { formatCnpj } from '../../privacy.ts';
import type { ApiDeps } from '../deps.ts';
import { UFS } from '../deps.ts';
import { assertKept, readKept } from '../kept.ts';
import { isoSeconds } from '../schemas.ts';
import { CnpjSchema, CpfSchema, SearchSchema, SITUACOES } from './schemas.ts';
import { buscaIn, cnpjSnapshots, companyAnswer, empresaIn, vinculosIn, type CnpjSnapshot, type SocioRow } from './sql.ts';
import type pg from 'pg';

/** The error of a read for which no month is kept: none published, or none as of `asOf` (naming what is kept). */
function noMonth(all: CnpjSnapshot[], asOf: string | null, gone?: CnpjSnapshot): AgroError {
  if (!asOf) return new AgroError('upstream_unavailable', 'no published Receita CNPJ month');
  const kept = [...new Set(all.filter((s) => s.legivel).map((s) => s.as_of))];
  // The month of that date was dropped: an older kept month would be another date's data.
  const why = gone ? `the Receita CNPJ month current on ${asOf} (snapshot ${gone.snapshot_id}, as of ${gone.as_of}) was dropped by retention` : `no Receita CNPJ month as of ${asOf} or earlier is kept`;
  return new AgroError('not_found', `${why}; available as-of dates: ${kept.length ? kept.join(', ') : 'none'}`);
}

/** The receita-cnpj snapshot of a read: the published month, or the month current on `asOf` while it is kept. */
export async function cnpjSnapshotFor(db: pg.Pool, asOf: string | null): Promise<CnpjSnapshot> {
  const all = await cnpjSnapshots(db);
  const hit = asOf ? all.find((s) => s.as_of <= asOf) : all.find((s) => s.is_current && s.legivel);
  if (!hit || !hit.legivel) throw noMonth(all, asOf, hit);
  return hit;
}

/**
 * Receita's legal name of a CNPJ in a month the caller resolved (with the rest of its
 * snapshots), or null when no month is kept or the CNPJ is not in it: the `titular` of
 * /car/by-document.
 */
export async function razaoSocialOf(db: pg.Pool, month: { snapshot_id: number } | null, cnpj: string): Promise<{ razao_social: string; snapshot_id: number } | null> {
  if (!month) return null;
  const e = await empresaIn(db, month.snapshot_id, cnpj);
  return e?.razao_social ? { razao_social: e.razao_social, snapshot_id: month.snapshot_id } : null;
}

/** The stored form of a valid CNPJ (punctuation optional, alphanumeric allowed), or a 400 naming `param`. */
export function parseCnpj(text: string, param = 'cnpj'): string {
  const d = normalizeDocument(text);
  if (!isValidCnpj(d)) throw new AgroError('invalid_request', `${param}: not a valid CNPJ (14 characters, [0-9A-Z] root and order, numeric check digits): wrong length or check digits`);
  return d;
}

// A partner CPF as Receita masks it: ***NNNNNN** (or already in our display form).
const RECEITA_MASKED = /^\*{3}\.?([0-9]{3})\.?([0-9]{3})-?\*{2}$/;

/** The six visible digits of a CPF path value: a valid CPF, or one masked as Receita does. */
function cpfMiolo(text: string): string {
  const t = text.trim();
  const m = RECEITA_MASKED.exec(t);
  if (m) return m[1] + m[2];
  const d = normalizeDocument(t);
  if (!isValidCpf(d)) throw new AgroError('invalid_request', 'cpf: not a valid CPF (11 digits with check digits, or masked as ***.NNN.NNN-**)');
  return d.slice(3, 9);
}

const displayMiolo = (miolo: string) => `***.${miolo.slice(0, 3)}.${miolo.slice(3)}-**`;

/** A partner document for display: person CPFs masked whatever form they arrive in, CNPJs formatted. */
function partnerDocument(r: Pick<SocioRow, 'identificador_de_socio' | 'cnpj_cpf_do_socio'>): { cpf: string | null; cnpj: string | null } {
  const doc = r.cnpj_cpf_do_socio?.trim() ?? '';
  if (r.identificador_de_socio === '1') return { cpf: null, cnpj: /^[0-9A-Z]{14}$/.test(doc) ? formatCnpj(doc) : null };
  if (r.identificador_de_socio !== '2') return { cpf: null, cnpj: null };
  const m = RECEITA_MASKED.exec(doc);
  if (m) return { cpf: displayMiolo(m[1] + m[2]), cnpj: null };
  const digits = doc.replace(/\D/g, '');
  return { cpf: digits.length === 11 ? displayMiolo(digits.slice(3, 9)) : null, cnpj: null };
}

const TIPO_SOCIO: Record<string, 'pessoa_juridica' | 'pessoa_fisica' | 'estrangeiro'> = { '1': 'pessoa_juridica', '2': 'pessoa_fisica', '3': 'estrangeiro' };

export const situacaoOf = (code: string | null) => (code === null ? null : (SITUACOES as Record<string, string>)[code] ?? code);
const SITUACAO_CODE = Object.fromEntries(Object.entries(SITUACOES).map(([k, v]) => [v, k])) as Record<string, string>;

/** '0115600' → '0115-6/00' (a code of another shape is kept as published). */
export const formatCnae = (code: string) => (/^[0-9]{7}$/.test(code) ? `${code.slice(0, 4)}-${code.slice(4, 5)}/${code.slice(5)}` : code);
const cnaeOf = (code: string | null, descricao: string | null) => (code ? { codigo: formatCnae(code), descricao } : null);
const withCode = (code: string | null, descricao: string | null) => (code === null ? null : descricao ? `${code} - ${descricao}` : code);

/** Lower case, accents and punctuation removed, single spaces (the `nome` narrowing). */
const foldName = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase().replace(/[^a-z0-9]+/g, ' ').trim();

const provenance = (s: CnpjSnapshot) => ({
  consultado_em: isoSeconds(), fonte: `Receita Federal CNPJ ${s.as_of.slice(0, 7)}`, snapshot_id: s.snapshot_id, as_of: s.as_of,
});

export function socioRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get('/socio/cnpj/:cnpj', { schema: CnpjSchema }, async (req) => {
      const cnpj = parseCnpj(req.params.cnpj);
      const pool = deps.dataPool(req); // test keys read the sandbox
      const asOf = req.query.as_of ?? null;
      const answer = await companyAnswer(pool, asOf, cnpj);
      // No such month: the error names what is kept (a second read, on the error path only;
      // a month published meanwhile does not turn it into "not in that month").
      if (!answer) throw noMonth(await cnpjSnapshots(pool), asOf);
      const { snapshot: snap, empresa: e } = answer;
      if (!snap.legivel) throw noMonth(await cnpjSnapshots(pool), asOf, snap);
      if (!e) {
        await assertKept(pool, [snap.snapshot_id]); // not there, or the month dropped under the read
        throw new AgroError('not_found', `CNPJ ${formatCnpj(cnpj)} is not in the Receita month ${snap.as_of.slice(0, 7)} (snapshot ${snap.snapshot_id})`);
      }
      const qsa = e.qsa.map((p) => ({
        nome: p.nome_socio, tipo: TIPO_SOCIO[p.identificador_de_socio ?? ''] ?? null, ...partnerDocument(p),
        qualificacao: p.qualificacao_descricao ?? p.qualificacao_socio, participacao: null, data_entrada: p.data_entrada_sociedade,
      }));
      return {
        cnpj: formatCnpj(e.cnpj), razao_social: e.razao_social, nome_fantasia: e.nome_fantasia, situacao: situacaoOf(e.situacao_cadastral),
        data_abertura: e.data_inicio_atividade, capital_social: e.capital_social, natureza_juridica: withCode(e.natureza_juridica, e.natureza_descricao),
        cnae_principal: cnaeOf(e.cnae_fiscal_principal, e.cnae_descricao), matriz: e.identificador_matriz_filial === '1', qsa,
        endereco: { municipio: e.municipio_nome ?? e.municipio, codigo_municipio_ibge: e.codigo_municipio_ibge, uf: e.uf, cep: e.cep },
        ...provenance(snap),
      };
    });

    app.get('/socio/cpf/:cpf', { schema: CpfSchema }, async (req) => {
      const miolo = cpfMiolo(req.params.cpf);
      const nome = req.query.nome === undefined ? null : foldName(req.query.nome);
      if (nome === '') throw new AgroError('invalid_request', 'nome: must contain letters or digits');
      const pool = deps.dataPool(req);
      const snap = await cnpjSnapshotFor(pool, req.query.as_of ?? null);
      let rows = await readKept(pool, [snap.snapshot_id], () => vinculosIn(pool, snap.snapshot_id, miolo), (r) => r.length === 0);
      if (nome) {
        const wanted = nome.split(' ');
        rows = rows.filter((r) => {
          const words = new Set(foldName(r.nome_socio ?? '').split(' '));
          return wanted.every((w) => words.has(w));
        });
      }
      const names = new Set(rows.map((r) => r.nome_socio));
      const vinculos = rows.map((r) => ({
        cnpj: r.cnpj ? formatCnpj(r.cnpj) : null, razao_social: r.razao_social, qualificacao: r.qualificacao_descricao ?? r.qualificacao_socio,
        participacao: null, situacao_pj: situacaoOf(r.situacao_cadastral), nome: r.nome_socio,
      }));
      return {
        cpf_mascarado: displayMiolo(miolo), nome: names.size === 1 ? [...names][0] : null, vinculos, total: vinculos.length, ...provenance(snap),
      };
    });

    app.get('/socio/search', { schema: SearchSchema }, async (req) => {
      const q = req.query;
      const text = q.q.replace(/\s+/g, ' ').trim();
      if (text.includes('\u0000')) throw new AgroError('invalid_request', 'q: must not contain NUL characters');
      if ([...text].length < 3) throw new AgroError('invalid_request', 'q: must have at least 3 characters besides blanks');
      const uf = q.uf?.toUpperCase() ?? null;
      if (uf && uf !== 'EX' && !(UFS as readonly string[]).includes(uf)) throw new AgroError('invalid_request', `uf: "${uf}" is not a Brazilian state (or EX)`);
      const pool = deps.dataPool(req);
      const snap = await cnpjSnapshotFor(pool, q.as_of ?? null);
      const rows = await readKept(pool, [snap.snapshot_id], () => buscaIn(pool, snap.snapshot_id, {
        q: text, uf, situacao: q.situacao ? SITUACAO_CODE[q.situacao] : null, cnae: q.cnae ? q.cnae.replace(/\D/g, '') : null, limit: q.limit,
      }), (r) => r.length === 0);
      const results = rows.map((r) => ({
        cnpj: formatCnpj(r.cnpj), razao_social: r.razao_social, nome_fantasia: r.nome_fantasia, situacao: situacaoOf(r.situacao_cadastral),
        uf: r.uf, municipio: r.municipio_nome, cnae_principal: cnaeOf(r.cnae_fiscal_principal, r.cnae_descricao), score: Math.round(r.score * 1e4) / 1e4,
      }));
      return { results, count: results.length, ...provenance(snap) };
    });
  };
}
