// receita-cnpj: the Receita Federal CNPJ month (SOURCES §10; contract §2b, §3), one national
// snapshot per `YYYY-MM` folder (as_of = the month's first day).
//
// What is its own, on the one shape (pipelines/README.md, "a multi-relation CSV month"):
//   relations.ts  each relation declared once (defineRelation): columns in template order,
//                 the record position and conversion of each field (`at`, `cell`), the
//                 derived columns, empty values counted, the indexes (btree, trigram)
//   transform.ts  the streamed conversions (the line builder: record → COPY line)
//   queries.ts    its statements, one typed function each
//   fetch.ts      the share's newest month, 37 zips, resumable, validated, size + SHA-256
//                 (a local folder of months through the one picker; WebDAV listed by PROPFIND)
// The engine's parts it uses: the template check of every declaration before a zip is read
// (checkDeclaredShape), the declared indexes' statements (indexStatements), the facts
// plumbing (emptyFacts, addCounts), as_of resolved by the run (target.asOf).
// load:
//   load      zips are streamed, never unpacked (src/etl/zip-csv-stream.ts): latin1, `;`,
//             quoted, no header, exact field count (other rows are malformed: counted with
//             their record numbers, rejected). Lookups first (small); then one COPY stream per
//             family (establishments, companies, partners, Simples) in parallel, each into
//             a table created in the same transaction (COPY FREEZE). Field rules: transform.ts.
//             Municipalities: Receita's TOM code → IBGE by normalised name + the UF the
//             establishments give it, against serving.ibge_municipios.
//             Each table is indexed right after its own COPY, as declared in relations.ts
//             (btree, trigram on names, the six visible CPF digits of partners), then
//             ANALYZEd: a family that finished early is indexed while the others still load.
//   facts     counts per family against the previous month, orphan codes, empty names,
//             partners per company (each table's facts are queried inside `load`, right after
//             its indexes): a month that lost its names or partner lists is blocked.
//   diff      partner lists against the previous month (derived.cnpj_qsa_changes).
// Publication is the engine's (one transaction: readers see the old month or the new one).
import { finished } from 'node:stream/promises';
import { Writable } from 'node:stream';
import pgCopy from 'pg-copy-streams';
import type pg from 'pg';
import { AgroError } from '../../src/errors.ts';
import * as catalog from '../../src/etl/catalog.ts';
import type { FetchedFile } from '../../src/etl/download.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addCounts, emptyFacts, type GateFailure, type QualityFacts } from '../../src/etl/quality.ts';
import { emptySinkStats, readZipCsv, type CsvSinkStats } from '../../src/etl/zip-csv-stream.ts';
import { tableName, type Sql } from '../../src/sql.ts';
import { indexStatements } from '../../src/etl/load-steps.ts';
import { checkDeclaredShape } from '../../src/etl/sql/shape.ts';
import { fetchMonth, monthOf } from './fetch.ts';
import { EMPRESAS, FAMILIES, LOOKUPS, RELATIONS, type CnpjRelation } from './relations.ts';
import {
  analyze, companyFacts, copyFrozen, createLikeTemplate, establishmentFacts, ibgeMunicipalities, indexMemoryForTransaction, normalisedNames, partnerFacts,
  tableExists, writePartnerListDiff, type CompanyFacts, type EstablishmentFacts, type LookupTables, type PartnerFacts,
} from './queries.ts';
import { copyColumns, emptyCounts, lineBuilder, type TransformCounts } from './transform.ts';
import { copyLine, writeOrWait } from '../../src/etl/copy.ts';

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
  familias: Record<string, FamilyFacts>;
  contagens: Record<string, number>;
  anterior: { snapshot_id: number; contagens: Record<string, number> } | null;
  socios_por_empresa: number | null;
  orfaos: Record<string, { linhas: number; codigos: string[] }>;
  capital_sentinela: Record<string, number>;
  cep_sem_zero_inicial: number;
  cep_invalido: number;
  cnpj_alfanumerico: number;
  cnpj_dv_invalido: number;
  cpf_no_nome_removido: number;
  /** CPF-looking runs cut or masked in served name fields, per column (legal names' trailing CPFs included). */
  cpf_em_nomes: Record<string, number>;
  socios_cpf_mascarado: number;
  chave_socio_repetida: number;
  cnpj_basico_repetido: number;
  razao_social_vazia: number;
  nome_socio_vazio: number;
  /** Establishments whose situacao_cadastral is none of 01, 02, 03, 04, 05, 08. */
  situacao_desconhecida: number;
  municipios: { ibge_carregado: boolean; codigos: number; casados: number; sem_par: number; sem_uf: number; exemplos_sem_par: string[] };
  qsa_alteradas: number | null;
}

