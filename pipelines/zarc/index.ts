// ZARC (MAPA Tábua de Risco, SOURCES §7): one national snapshot covering every season file
// of the source (`dados-abertos-tabua-de-risco-safra-YYYY-YYYY.csv` and the perennial file
// `…-safra-perene-olericola-sem-safra.csv`). `--source` is one CSV, a folder of CSVs, a CSV
// URL, or a CKAN `package_show` URL (the season resources are discovered there: their UUIDs
// change every season). Files are streamed into staging through COPY (3.3 M rows a season),
// mapped by header (the column set changes between seasons) and normalised in SQL.
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AgroError } from '../../src/errors.ts';
import { fetchSource, isHttp, localPath, type FetchedFile } from '../../src/etl/download.ts';
import { countNulls, indexSnapshotTable } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addCounts, addExamples, emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { verdictExamples } from '../../src/etl/verdict-examples.ts';
import { assertSameShape } from '../../src/etl/repair.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { csvEncodingName, readCsvHead, type CsvFormat } from '../../src/etl/csv-records.ts';
import { headerMismatch, normaliseHeader, stageCsv, type CsvStageResult } from '../../src/etl/stage-csv.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
import { namedSql, render } from '../../src/sql.ts';

const DECS = Array.from({ length: 36 }, (_, i) => i + 1);

/** Canonical staging name ← every known spelling (lower case; the BOM is stripped before matching). */
export const ZARC_FIELDS: FieldSpec[] = [
  { name: 'cultura', aliases: ['nome_cultura', 'cultura'], required: true },
  { name: 'safra_ini', aliases: ['safraini', 'safra_ini'] },
  { name: 'safra_fim', aliases: ['safrafin', 'safra_fin', 'safrafim', 'safra_fim'] },
  { name: 'cod_cultura', aliases: ['cod_cultura'] },
  { name: 'ciclo', aliases: ['cod_ciclo'], required: true },
  { name: 'solo', aliases: ['cod_solo'], required: true },
  { name: 'geocodigo', aliases: ['geocodigo'], required: true },
  { name: 'uf', aliases: ['uf'] },
  { name: 'municipio', aliases: ['municipio', 'nome_municipio'] },
  { name: 'cod_clima', aliases: ['cod_clima'] },
  { name: 'clima', aliases: ['nome_clima'] },
  { name: 'manejo', aliases: ['cod_outros_manejos', 'cod_manejo'] },
  { name: 'nome_manejo', aliases: ['nome_outros_manejos', 'nome_manejo'] },
  { name: 'produtividade', aliases: ['produtividade'] },
  { name: 'cod_nm', aliases: ['cod_nm'] },
  { name: 'cod_municipio_bacen', aliases: ['cod_munic'] },
  { name: 'cod_meso', aliases: ['cod_meso'] },
  { name: 'cod_micro', aliases: ['cod_micro'] },
  { name: 'portaria', aliases: ['portaria'] },
  ...DECS.map((n) => ({ name: `dec${n}`, aliases: [`dec${n}`, `dec_${n}`], required: true })),
];

/** Loaded columns whose NULLs the report counts. */
const EMPTY_FIELDS = ['cod_cultura', 'manejo', 'nome_manejo', 'cod_clima', 'clima', 'portaria', 'uf', 'municipio', 'cod_municipio_bacen'];

/** Season of a file from its official name: 'YYYY/YYYY', 'perene', or null. */
export function safraFromName(name: string): string | null {
  const m = /safra-(\d{4})-(\d{4})/i.exec(name);
  if (m) return `${m[1]}/${m[2]}`;
  return /perene|sem-safra/i.test(name) ? 'perene' : null;
}

interface CkanResource {
  name?: string | null;
  url?: string | null;
  format?: string | null;
}

/** The season and perennial CSV resources of the CKAN dataset (chosen by name, never by UUID). */
export function pickCkanResources(resources: CkanResource[]): { url: string; name: string }[] {
  const out = new Map<string, string>();
  for (const r of resources) {
    const url = r.url ?? '';
    const file = decodeURIComponent(url.split('?')[0].split('/').pop() ?? '');
    const csv = /csv/i.test(r.format ?? '') || /\.csv$/i.test(file);
    const label = `${r.name ?? ''} ${file}`;
    const season = /\d{4}\s*[/-]\s*\d{4}/.test(label) || /perene/i.test(label);
    if (csv && season && /^[\w.\-]+\.csv$/i.test(file)) out.set(file, url);
  }
  return [...out].map(([name, url]) => ({ name, url })).sort((a, b) => a.name.localeCompare(b.name));
}

