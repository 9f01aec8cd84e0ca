// ZARC (MAPA Tábua de Risco, SOURCES §7): one national snapshot covering every season file
// of the source (`dados-abertos-tabua-de-risco-safra-YYYY-YYYY.csv` and the perennial file
// `…-safra-perene-olericola-sem-safra.csv`). `--source` is one CSV, a folder of CSVs, a CSV
// URL, or a CKAN `package_show` URL (the season resources are discovered there: their UUIDs
// change every season). Files are streamed into staging through COPY (3.3 M rows a season),
// mapped by header (the column set changes between seasons) and normalised in SQL.
//
// On the one shape: the relation is declared once below (source spellings, counted columns,
// indexes); the read stages every season file into one table (read.csv, name order); the
// classify types each row once (sql/queries/zarc_typed.sql: verdict, codes, season, risk
// cells, chave, extra; ShapeSpec.typed) and the build copies the kept typed rows, one per
// chave (the last one read wins). The engine counts verdicts, empty values and overflowed
// cells; ZARC adds its own facts (seasons, invalid risk cells, duplicates, files).
import { AgroError } from '../../src/errors.ts';
import { ckanResources, isPackageShow, type CkanResource } from '../../src/etl/ckan.ts';
import { fetchSource, type FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import { addCounts, addExamples } from '../../src/etl/quality.ts';
import { defineRelation, type ColumnDef } from '../../src/etl/relation.ts';
import { csvFiles, fetchCsv, type CsvSource } from '../../src/etl/shape-csv.ts';
import { shapedPipeline } from '../../src/etl/shape.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { typedExampleColumns } from '../../src/etl/sql/typed.ts';
import { verdictExamples } from '../../src/etl/verdict-examples.ts';
import { bacenConflicts, classifyZarc, droppedCopies, keptRaw, lastReadPerKey, seasonCounts, zarcDuplicates, zarcStats } from './queries.ts';

const DECS = Array.from({ length: 36 }, (_, i) => i + 1);

/** A column the classify types (the typed row `c` holds it), with its source spellings (lower case; the BOM is stripped before matching). */
const typed = (name: string, type: string, from?: string[], o: Pick<ColumnDef, 'required' | 'counted'> = {}): ColumnDef => ({ name, type, from, sql: `c.${name}`, ...o });

/** snap.zarc_risco: columns in template order, with every known header spelling (they change between seasons). */
export const ZARC_RISCO = defineRelation({
  name: 'zarc_risco',
  columns: [
    typed('geocodigo', 'text', ['geocodigo'], { required: true }),
    typed('safra', 'text'),
    typed('cultura', 'text', ['nome_cultura', 'cultura'], { required: true }),
    typed('cultura_busca', 'text'),
    typed('cod_cultura', 'text', ['cod_cultura'], { counted: true }),
    typed('ciclo', 'text', ['cod_ciclo'], { required: true }),
    typed('solo', 'text', ['cod_solo'], { required: true }),
    typed('manejo', 'text', ['cod_outros_manejos', 'cod_manejo'], { counted: true }),
    typed('nome_manejo', 'text', ['nome_outros_manejos', 'nome_manejo'], { counted: true }),
    typed('cod_clima', 'text', ['cod_clima'], { counted: true }),
    typed('clima', 'text', ['nome_clima'], { counted: true }),
    typed('portaria', 'text', ['portaria'], { counted: true }),
    typed('uf', 'text', ['uf'], { counted: true }),
    typed('municipio', 'text', ['municipio', 'nome_municipio'], { counted: true }),
    typed('cod_municipio_bacen', 'text', ['cod_munic'], { counted: true }),
    ...DECS.map((n) => typed(`dec${n}`, 'smallint', [`dec${n}`, `dec_${n}`], { required: true })),
    typed('safra_ini', 'smallint', ['safraini', 'safra_ini']),
    typed('safra_fim', 'smallint', ['safrafin', 'safra_fin', 'safrafim', 'safra_fim']),
    typed('produtividade', 'text', ['produtividade']),
    typed('cod_nm', 'text', ['cod_nm']),
    typed('cod_meso', 'text', ['cod_meso']),
    typed('cod_micro', 'text', ['cod_micro']),
    typed('chave', 'text'),
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  indexes: { primaryKey: ['chave'], btree: [{ name: 'geo', columns: ['geocodigo', 'cultura'] }] },
});

/** Canonical staging name ← every known spelling. */
export const ZARC_FIELDS = ZARC_RISCO.staging;

/** Season of a file from its official name: 'YYYY/YYYY', 'perene', or null. */
export function safraFromName(name: string): string | null {
  const m = /safra-(\d{4})-(\d{4})/i.exec(name);
  if (m) return `${m[1]}/${m[2]}`;
  return /perene|sem-safra/i.test(name) ? 'perene' : null;
}

/** A resource's download name and whether it is a season's (or the perennials') CSV, by its name and file name. */
function ckanResource(r: CkanResource): { url: string; file: string; season: boolean; csv: boolean } {
  const url = r.url ?? '';
  const last = url.split('?')[0].split('/').pop() ?? '';
  let file = last;
  try {
    file = decodeURIComponent(last);
  } catch {
    // a stray '%': the name as written
  }
  const label = `${r.name ?? ''} ${file}`;
  return { url, file, season: /\d{4}\s*[/-]\s*\d{4}/.test(label) || /perene/i.test(label), csv: /csv/i.test(r.format ?? '') || /\.csv$/i.test(file) };
}

/**
 * The local name of a resource: its download name in letters, digits, '.', '-' and '_' (accents
 * stripped), ending in .csv; the resource's own name when the download name carries no season
 * (an old layout without SafraIni/SafraFin takes the season from it, safraFromName).
 */
function localName(file: string, resourceName: string): string {
  const safe = (s: string) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').replace(/[^\w.\-]+/g, '-').replace(/^[-.]+|[-.]+$/g, '');
  const fromFile = safe(file.replace(/\.csv$/i, ''));
  const base = fromFile && safraFromName(fromFile) ? fromFile : safe(resourceName) || fromFile || 'recurso';
  return `${base}.csv`;
}

/**
 * The season and perennial CSV resources of the CKAN dataset (chosen by name, never by UUID),
 * whatever their download names look like (spaces, accents, no suffix: local names are made safe).
 */
export function pickCkanResources(resources: CkanResource[]): { url: string; name: string }[] {
  const out = new Map<string, string>();
  for (const r of resources) {
    const x = ckanResource(r);
    if (!x.csv || !x.season || !x.url) continue;
    let name = localName(x.file, r.name ?? '');
    for (let i = 2; out.has(name) && out.get(name) !== x.url; i++) name = localName(x.file, r.name ?? '').replace(/\.csv$/, `-${i}.csv`);
    out.set(name, x.url);
  }
  return [...out].map(([name, url]) => ({ name, url })).sort((a, b) => a.name.localeCompare(b.name));
}

/** Resources named like a season that are not CSV (a zip, a spreadsheet): not loaded, named in the report. */
export function ckanNotLoaded(resources: CkanResource[]): { name: string; format: string; url: string }[] {
  return resources.filter((r) => {
    const x = ckanResource(r);
    return x.season && !x.csv && !/pdf|dicion/i.test(`${r.format ?? ''} ${r.name ?? ''}`);
  }).map((r) => ({ name: r.name ?? '', format: r.format ?? '', url: r.url ?? '' }));
}

/** What each CKAN run left out (its facts report it). */
const ckanSkipped = new WeakMap<RunContext, ReturnType<typeof ckanNotLoaded>>();

/** The season CSVs: every .csv of a folder, one file, or a CSV URL. */
const ZARC_SOURCE: CsvSource = { ext: /\.csv$/i, what: '.csv file', several: true };

/** A CKAN package_show URL: the season resources are discovered by name. */
async function fetchCkan(ctx: RunContext, src: string): Promise<FetchedFile[]> {
  const common = { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, ...ctx.cfg.download, expect: 'csv' as const, log: (m: string) => ctx.log.info(m) };
  const resources = await ckanResources(ctx, src);
  const picked = pickCkanResources(resources);
  ckanSkipped.set(ctx, ckanNotLoaded(resources));
  if (!picked.length) throw new AgroError('source_not_found', `${src}: no season CSV resource`);
  const files: FetchedFile[] = [];
  for (const r of picked) files.push((await fetchSource(r.url, { ...common, name: r.name }))!);
  return files;
}

/** ZARC's own facts (kept in the report JSON under `zarc`). */
export interface ZarcFacts {
  files: { name: string; rows: number; bad_rows: number; bom: boolean; fingerprint: string | null; columns: number; unknown: string[]; missing_optional: string[]; safra_from_name: string | null }[];
  seasons: Record<string, number>;
  perennial_rows: number;
  invalid_risk: { cells: number; rows: number; values: Record<string, number>; samples: { file: string; record: number; decendio: number; valor: string }[] };
  duplicates: { exact: number; conflicting: number; conflicting_keys: string[] };
  bad_codes: number;
  uf_mismatch: number;
  /** Municipalities whose rows carry several Bacen codes (at most 200): no code for them in serving.ref_municipio. */
  bacen_conflicts: { geocodigo: string; cod_municipio_bacen: string[] }[];
  /** CKAN resources named like a season that are not CSV (not loaded). */
  ckan_not_loaded: { name: string; format: string; url: string }[];
  dedup_rule: string;
}

const DEDUP_RULE = 'one row per chave; among copies the last read wins (files in name order, then rows in file order)';

export const zarc = shapedPipeline({
  name: 'zarc',
  relation: ZARC_RISCO,
  source: {
    ...ZARC_SOURCE,
    // The newest Last-Modified of the season files.
    filesDate: (files) => files.map(lastModifiedDay).filter((d): d is string => d !== null).sort().at(-1) ?? null,
  },
  fetch: (ctx) => (isPackageShow(ctx.source) ? fetchCkan(ctx, ctx.source) : fetchCsv(ctx, 'zarc', ZARC_SOURCE)),
  // No layers: the seasons are delimited text (the SRID would be a zip's shapefiles', refused by the declaration's fields).
  read: { srid: 4674, csv: { delimiter: ';', badRows: 'reject' } },
  typed: true,
  classify: ({ client, t, staged, snapshotId }) => classifyZarc(client, t, csvFiles(staged).map((f) => safraFromName(f.name)), snapshotId),
  kept: (t) => lastReadPerKey(t.classified),
  // The deduplication sorts every typed row (3.3 M a season).
  workMem: '256MB',
  // Counted per row (a row holding U+FFFD in its text), below.
  replacementChars: 'own',
  async facts({ client, t, ctx, target, facts, staged, verdicts, rowsLoaded }) {
    const files = csvFiles(staged);
    const st = await zarcStats(client, t.classified);
    // Cells and codes kept raw: those of the rows loaded (not of a copy dropped or a row rejected).
    const raw = await keptRaw(client, t.classified);
    const z: ZarcFacts = {
      files: files.map((f) => ({
        name: f.name, rows: f.rows, bad_rows: f.badRows, bom: f.format.bom, fingerprint: f.fingerprint, columns: f.header?.length ?? 0,
        unknown: f.unknown, missing_optional: f.missingOptional, safra_from_name: safraFromName(f.name),
      })),
      seasons: {}, perennial_rows: 0,
      invalid_risk: {
        cells: raw.invalid_cells, rows: raw.invalid_rows, values: raw.values,
        samples: raw.samples.map((r) => ({ file: files[r.file_no].name, record: Number(r.src_seq) - files[r.file_no].firstSeq + 1, decendio: r.decendio, valor: r.valor })),
      },
      duplicates: { exact: 0, conflicting: 0, conflicting_keys: [] },
      bad_codes: raw.bad_code, uf_mismatch: st.uf_mismatch, bacen_conflicts: await bacenConflicts(client, target),
      ckan_not_loaded: ckanSkipped.get(ctx) ?? [], dedup_rule: DEDUP_RULE,
    };
    facts.encoding.replacementChars = st.replacement_char;
    if ((verdicts.ok ?? 0) > rowsLoaded) {
      const d = await zarcDuplicates(client, t.classified);
      z.duplicates = { exact: Number(d.exact), conflicting: Number(d.conflicting), conflicting_keys: d.conflict_samples };
    }
    // The copies dropped, counted and shown as rejected rows are (their typed values).
    const copies = [['duplicate_row', z.duplicates.exact, 'exact'], ['conflicting_duplicate', z.duplicates.conflicting, 'conflicting']] as const;
    for (const [reason, n, kind] of copies) {
      if (!n) continue;
      facts.dropped[reason] = n;
      addExamples(facts, await verdictExamples(client, t.classified, { shown: typedExampleColumns(ZARC_RISCO), copies: { reason, where: droppedCopies(t.classified, kind) } }));
    }
    addCounts(facts, 'unparsed', raw.unparsed);
    for (const r of await seasonCounts(client, target)) z.seasons[r.safra] = Number(r.n);
    z.perennial_rows = z.seasons.perene ?? 0;

    const n = facts.notes;
    n.push(`seasons loaded: ${Object.entries(z.seasons).map(([s, c]) => `${s} (${c} rows)`).join(', ') || 'none'}`);
    if (z.perennial_rows) n.push(`${z.perennial_rows} perennial / no-season rows loaded with safra = 'perene'`);
    if (z.invalid_risk.cells) {
      n.push(`${z.invalid_risk.cells} risk cells in ${z.invalid_risk.rows} rows are not 20/30/40/0/empty (loaded as NULL, text kept in extra): ${Object.entries(z.invalid_risk.values).map(([v, c]) => `"${v}" × ${c}`).join(', ')}`);
    }
    if (z.duplicates.exact) n.push(`${z.duplicates.exact} exact duplicate rows dropped`);
    if (z.duplicates.conflicting) n.push(`${z.duplicates.conflicting} rows share a key with different risk cells; ${DEDUP_RULE}; e.g. ${z.duplicates.conflicting_keys.slice(0, 3).join(' ; ')}`);
    if (z.bad_codes) n.push(`${z.bad_codes} rows have a non-numeric optional code (cod_cultura, manejo, cod_clima, cod_meso or cod_micro), loaded as NULL, text kept in extra`);
    if (z.ckan_not_loaded.length) n.push(`CKAN resources named like a season but not CSV, not loaded: ${z.ckan_not_loaded.map((r) => `${r.name} (${r.format || 'no format'})`).join(', ')}`);
    if (z.bacen_conflicts.length) {
      n.push(`${z.bacen_conflicts.length} municipalities carry several Bacen codes (Cod_Munic), left out of serving.ref_municipio.cod_municipio_bacen: ${z.bacen_conflicts.slice(0, 20).map((c) => `${c.geocodigo} (${c.cod_municipio_bacen.join(', ')})`).join(', ')}`);
    }
    if (z.uf_mismatch) n.push(`${z.uf_mismatch} rows have a UF that does not match their geocodigo`);
    if (facts.encoding.replacementChars) n.push(`${facts.encoding.replacementChars} rows hold U+FFFD: a file is probably not UTF-8`);
    for (const f of z.files) {
      if (!f.bom) n.push(`${f.name} has no UTF-8 BOM (the official files have one)`);
      if (f.unknown.length) n.push(`${f.name}: unknown columns kept in extra: ${f.unknown.join(', ')}`);
    }
    return { zarc: z };
  },
});