const lastDayOfMonth = (asOf: string) => {
  const [y, m] = asOf.split('-').map(Number);
  return new Date(Date.UTC(y, m, 0)).toISOString().slice(0, 10);
};

const zipFile = (files: FetchedFile[], zip: string): FetchedFile => {
  const f = files.find((x) => x.name.toLowerCase() === `${zip.toLowerCase()}.zip`);
  if (!f) throw new AgroError('source_not_found', `${zip}.zip is not in the month`);
  return f;
};

const discard = () => new Writable({ write: (_c, _e, cb) => cb() });

/** Each family's table facts (queries.ts), queried right after its indexes; they join the lookups, loaded first. */
interface TableFacts {
  cnpj_empresas: CompanyFacts;
  cnpj_estabelecimentos: EstablishmentFacts;
  cnpj_socios: PartnerFacts;
}
const FACT_QUERIES: { [R in keyof TableFacts]: (c: pg.ClientBase, target: Sql, l: LookupTables) => Promise<TableFacts[R]> } = {
  cnpj_empresas: companyFacts,
  cnpj_estabelecimentos: establishmentFacts,
  cnpj_socios: partnerFacts,
};
const hasFacts = (name: string): name is keyof TableFacts => name in FACT_QUERIES;

const familyKey = (rel: CnpjRelation) => rel.name.replace(/^cnpj_/, '');

/** Reads the members of `rel` from its zips into `out`; a zip without such a member is malformed. */
async function readRelation(rel: CnpjRelation, files: FetchedFile[], out: Writable, onRecord: (f: string[]) => string, stats: CsvSinkStats, ctx: RunContext, progress: { file: string }): Promise<FamilyFacts['arquivos']> {
  const members: FamilyFacts['arquivos'] = [];
  for (const zip of rel.zips) {
    const file = zipFile(files, zip);
    progress.file = file.name;
    const before = stats.records;
    const names = await readZipCsv(file.path, { pick: (n) => rel.memberSuffix.test(n), fieldCount: rel.fieldCount, onRecord, out, stats, limits: ctx.cfg.zip });
    if (!names.length) throw new AgroError('malformed_source', `${file.name} holds no member named *${rel.memberSuffix.source.replace(/\\/g, '').replace(/\$$/, '')}`);
    members.push({ arquivo: file.name, membros: names, linhas: stats.records - before });
  }
  return members;
}