async function fetchZarc(ctx: RunContext): Promise<FetchedFile[]> {
  const src = ctx.options.source ?? ctx.cfg.sources.zarc;
  if (!src) throw new AgroError('usage', 'zarc needs --source <CSV file, folder of CSVs, CSV URL or CKAN package_show URL> (or AGRO_SOURCE_ZARC)');
  const common = { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, expect: 'csv' as const, log: (m: string) => ctx.log.info(m) };
  const files: FetchedFile[] = [];
  if (isHttp(src)) {
    if (/\/api\/3\/action\/package_show/.test(src)) {
      const meta = await fetchSource(src, { ...common, destDir: ctx.workDir, name: 'package_show.json', expect: 'any' });
      let resources: CkanResource[];
      try {
        resources = JSON.parse(await readFile(meta!.path, 'utf8')).result.resources;
        if (!Array.isArray(resources)) throw new Error('no resources');
      } catch (e) {
        throw new AgroError('download_failed', `${src}: not a CKAN package_show answer (${(e as Error).message})`);
      }
      const picked = pickCkanResources(resources);
      if (!picked.length) throw new AgroError('source_not_found', `${src}: no season CSV resource`);
      for (const r of picked) files.push((await fetchSource(r.url, { ...common, name: r.name }))!);
    } else {
      files.push((await fetchSource(src, common))!);
    }
  } else {
    const p = localPath(src);
    const st = await stat(p).catch(() => null);
    if (!st) throw new AgroError('source_not_found', `${p}: no such file or folder`);
    const paths = st.isDirectory()
      ? (await readdir(p)).filter((n) => /\.csv$/i.test(n)).sort().map((n) => path.join(p, n))
      : [p];
    for (const f of paths) files.push((await fetchSource(f, common))!);
  }
  if (!files.length) throw new AgroError('source_not_found', `${src}: no .csv file`);
  return files;
}

/** The header row of a file and the format it was detected in (nothing else is read). */
export async function readHeader(file: string): Promise<{ names: string[]; bom: boolean; format: CsvFormat }> {
  const { format, header } = await readCsvHead(file, ';');
  return { names: header, bom: format.bom, format };
}

/** Fails (before anything is staged) when a file lacks a required column. */
function checkRequired(file: string, names: string[], format: CsvFormat) {
  const present = new Set(names.map(normaliseHeader));
  const missing = ZARC_FIELDS.filter((s) => s.required && !s.aliases.some((a) => present.has(a))).map((s) => s.name);
  if (missing.length) {
    const shown = missing.length > 8 ? `${missing.slice(0, 8).join(', ')} … (${missing.length} in all)` : missing.join(', ');
    throw new AgroError('required_field_missing', `${file}: required columns missing: ${shown}; ${headerMismatch(file, format, names)}`, { file, fields: missing });
  }
}

interface StagedFile extends CsvStageResult {
  name: string;
  table: string;
  fileNo: number;
  bom: boolean;
  safraFromName: string | null;
}

/** The facts every load records, plus the ZARC-specific ones (kept in the report JSON). */
export interface ZarcFacts extends QualityFacts {
  zarc: {
    files: { name: string; rows: number; bad_rows: number; bom: boolean; fingerprint: string | null; columns: number; unknown: string[]; missing_optional: string[]; safra_from_name: string | null }[];
    seasons: Record<string, number>;
    perennial_rows: number;
    invalid_risk: { cells: number; rows: number; values: Record<string, number>; samples: { file: string; record: number; decendio: number; valor: string }[] };
    duplicates: { exact: number; conflicting: number; conflicting_keys: string[] };
    bad_codes: number;
    uf_mismatch: number;
    dedup_rule: string;
  };
}

const DEDUP_RULE = 'one row per chave; among copies the last read wins (files in name order, then rows in file order)';

const lit = (v: string | null) => (v === null ? 'NULL::text' : `'${v.replace(/'/g, "''")}'::text`);
const decNames = (prefix = '') => DECS.map((n) => `${prefix}dec${n}`).join(', ');

