// receita-cnpj: the Receita Federal CNPJ month (SOURCES §10; contract §2b, §3), one national
// snapshot per `YYYY-MM` folder (as_of = the month's first day). A declaration on the one
// shape's streamed route (src/etl/shape-stream.ts; pipelines/README.md, "A multi-relation CSV
// month"): the engine checks every declaration against its template before any zip is read,
// streams each relation's members (latin1, `;`, quoted, no header, exact field count: other
// records are malformed, counted with their record numbers, rejected) straight into a table
// created in its COPY's transaction (COPY FREEZE), the lookups first, then one COPY per family
// in parallel, indexes each table as declared right after its own COPY, and keeps the ledger.
// What is its own:
//   relations.ts  each relation declared once (defineRelation): columns in template order,
//                 the record position and conversion of each field (`at`, `cell`), the
//                 derived columns, empty values counted, the indexes (btree, trigram), and
//                 where the month holds it (zips, member suffix)
//   transform.ts  the line builder: record → COPY line (field rules, CPFs in names, keys)
//   fetch.ts      the share's newest month, 37 zips, resumable, validated, size + SHA-256
//                 (a local folder of months through the one picker; WebDAV listed by PROPFIND)
//   queries.ts    its statements, one typed function each: each family table's facts
//                 (orphan codes, empty names, repeated keys), queried right after its indexes
//   reference-date.ts  the month's bound for plausible dates: the reference date of its
//                 member names (`D40810` → 2024-08-10), else the month's last day
//   crosswalk.ts  municipalities: Receita's TOM code → IBGE by normalised name + the UF the
//                 establishments give it (the engine's deferred relation, written last)
//   facts.ts      the report section `cnpj`, the gate (a month that lost its names or partner
//                 lists, or a family's rows, is blocked) and the notes
//   here          the hooks wiring them, and the partner lists diffed against the previous
//                 month (derived.cnpj_qsa_changes, stage 'diff')
// Publication is the engine's (one transaction: readers see the old month or the new one).
import { shapedPipeline } from '../../src/etl/shape.ts';
import type { StreamRun, StreamStep } from '../../src/etl/shape-stream.ts';
import { tableName } from '../../src/sql.ts';
import { buildCrosswalk, PlaceCounts } from './crosswalk.ts';
import { noteImplausibleDates } from '../../src/etl/quality.ts';
import { addTransformCounts, cnpjNotes, familyKey, gateFailures, monthFacts, type CnpjFacts, type TableFacts } from './facts.ts';
import { fetchMonth, monthOf } from './fetch.ts';
import { monthDatesBound, referenceCode } from './reference-date.ts';
import { companyFacts, establishmentFacts, partnerFacts, tableExists, writePartnerListDiff, type LookupTables } from './queries.ts';
import { EMPRESAS, ESTABELECIMENTOS, FAMILIES, LOOKUPS, MUNICIPIOS, RELATIONS } from './relations.ts';
import { emptyCounts, lineBuilder } from './transform.ts';

/** One month's hooks: the transforms' counters, the establishments' places, each family table's facts. */
async function monthRun({ ctx, target, files, tables }: StreamStep): Promise<StreamRun> {
  const sid = target.snapshotId;
  // Dates after the month's reference date (its member names' D<YMMDD>) are implausible.
  const folder = (monthOf(files) ?? target.asOf).slice(0, 7);
  const bound = await monthDatesBound(files, folder, target.asOf, ctx.cfg.zip);
  const latestDate = bound.data;
  const counts = emptyCounts();
  const places = new PlaceCounts();
  const tableFacts: Partial<TableFacts> = {};
  let municipios: CnpjFacts['municipios'] | undefined;
  let cnpj: CnpjFacts | undefined;
  const month = (): CnpjFacts => {
    if (!cnpj) throw new Error('receita-cnpj: the facts stage has not run');
    return cnpj;
  };
  /** The month's code tables (loaded first), for the families' orphan codes. */
  const lookups = (): LookupTables => ({
    naturezas: tables.get('cnpj_naturezas')!, qualificacoes: tables.get('cnpj_qualificacoes')!, motivos: tables.get('cnpj_motivos')!, paises: tables.get('cnpj_paises')!, cnaes: tables.get('cnpj_cnaes')!,
  });
  return {
    // The families' counts are the report's; a lookup's are not.
    lines: (rel) => (LOOKUPS.includes(rel)
      ? lineBuilder(rel, { snapshotId: sid, latestDate, counts: emptyCounts() })
      : lineBuilder(rel, { snapshotId: sid, latestDate, counts, onPlace: rel === ESTABELECIMENTOS ? places.add : undefined })),
    tableFacts: {
      cnpj_empresas: async (c, table) => void (tableFacts.cnpj_empresas = await companyFacts(c, table, lookups())),
      cnpj_estabelecimentos: async (c, table) => void (tableFacts.cnpj_estabelecimentos = await establishmentFacts(c, table, lookups())),
      cnpj_socios: async (c, table) => void (tableFacts.cnpj_socios = await partnerFacts(c, table, lookups())),
    },
    async deferred(client, records) {
      const cw = await buildCrosswalk(client, records.map((f): [string, string] => [f[0].trim(), f[1].trim()]), places, sid);
      municipios = cw.facts;
      return cw.rows;
    },
    async facts(read, previous) {
      cnpj = monthFacts({ asOf: target.asOf, relations: RELATIONS, read, counts, tables: tableFacts as TableFacts, municipios: municipios!, previous, datesBound: bound });
    },
    gate: () => gateFailures(month()),
    async compare(previous) {
      const prev = target.previousTable('cnpj_socios');
      const prevTable = prev ? tableName(prev) : null;
      if (!prevTable || !(await tableExists(ctx.pool, prevTable))) return; // dropped by retention
      month().qsa_alteradas = await ctx.stage('diff', () => writePartnerListDiff(ctx.pool, {
        snapshotId: sid, previousSnapshotId: previous.snapshot_id, socios: tables.get('cnpj_socios')!, previous: prevTable,
      }), (n) => n);
    },
    report(facts) {
      addTransformCounts(facts, counts);
      noteImplausibleDates(facts, latestDate, bound.origem === 'data_de_referencia'
        ? `before 1800 or after the reference date of the member names (${referenceCode(latestDate)})`
        : "before 1800 or after the month's last day");
      cnpjNotes(facts, month());
      return { cnpj: month() };
    },
  };
}

export const receitaCnpj = shapedPipeline({
  name: 'receita-cnpj',
  relation: ESTABELECIMENTOS,
  key: 'cnpj',
  fetch: fetchMonth,
  releaseDate: monthOf,
  stream: {
    families: FAMILIES,
    // The companies' legal-name trigram index is the month's longest build (a GIN build is one
    // process): companies are copied first, alone (a few seconds), so that index builds while
    // the other families load instead of after them (at 1 M, under load, it started at 27 s
    // and ended the stage at 64 s).
    lead: EMPRESAS,
    lookups: LOOKUPS,
    deferred: MUNICIPIOS,
    progressMs: (cfg) => cfg.receitaCnpj.progressMs,
    label: familyKey,
    begin: monthRun,
  },
});