/** COPY of one relation into a table created in the same transaction (FREEZE: no later rewrite of hint bits). */
async function copyRelation(client: pg.ClientBase, table: Sql, rel: CnpjRelation, feed: (out: Writable) => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await createLikeTemplate(client, table, rel.name);
    const stream = client.query(pgCopy.from(copyFrozen(table, copyColumns(rel))));
    const done = finished(stream);
    done.catch(() => {});
    try {
      await feed(stream);
    } catch (e) {
      stream.destroy(e as Error);
      throw e;
    }
    stream.end();
    await done;
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** A connection is free now (idle, or room to open one): checked and taken without an await between. */
const canBorrow = (pool: pg.Pool): boolean => pool.idleCount > 0 || pool.totalCount < (pool.options.max ?? 10);

/**
 * Families loaded at once: one connection each, leaving room in the pool for the run's lock
 * client, the ledger's writes and the catalogue's statements.
 */
const familySlots = (pool: pg.Pool): number => Math.max(1, Math.min(FAMILIES.length, (pool.options.max ?? 10) - 3));

/**
 * The declared indexes of a loaded relation (the engine's statements: indexStatements), then
 * ANALYZE: built right after its COPY (so a family that finished early is indexed while the
 * others still load), never before the data, each with at least 256 MB to sort in.
 */
async function indexRelation(client: pg.ClientBase, rel: CnpjRelation, table: Sql, ctx: RunContext, timings: Record<string, LoadTimings>): Promise<void> {
  const statements = indexStatements(table, rel.indexes);
  const t0 = Date.now();
  // A table's indexes are built at once, each on its own connection (GIN builds are not
  // parallel in PostgreSQL 15): the last family to finish its COPY is not indexed serially.
  // Only connections the pool has free are borrowed: waiting for one while holding `client`
  // deadlocks a small pool; what is not borrowed runs on `client`, one after the other.
  const conns: pg.ClientBase[] = [client];
  const borrowed: pg.PoolClient[] = [];
  try {
    while (conns.length < statements.length && canBorrow(ctx.pool)) {
      const c = await ctx.pool.connect();
      borrowed.push(c);
      conns.push(c);
    }
    await Promise.all(conns.map(async (c, k) => {
      for (let i = k; i < statements.length; i += conns.length) {
        const ix = statements[i];
        const t1 = Date.now();
        await c.query('BEGIN');
        try {
          await indexMemoryForTransaction(c);
          await c.query(ix.sql);
          await c.query('COMMIT');
        } catch (e) {
          await c.query('ROLLBACK').catch(() => {});
          throw e;
        }
        ((timings[rel.name] ??= {}).indexes ??= {})[ix.name] = Date.now() - t1;
        ctx.log.debug({ table, index: ix.name, ms: Date.now() - t1 }, 'receita-cnpj: index built');
      }
    }));
  } finally {
    for (const c of borrowed) c.release();
  }
  await analyze(client, table);
  (timings[rel.name] ??= {}).index_ms = Date.now() - t0;
}

/** Where a relation's load time went (the load stage's detail): ms since the stage began when its COPY ended, then ms of its indexes (with ANALYZE), each index, its facts query. */
interface LoadTimings {
  copy_done_ms?: number;
  index_ms?: number;
  indexes?: Record<string, number>;
  facts_ms?: number;
}

/** Runs `fn` over `items`, at most `limit` at a time; rejects with the first failure once all have settled. */
async function mapLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}

interface Crosswalk {
  rows: string[];
  facts: CnpjFacts['municipios'];
}

/** TOM → IBGE: the UF most establishments give a TOM code, then normalised name + UF against the IBGE list. */
async function buildCrosswalk(client: pg.ClientBase, lookup: [string, string][], places: Map<string, Map<string, number>>, snapshotId: number): Promise<Crosswalk> {
  const ibge = new Map<string, string>();
  for (const x of await ibgeMunicipalities(client)) ibge.set(`${x.nome}|${x.uf}`, x.geocodigo);
  const loaded = ibge.size > 0;
  const norm = await normalisedNames(client, lookup.map(([, d]) => d));
  const facts: CnpjFacts['municipios'] = { ibge_carregado: loaded, codigos: lookup.length, casados: 0, sem_par: 0, sem_uf: 0, exemplos_sem_par: [] };
  const rows = lookup.map(([codigo, descricao], i) => {
    const ufs = places.get(codigo);
    const uf = ufs ? [...ufs.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0][0] || null : null;
    let geocodigo: string | null = null;
    if (!uf) facts.sem_uf++;
    else if (loaded) {
      geocodigo = ibge.get(`${norm[i]}|${uf}`) ?? null;
      if (geocodigo) facts.casados++;
      else {
        facts.sem_par++;
        if (facts.exemplos_sem_par.length < 20) facts.exemplos_sem_par.push(`${codigo} ${descricao}/${uf}`);
      }
    }
    return copyLine([codigo, descricao, uf, geocodigo, null, snapshotId]);
  });
  return { rows, facts };
}