function typedUnion(files: StagedFile[]): string {
  const tpl = namedSql('queries/zarc_typed');
  const decs = DECS.map((n) => `etl.zarc_risco(s.dec${n}) AS dec${n}`).join(', ');
  const decKeys = DECS.map((n) => `'dec${n}'`).join(', ');
  const invalidJson = `(SELECT jsonb_object_agg('dec' || x.n, x.v) FROM unnest(ARRAY[${decNames('s.')}]) WITH ORDINALITY AS x(v, n) WHERE etl.zarc_risco_invalido(x.v))`;
  // Most rows hold only the common spellings: one array test per row spares them 36 checks.
  let common = `ARRAY[${decNames('s.')}]`;
  for (const v of ['0', '', '20', '30', '40']) common = `array_remove(${common}, '${v}')`;
  const invalid = `CASE WHEN cardinality(${common}) = 0 THEN 0 ELSE ${DECS.map((n) => `etl.zarc_risco_invalido(s.dec${n})::int`).join(' + ')} END`;
  return files
    .map((f) => render(tpl, { file_no: String(f.fileNo), stage: f.table, file_safra: lit(f.safraFromName), decs, invalid_cells: invalid, dec_keys: decKeys, invalid_json: invalidJson }))
    .join('\nUNION ALL\n');
}

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts: ZarcFacts = {
    ...emptyFacts(),
    zarc: {
      files: [], seasons: {}, perennial_rows: 0,
      invalid_risk: { cells: 0, rows: 0, values: {}, samples: [] },
      duplicates: { exact: 0, conflicting: 0, conflicting_keys: [] },
      bad_codes: 0, uf_mismatch: 0, dedup_rule: DEDUP_RULE,
    },
  };
  const ordered = [...files].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const client = await ctx.pool.connect();
  try {
    const staged = await ctx.stage(
      'read',
      async () => {
        // Every header first: a drifted file fails the run before any file is staged.
        const headers = await Promise.all(ordered.map((f) => readHeader(f.path)));
        ordered.forEach((f, i) => checkRequired(f.name, headers[i].names, headers[i].format));
        const out: StagedFile[] = [];
        for (const [i, f] of ordered.entries()) {
          const table = ctx.stagingTable(`f${i}`);
          const r = await stageCsv(client, table, f.path, ZARC_FIELDS, { delimiter: ';', columns: 'header', badRows: 'reject' });
          out.push({ ...r, name: f.name, table, fileNo: i, bom: headers[i].bom, safraFromName: safraFromName(f.name) });
        }
        return out;
      },
      (s) => s.reduce((a, f) => a + f.rows + f.badRows, 0),
      (s) => ({ files: s.map((f) => ({ name: f.name, rows: f.rows, bad_rows: f.badRows, fingerprint: f.fingerprint })) }),
    );

    const typed = ctx.stagingTable('typed');
    let okRows = 0;
    const stats: { file_no: number; verdict: string; safra: string | null; n: number; invalid_cells: number; invalid_rows: number; bad_code: number; replacement_char: number; uf_mismatch: number }[] = [];

    const table = await ctx.stage(
      'normalise',
      async () => {
        const ms: Record<string, number> = {};
        const timed = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
          const t0 = Date.now();
          const r = await fn();
          ms[name] = Date.now() - t0;
          return r;
        };
        await client.query(`SET work_mem = '256MB'`);
        // Every row typed once (the expressions are the expensive part), read by the next steps.
        await timed('type', () => client.query(`CREATE UNLOGGED TABLE ${typed} AS ${typedUnion(staged)}`));
        const st = await timed('stats', () => client.query(render(namedSql('queries/zarc_stats'), { typed })));
        stats.push(...(st.rows as typeof stats));
        addExamples(facts, await timed('examples', () => verdictExamples(client, typed)));
        okRows = stats.filter((s) => s.verdict === 'ok').reduce((a, s) => a + s.n, 0);
        const t = await target.table('zarc_risco');
        const built = await timed('snapshot', () => client.query(render(namedSql('queries/zarc_risco'), { target: t, typed, dec_names: decNames('t.'), snapshot_id: String(target.snapshotId) })));
        await assertSameShape(client, 'snap.zarc_risco__template', t);
        const rows = built.rowCount ?? 0;
        if (okRows > rows) {
          const d = (await timed('duplicates', () => client.query(render(namedSql('queries/zarc_duplicates'), { typed, dec_names: decNames('t.') })))).rows[0];
          facts.zarc.duplicates = { exact: Number(d.exact), conflicting: Number(d.conflicting), conflicting_keys: d.conflict_samples };
        }
        return { table: t, rows, ms };
      },
      (r) => r.rows,
      (r) => ({ ms: r.ms }),
    ).finally(() => client.query('RESET work_mem'));

    await ctx.stage('index', () =>
      indexSnapshotTable(client, table.table, { primaryKey: ['chave'], btree: [{ name: 'geo', columns: ['geocodigo', 'cultura'] }] }),
    );

    // Quality facts.
    const z = facts.zarc;
    for (const s of stats) {
      if (s.verdict !== 'ok') facts.rejected[s.verdict] = (facts.rejected[s.verdict] ?? 0) + s.n;
      z.invalid_risk.cells += s.invalid_cells;
      z.invalid_risk.rows += s.invalid_rows;
      z.bad_codes += s.bad_code;
      z.uf_mismatch += s.uf_mismatch;
      facts.encoding.replacementChars += s.replacement_char;
    }
    const badRows = staged.reduce((a, f) => a + f.badRows, 0);
    if (badRows) facts.rejected.bad_field_count = badRows;
    if (z.duplicates.exact) facts.dropped.duplicate_row = z.duplicates.exact;
    if (z.duplicates.conflicting) facts.dropped.conflicting_duplicate = z.duplicates.conflicting;

    if (z.invalid_risk.cells) {
      const raw = staged.map((f) => `SELECT ${f.fileNo}::integer AS file_no, src_seq, ${decNames()} FROM ${f.table}`).join('\nUNION ALL\n');
      const iv = await client.query(render(namedSql('queries/zarc_invalid_values'), { raw, dec_names: decNames('s.') }));
      for (const r of iv.rows) {
        if (r.kind === 'count') z.invalid_risk.values[r.valor] = Number(r.n);
        else z.invalid_risk.samples.push({ file: staged[r.file_no].name, record: Number(r.src_seq), decendio: r.decendio, valor: r.valor });
      }
    }
    const unparsed = await client.query(render(namedSql('queries/zarc_unparsed'), { typed }));
    for (const kind of ['unparsed', 'overflowed'] as const) {
      addCounts(facts, kind, Object.fromEntries(unparsed.rows.filter((r) => r.kind === kind).map((r) => [r.col, r.n])));
    }
    const seasons = await client.query(`SELECT safra, count(*)::bigint AS n FROM ${table.table} GROUP BY 1 ORDER BY 1`);
    for (const r of seasons.rows) z.seasons[r.safra] = Number(r.n);
    z.perennial_rows = z.seasons.perene ?? 0;
    facts.fields.empty = await countNulls(client, table.table, EMPTY_FIELDS);

    z.files = staged.map((f) => ({
      name: f.name, rows: f.rows, bad_rows: f.badRows, bom: f.bom, fingerprint: f.fingerprint, columns: f.header?.length ?? 0,
      unknown: f.unknown, missing_optional: f.missingOptional, safra_from_name: f.safraFromName,
    }));
    facts.fields.unknown = [...new Set(staged.flatMap((f) => f.unknown))];
    facts.fields.missingOptional = [...new Set(staged.flatMap((f) => f.missingOptional))];
    facts.encoding.name = [...new Set(staged.map((f) => csvEncodingName(f.format.encoding)))].join(', ');

    const n = facts.notes;
    n.push(`seasons loaded: ${Object.entries(z.seasons).map(([s, c]) => `${s} (${c} rows)`).join(', ') || 'none'}`);
    if (z.perennial_rows) n.push(`${z.perennial_rows} perennial / no-season rows loaded with safra = 'perene'`);
    if (z.invalid_risk.cells) {
      n.push(`${z.invalid_risk.cells} risk cells in ${z.invalid_risk.rows} rows are not 20/30/40/0/empty (loaded as NULL, text kept in extra): ${Object.entries(z.invalid_risk.values).map(([v, c]) => `"${v}" × ${c}`).join(', ')}`);
    }
    if (z.duplicates.exact) n.push(`${z.duplicates.exact} exact duplicate rows dropped`);
    if (z.duplicates.conflicting) n.push(`${z.duplicates.conflicting} rows share a key with different risk cells; ${DEDUP_RULE}; e.g. ${z.duplicates.conflicting_keys.slice(0, 3).join(' ; ')}`);
    if (z.bad_codes) n.push(`${z.bad_codes} rows have a non-numeric optional code (cod_cultura, manejo, cod_clima, cod_meso or cod_micro), loaded as NULL, text kept in extra`);
    if (facts.fields.overflowed) n.push(`overflowed codes (asterisks, no value) per column: ${JSON.stringify(facts.fields.overflowed)}`);
    if (z.uf_mismatch) n.push(`${z.uf_mismatch} rows have a UF that does not match their geocodigo`);
    if (facts.encoding.replacementChars) n.push(`${facts.encoding.replacementChars} rows hold U+FFFD: a file is probably not UTF-8`);
    for (const f of z.files) {
      if (!f.bom) n.push(`${f.name} has no UTF-8 BOM (the official files have one)`);
      if (f.unknown.length) n.push(`${f.name}: unknown columns kept in extra: ${f.unknown.join(', ')}`);
    }

    const rowsRead = staged.reduce((a, f) => a + f.rows + f.badRows, 0);
    const fps = [...new Set(staged.map((f) => f.fingerprint ?? ''))].sort();
    return {
      rowsRead,
      rowsLoaded: table.rows,
      rowsRejected: sum(facts.rejected),
      facts,
      fingerprint: fps.length === 1 ? fps[0] : createHash('sha256').update(fps.join(',')).digest('hex').slice(0, 16),
    };
  } finally {
    client.release();
  }
}

export const zarc: Pipeline & { key: string } = {
  name: 'zarc',
  scopedByUf: false,
  relations: ['zarc_risco'],
  mainRelation: 'zarc_risco',
  key: 'chave',
  fetch: fetchZarc,
  async releaseDate(_ctx, files) {
    // The newest Last-Modified of the season files.
    return files.map(lastModifiedDay).filter((d): d is string => d !== null).sort().at(-1) ?? null;
  },
  load,
};