const mergeCounts = (into: Record<string, number>, from: Record<string, number>, prefix = '') => {
  for (const [k, v] of Object.entries(from)) into[prefix + k] = (into[prefix + k] ?? 0) + v;
};

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const sid = target.snapshotId;
  const asOf = target.asOf;
  const latestDate = lastDayOfMonth(asOf);
  const counts: TransformCounts = emptyCounts();
  const places = new Map<string, Map<string, number>>();
  const onPlace = (uf: string, mun: string) => {
    let m = places.get(mun);
    if (!m) places.set(mun, (m = new Map()));
    m.set(uf, (m.get(uf) ?? 0) + 1);
  };
  const stats = new Map<string, CsvSinkStats>(RELATIONS.map((r) => [r.name, emptySinkStats()]));
  const members = new Map<string, FamilyFacts['arquivos']>();
  const tables = new Map<string, Sql>();
  const progress = new Map<string, { file: string }>(RELATIONS.map((r) => [r.name, { file: '' }]));
  const timings: Record<string, LoadTimings> = {};
  /** Quality facts of each family's table (queries.ts), queried once it is indexed. */
  const tableFacts: Partial<TableFacts> = {};
  const lookupTables = (): LookupTables => ({ naturezas: tables.get('cnpj_naturezas')!, qualificacoes: tables.get('cnpj_qualificacoes')!, motivos: tables.get('cnpj_motivos')!, paises: tables.get('cnpj_paises')!, cnaes: tables.get('cnpj_cnaes')! });
  /** The relation's snapshot table of this run. */
  const tableOf = async (rel: CnpjRelation): Promise<Sql> => {
    const table = tableName(await target.table(rel.name));
    tables.set(rel.name, table);
    return table;
  };
  // A declaration its template does not match fails here, before any zip is read.
  for (const rel of RELATIONS) await checkDeclaredShape(ctx.pool, rel);

  // ---- read: lookups, then the four families in parallel COPY streams
  const started = Date.now();
  const ticker = setInterval(() => {
    const s = (Date.now() - started) / 1000;
    const rows = [...stats.values()].reduce((a, x) => a + x.records, 0);
    const bytes = [...stats.values()].reduce((a, x) => a + x.bytes, 0);
    ctx.log.info({
      rows, bytes, rows_per_s: Math.round(rows / Math.max(s, 0.001)), mb_per_s: +(bytes / 2 ** 20 / Math.max(s, 0.001)).toFixed(1),
      files: Object.fromEntries(FAMILIES.map((r) => [familyKey(r), `${progress.get(r.name)!.file} (${stats.get(r.name)!.records} rows)`])),
    }, 'receita-cnpj: loading');
  }, ctx.cfg.receitaCnpj.progressMs);
  ticker.unref();
  let municipios: CnpjFacts['municipios'];
  try {
    municipios = await ctx.stage('load', async () => {
      const client = await ctx.pool.connect();
      let municipiosLookup: [string, string][] = [];
      try {
        for (const rel of LOOKUPS) {
          if (rel.name === 'cnpj_municipios') {
            const rows: [string, string][] = [];
            members.set(rel.name, await readRelation(rel, files, discard(), (f) => (rows.push([f[0].trim(), f[1].trim()]), ''), stats.get(rel.name)!, ctx, progress.get(rel.name)!));
            municipiosLookup = rows;
            continue;
          }
          const table = await tableOf(rel);
          const build = lineBuilder(rel, { snapshotId: sid, latestDate, counts: emptyCounts() });
          await copyRelation(client, table, rel, async (out) => {
            members.set(rel.name, await readRelation(rel, files, out, build, stats.get(rel.name)!, ctx, progress.get(rel.name)!));
          });
          await indexRelation(client, rel, table, ctx, timings);
        }
      } finally {
        client.release();
      }
      // Families: one connection and COPY each; the first failure stops the others. The
      // companies' legal-name trigram index is the month's longest build (a GIN build is one
      // process): companies are copied first, alone (a few seconds), so that index builds while
      // the other families load instead of after them (at 1 M, under load, it started at 27 s
      // and ended the stage at 64 s).
      const streams: Writable[] = [];
      let failed: Error | null = null;
      let companiesCopied = () => {};
      const companiesReady = new Promise<void>((r) => (companiesCopied = r));
      const order = [EMPRESAS, ...FAMILIES.filter((r) => r !== EMPRESAS)];
      await mapLimited(order, familySlots(ctx.pool), async (rel) => {
        if (rel !== EMPRESAS) await companiesReady;
        if (failed) throw failed;
        const c = await ctx.pool.connect();
        try {
          const table = await tableOf(rel);
          const build = lineBuilder(rel, { snapshotId: sid, latestDate, counts, onPlace: rel.name === 'cnpj_estabelecimentos' ? onPlace : undefined });
          await copyRelation(c, table, rel, async (out) => {
            streams.push(out);
            if (failed) throw failed;
            members.set(rel.name, await readRelation(rel, files, out, build, stats.get(rel.name)!, ctx, progress.get(rel.name)!));
          }).finally(() => {
            if (rel === EMPRESAS) companiesCopied();
          });
          build.flush();
          timings[rel.name] = { copy_done_ms: Date.now() - started };
          // Its indexes and facts now, while the other families are still copying.
          if (!failed) await indexRelation(c, rel, table, ctx, timings);
          if (!failed && hasFacts(rel.name)) {
            const t0 = Date.now();
            Object.assign(tableFacts, { [rel.name]: await FACT_QUERIES[rel.name](c, table, lookupTables()) });
            timings[rel.name].facts_ms = Date.now() - t0;
          }
        } catch (e) {
          if (!failed) {
            failed = e as Error;
            for (const s of streams) s.destroy(failed);
          }
          throw e;
        } finally {
          c.release();
          if (rel === EMPRESAS) companiesCopied(); // also when companies failed before their COPY: the others see `failed`
        }
      }).catch(() => {
        throw failed;
      });
      // Municipalities: the crosswalk needs the UFs the establishments gave each TOM code.
      const c = await ctx.pool.connect();
      try {
        const rel = LOOKUPS.find((r) => r.name === 'cnpj_municipios')!;
        const table = await tableOf(rel);
        const cw = await buildCrosswalk(c, municipiosLookup, places, sid);
        await copyRelation(c, table, rel, async (out) => {
          for (const line of cw.rows) await writeOrWait(out, line);
        });
        await indexRelation(c, rel, table, ctx, timings);
        return cw.facts;
      } finally {
        c.release();
      }
    }, () => [...stats.values()].reduce((a, x) => a + x.records, 0), () => ({ timings }));
  } finally {
    clearInterval(ticker);
  }

  // ---- facts and gate
  const facts = emptyFacts();
  const current = await catalog.currentSnapshot(ctx.pool, 'receita-cnpj', '');
  const previous = current && current.snapshot_id !== sid ? current : null;
  const cnpj = await ctx.stage('facts', async () => {
    const { cnpj_empresas: emp, cnpj_estabelecimentos: est, cnpj_socios: soc } = tableFacts as TableFacts;
    const contagens: Record<string, number> = {};
    for (const rel of RELATIONS) contagens[familyKey(rel)] = stats.get(rel.name)!.records;
    contagens.empresas_com_socios = soc.empresas_com_socios;
    const prevCounts = (previous?.quality as { facts?: { cnpj?: CnpjFacts } } | null)?.facts?.cnpj?.contagens ?? null;
    const cf: CnpjFacts = {
      mes: asOf.slice(0, 7),
      familias: Object.fromEntries(RELATIONS.map((rel) => {
        const s = stats.get(rel.name)!;
        return [familyKey(rel), { arquivos: members.get(rel.name) ?? [], linhas: s.records, malformadas: s.malformed, amostras_malformadas: s.malformedSamples, aspas_soltas: s.strayQuotes, bytes: s.bytes }];
      })),
      contagens,
      anterior: previous && prevCounts ? { snapshot_id: previous.snapshot_id, contagens: prevCounts } : null,
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
      cnpj_alfanumerico: counts.cnpjAlphanumeric,
      cnpj_dv_invalido: counts.cnpjBadCheckDigits,
      cpf_no_nome_removido: counts.cpfInName,
      cpf_em_nomes: counts.cpfInNames,
      socios_cpf_mascarado: counts.partnersMaskedCpf,
      chave_socio_repetida: soc.chave_repetida,
      cnpj_basico_repetido: emp.cnpj_basico_repetido,
      razao_social_vazia: emp.razao_vazia,
      nome_socio_vazio: soc.nome_vazio,
      situacao_desconhecida: est.situacao_desconhecida,
      municipios,
      qsa_alteradas: null,
    };
    return cf;
  });
  facts.failures.push(...gateFailures(cnpj));

  // ---- diff of partner lists against the previous month
  if (previous) {
    const prev = target.previousTable('cnpj_socios');
    const prevTable = prev ? tableName(prev) : null;
    if (prevTable && (await tableExists(ctx.pool, prevTable))) {
      cnpj.qsa_alteradas = await ctx.stage('diff', () => writePartnerListDiff(ctx.pool, {
        snapshotId: sid, previousSnapshotId: previous.snapshot_id, socios: tables.get('cnpj_socios')!, previous: prevTable,
      }), (n) => n);
    }
  }

  // ---- the common report sections
  const read = [...stats.values()].reduce((a, s) => a + s.records + s.malformed, 0);
  const malformed = [...stats.values()].reduce((a, s) => a + s.malformed, 0);
  if (malformed) facts.rejected.malformed_row = malformed;
  facts.encoding = { name: 'ISO-8859-1', assumed: false, replacementChars: 0 };
  facts.fields.empty = counts.empty;
  mergeCounts(facts.dates.placeholders, counts.datePlaceholders);
  mergeCounts(facts.dates.unparseable, counts.dateUnparsed);
  addCounts(facts, 'implausible', counts.dateImplausible);
  addCounts(facts, 'unparsed', counts.unparsed);
  notes(facts, cnpj);
  return {
    rowsRead: read,
    rowsLoaded: cnpj.contagens.estabelecimentos,
    rowsRejected: malformed,
    facts: Object.assign(facts, { cnpj }) as QualityFacts,
    fingerprint: null,
  };
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

function notes(facts: QualityFacts, c: CnpjFacts): void {
  const n = facts.notes;
  n.push(`month ${c.mes}: ${c.contagens.empresas} companies, ${c.contagens.estabelecimentos} establishments, ${c.contagens.socios} partners, ${c.contagens.simples} Simples rows`);
  for (const [fam, f] of Object.entries(c.familias)) {
    if (f.malformadas) n.push(`${fam}: ${f.malformadas} malformed rows (wrong field count) rejected, e.g. ${f.amostras_malformadas.slice(0, 5).map((s) => `${s.member} record ${s.record} (${s.fields} fields)`).join(', ')}`);
    if (f.aspas_soltas) n.push(`${fam}: ${f.aspas_soltas} quotes inside quoted fields kept as text`);
  }
  for (const [k, o] of Object.entries(c.orfaos)) if (o.linhas) n.push(`orphan ${k} codes: ${o.linhas} rows (${o.codigos.join(', ')}), kept`);
  const sent = Object.entries(c.capital_sentinela);
  if (sent.length) n.push(`sentinel capital_social values: ${sent.map(([v, k]) => `${v} ×${k}`).join(', ')}`);
  if (c.cep_sem_zero_inicial) n.push(`${c.cep_sem_zero_inicial} CEPs had lost their leading zero: left-padded, source text kept in extra`);
  if (c.cnpj_dv_invalido) n.push(`${c.cnpj_dv_invalido} establishments whose CNPJ check digits do not verify: kept`);
  if (c.situacao_desconhecida) n.push(`${c.situacao_desconhecida} establishments with a situacao_cadastral outside 01/02/03/04/05/08: kept`);
  if (c.cnpj_alfanumerico) n.push(`${c.cnpj_alfanumerico} alphanumeric CNPJs`);
  if (c.cpf_no_nome_removido) n.push(`${c.cpf_no_nome_removido} legal names ended with the owner's CPF: cut from razao_social, kept masked in cpf_titular_mascarado`);
  const inNames = Object.entries(c.cpf_em_nomes);
  if (inNames.length) n.push(`CPF-looking numbers in served names: ${inNames.map(([k, v]) => `${k} ×${v}`).join(', ')} (a trailing one cut, others masked as ***.NNN.NNN-**)`);
  if (c.chave_socio_repetida) n.push(`${c.chave_socio_repetida} partner rows repeat another row of the same company exactly (same partner key): kept`);
  if (c.cnpj_basico_repetido) n.push(`${c.cnpj_basico_repetido} company rows repeat a cnpj_basico: kept`);
  const m = c.municipios;
  if (!m.ibge_carregado) n.push(`ibge-municipios is not loaded: municipalities keep Receita's TOM code, no IBGE code (${m.codigos} codes)`);
  else n.push(`municipalities: ${m.casados} of ${m.codigos} TOM codes matched to IBGE by name + UF, ${m.sem_par} unmatched${m.exemplos_sem_par.length ? ` (${m.exemplos_sem_par.slice(0, 10).join('; ')})` : ''}, ${m.sem_uf} not used by any establishment`);
  if (c.qsa_alteradas !== null) n.push(`${c.qsa_alteradas} companies changed their partner list against snapshot ${c.anterior?.snapshot_id}`);
}

export const receitaCnpj: Pipeline & { key: string } = {
  name: 'receita-cnpj',
  scopedByUf: false,
  relations: RELATIONS.map((r) => r.name),
  mainRelation: 'cnpj_estabelecimentos',
  key: 'cnpj',
  fetch: fetchMonth,
  async releaseDate(_ctx, files) {
    return monthOf(files);
  },
  load,
};
