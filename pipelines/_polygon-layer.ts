// A national polygon layer published as one zip holding one shapefile (FUNAI indigenous
// lands, CNUC conservation units, INCRA quilombola areas). Each pipeline declares its
// source file, its field aliases and its named SQL; this module does the rest the same
// way for all of them:
//
//   download  --source (zip, folder holding the official file name, file:// or http(s)
//             URL, or a URL prefix the official name is joined to) or the configured source
//   read      unzip (searching sub-folders and zips inside the zip), stage every shapefile
//             through COPY with alias-mapped text columns; a missing required column fails
//             here, before anything is loaded
//   normalise repair invalid polygons row by row; `layer_classify` gives each row a verdict
//             (kept, rejected with a reason, or a duplicate key; the key and the update date
//             that decides between copies are the pipeline's) and its final geometry
//             (repaired, polygonal, 2D, EPSG:4326, multi); `layer_build` creates the typed
//             snapshot table with exactly the template's columns, the pipeline's own typed
//             columns coming from `<p>_build`
//   index     primary key on the key, GiST on geom, GIN on array columns, ANALYZE
//
// Quality facts: verdict counts (rejected / dropped.duplicate_key), repairs, empty values,
// unparseable dates, numbers and flags that did not parse (fields.unparsed: NULL, text kept
// in `extra`), overflowed cells (fields.overflowed: a run of asterisks is no value, counted
// from the DBF bytes for numeric fields, which GDAL reads as NULL, and from the staged text
// for the others; an overflowed key is no key), dates after the release date (contract §3:
// dates.implausible, set to NULL with their text kept in `extra`), unknown columns (kept in
// `extra`), and U+FFFD occurrences in every staged text (a gate failure where the source
// section says so, e.g. FUNAI §4.2).
import fs from 'node:fs';
import path from 'node:path';
import type pg from 'pg';
import { AgroError } from '../src/errors.ts';
import { ident } from '../src/db/pool.ts';
import type { ZipLimits } from '../src/etl/archive.ts';
import { encodingNotes, layersFromZip } from '../src/etl/layers.ts';
import { isHttp, joinSource, localPath, type FetchedFile } from '../src/etl/download.ts';
import { countShapefileOverflows } from '../src/etl/dbf-overflow.ts';
import { checkSnapshotTable, countNulls, countVerdicts, indexSnapshotTable, releaseDateLiteral } from '../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../src/etl/pipeline.ts';
import { addCounts, addLayerFacts, addRepairFacts, addVerdicts, describeLayer, emptyFacts, sum, type QualityFacts } from '../src/etl/quality.ts';
import { repairInvalidPolygons } from '../src/etl/repair.ts';
import { fetchOneFile, isoDay, lastModifiedDay } from '../src/etl/source-files.ts';
import { stageLayers, type FieldSpec } from '../src/etl/stage-vector.ts';
import type { LayerDefaults, VectorLayer } from '../src/etl/vector-reader.ts';
import { namedSql, render } from '../src/sql.ts';

export interface LayerField extends FieldSpec {
  /** Staged so that it stays out of `extra`, then not loaded (e.g. FUNAI's always-zero `epsg`). */
  drop?: boolean;
}

/** Placeholders every named SQL file of a polygon layer may use. */
export type LayerSqlVars = {
  stage: string;
  fix: string;
  /** Fallback keys (src_seq, codigo, origem) when the layer declares classify.fallbackKeys; else never created. */
  keys: string;
  classified: string;
  target: string;
  snapshot_id: string;
};

export interface LayerCheckContext {
  client: pg.ClientBase;
  vars: LayerSqlVars;
  facts: QualityFacts;
  rowsLoaded: number;
}

export interface PolygonLayerSpec {
  /** Pipeline name (contract §2). */
  name: string;
  /** snap.<relation>__template / current.<relation>. */
  relation: string;
  /** Canonical staging fields with every known spelling (lower case). */
  fields: LayerField[];
  source: {
    /** The official file name: looked for in a --source folder, joined to a URL prefix, used to store a service response. */
    fileName: string;
    /** Other names the file is published under in a folder (the newest by name wins), e.g. /^shp_cnuc_\d{4}_\d{2}\.zip$/i. */
    pattern?: RegExp;
    /** The publisher's release date carried by the file name (yyyy-mm-dd), when it has one. */
    releaseDate?: (fileName: string) => string | null;
  };
  /** How queries/layer_classify keys and deduplicates the staged rows: SQL over the staged row `s`. */
  classify: {
    /** The key (codigo); a NULL key rejects the row ('no_key'). */
    key: string;
    /** The row's update date: among copies of a key the latest wins, then the one read last. Without it, the one read last. */
    newest?: string;
    /**
     * Named SQL creating {{keys}} (src_seq, codigo, origem): a stable key for rows whose own key
     * is missing or overflowed, used when `key` is NULL (see incra_keys.sql). Also joined in the
     * build as `k`.
     */
    fallbackKeys?: string;
  };
  /** Named SQL (without the .sql) of the layer's own snapshot columns: the sections queries/layer_build renders. */
  build: string;
  /** Staging columns checked on kept rows; failures load as NULL and are reported. */
  checks: {
    dates?: { column: string; kind: 'etl.date_kind' | 'etl.date_dmy_iso_kind' }[];
    numbers?: string[];
    flags?: string[];
  };
  /** Snapshot columns whose NULLs are counted in the report. */
  emptyColumns: string[];
  /** Array columns indexed with GIN for containment filters (ufs @> '{MT}'). */
  ginColumns?: string[];
  /** Other columns indexed with a btree. */
  btreeColumns?: string[];
  /** U+FFFD in the source text fails the gate (SOURCES §4.2 for FUNAI). */
  failOnReplacementChars?: boolean;
  /** Pipeline-specific facts and gate failures, run after the snapshot table is built. */
  extraChecks?: (c: LayerCheckContext) => Promise<void>;
}

export type PolygonLayerPipeline = Pipeline & { key: string; spec: PolygonLayerSpec };

/** The layers' own encoding comes from the .cpg; these sources are all UTF-8 (SOURCES §1.9). */
const LAYER_DEFAULTS: LayerDefaults = { srid: 4674 };
const MAX_ZIP_DEPTH = 3;
const KEY = 'codigo';

const nfc = (s: string) => s.normalize('NFC');

// ---------- download ----------

/** The zip to take from a folder: the official name (Unicode- and case-insensitive), then the newest pattern match, then the only zip. */
export function pickFromFolder(dir: string, spec: PolygonLayerSpec['source']): string {
  const zips = fs.readdirSync(dir, { withFileTypes: true }).filter((e) => e.isFile() && /\.zip$/i.test(e.name)).map((e) => e.name).sort();
  const wanted = nfc(spec.fileName).toLowerCase();
  const exact = zips.find((z) => nfc(z).toLowerCase() === wanted);
  if (exact) return exact;
  const matching = spec.pattern ? zips.filter((z) => spec.pattern!.test(nfc(z))) : [];
  if (matching.length) return matching[matching.length - 1];
  if (zips.length === 1) return zips[0];
  throw new AgroError('source_not_found', `${dir} holds no ${spec.fileName}${zips.length ? ` (zips there: ${zips.join(', ')})` : ''}`);
}

function lastSegment(url: URL): string {
  const last = url.pathname.split('/').pop() ?? '';
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** Where to download from and under which name to keep the file in the raw store. */
export function resolveSource(src: string, spec: PolygonLayerSpec['source']): { uri: string; name: string } {
  if (isHttp(src)) {
    const url = new URL(src);
    const last = lastSegment(url);
    if (/\.zip$/i.test(last)) return { uri: src, name: nfc(last) };
    // A service request (FUNAI's WFS GetFeature … outputFormat=SHAPE-ZIP) answers with the zip itself.
    if (url.search) return { uri: src, name: spec.fileName };
    return { uri: joinSource(src, spec.fileName), name: spec.fileName };
  }
  const local = localPath(src);
  let st: fs.Stats;
  try {
    st = fs.statSync(local);
  } catch {
    throw new AgroError('source_not_found', `${local}: no such file or folder`);
  }
  if (st.isDirectory()) {
    const name = pickFromFolder(local, spec);
    return { uri: path.join(local, name), name: nfc(name) };
  }
  return { uri: local, name: nfc(path.basename(local)) };
}

async function fetchLayer(ctx: RunContext, spec: PolygonLayerSpec): Promise<FetchedFile[]> {
  const src = ctx.options.source ?? ctx.cfg.sources[spec.name];
  if (!src) {
    const env = `AGRO_SOURCE_${spec.name.toUpperCase().replace(/-/g, '_')}`;
    throw new AgroError('usage', `${spec.name} has no configured source: pass --source <zip, folder or URL> or set ${env}`);
  }
  const { uri, name } = resolveSource(src, spec.source);
  return fetchOneFile(ctx, uri, { expect: 'zip', name });
}

/** File-name date, then Last-Modified, then the local file's modification time (a manual drop). */
async function releaseDate(spec: PolygonLayerSpec, files: FetchedFile[]): Promise<string | null> {
  const f = files[0];
  if (!f) return null;
  const named = spec.source.releaseDate?.(f.name) ?? null;
  if (named) return named;
  const modified = lastModifiedDay(f);
  if (modified) return modified;
  if (!isHttp(f.sourceUri)) {
    try {
      return isoDay(fs.statSync(localPath(f.sourceUri)).mtime);
    } catch {
      return null;
    }
  }
  return null;
}

// ---------- read ----------

/** Every shapefile in the zip, in sub-folders or in zips inside it (up to MAX_ZIP_DEPTH levels). */
export async function layersFromNestedZip(zipPath: string, workDir: string, limits: ZipLimits): Promise<VectorLayer[]> {
  return layersFromZip(zipPath, workDir, { srid: LAYER_DEFAULTS.srid, limits, maxDepth: MAX_ZIP_DEPTH });
}

// ---------- quality ----------

async function countReplacementChars(client: pg.ClientBase, stage: string, fields: LayerField[]): Promise<Record<string, number>> {
  const cols = [...fields.map((f) => f.name), 'extra'];
  const expr = (c: string) => (c === 'extra' ? `etl.replacement_chars(extra::text)` : `etl.replacement_chars(${ident(c)})`);
  const r = await client.query(`SELECT ${cols.map((c) => `coalesce(sum(${expr(c)}), 0)::int AS ${ident(c)}`).join(', ')} FROM ${stage}`);
  return Object.fromEntries(Object.entries(r.rows[0] as Record<string, number>).filter(([, n]) => n > 0));
}

async function fieldChecks(client: pg.ClientBase, vars: LayerSqlVars, spec: PolygonLayerSpec, facts: QualityFacts) {
  const parts: string[] = [];
  for (const d of spec.checks.dates ?? []) {
    const c = ident(d.column);
    parts.push(`count(*) FILTER (WHERE ${d.kind}(s.${c}) = 'bad')::int AS ${ident(`date_bad:${d.column}`)}`);
    parts.push(`count(*) FILTER (WHERE ${d.kind}(s.${c}) = 'placeholder')::int AS ${ident(`date_placeholder:${d.column}`)}`);
  }
  for (const n of spec.checks.numbers ?? []) {
    const c = `s.${ident(n)}`;
    parts.push(`count(*) FILTER (WHERE btrim(${c}) <> '' AND etl.parse_number(${c}) IS NULL AND NOT etl.is_overflow(${c}))::int AS ${ident(`number:${n}`)}`);
  }
  for (const f of spec.checks.flags ?? []) {
    const c = `s.${ident(f)}`;
    parts.push(`count(*) FILTER (WHERE btrim(${c}) <> '' AND etl.parse_flag(${c}) IS NULL)::int AS ${ident(`flag:${f}`)}`);
  }
  if (!parts.length) return;
  const r = await client.query(`SELECT ${parts.join(', ')} FROM ${vars.classified} c JOIN ${vars.stage} s ON s.src_seq = c.src_seq WHERE c.verdict = 'ok'`);
  for (const [k, v] of Object.entries(r.rows[0] as Record<string, number>)) {
    if (!v) continue;
    const [kind, col] = k.split(':');
    if (kind === 'date_bad') facts.dates.unparseable[col] = v;
    else if (kind === 'date_placeholder') facts.dates.placeholders[col] = v;
    else if (kind === 'number') {
      facts.notes.push(`${col}: ${v} value(s) are not numbers (loaded as NULL, source text kept in extra)`);
      addCounts(facts, 'unparsed', { [col]: v });
    } else {
      facts.notes.push(`${col}: ${v} value(s) are not yes/no flags (loaded as NULL, source text kept in extra)`);
      addCounts(facts, 'unparsed', { [col]: v });
    }
  }
}

/** Overflowed cells: numeric DBF fields from the bytes (GDAL reads them as NULL), other staged text by etl.is_overflow. */
async function overflowCounts(client: pg.ClientBase, stage: string, layers: VectorLayer[], fields: LayerField[]): Promise<Record<string, number>> {
  const canonical = (src: string) => fields.find((f) => f.aliases.includes(src))?.name ?? src;
  const out: Record<string, number> = {};
  for (const l of layers) {
    for (const [src, n] of Object.entries(await countShapefileOverflows(l.file))) out[canonical(src)] = (out[canonical(src)] ?? 0) + n;
  }
  const cols = fields.map((f) => f.name);
  const r = await client.query(`SELECT ${cols.map((c) => `count(*) FILTER (WHERE etl.is_overflow(${ident(c)}))::int AS ${ident(c)}`).join(', ')} FROM ${stage}`);
  for (const [c, n] of Object.entries(r.rows[0] as Record<string, number>)) if (n) out[c] = (out[c] ?? 0) + n;
  return out;
}

/**
 * Contract §3: a date after the release date is implausible. Declared date columns of the
 * built snapshot later than it become NULL, their source text kept in `extra`; counts per column.
 */
async function nullFutureDates(client: pg.ClientBase, vars: LayerSqlVars, spec: PolygonLayerSpec, releaseDate: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const d of spec.checks.dates ?? []) {
    const c = ident(d.column);
    const r = await client.query(
      `UPDATE ${vars.target} t SET ${c} = NULL, extra = coalesce(t.extra, '{}'::jsonb) || jsonb_build_object(${client.escapeLiteral(d.column)}, s.${c})
         FROM ${vars.classified} x JOIN ${vars.stage} s ON s.src_seq = x.src_seq
        WHERE x.verdict = 'ok' AND x.codigo = t.codigo AND t.${c} > ${releaseDate}`,
    );
    if (r.rowCount) out[d.column] = r.rowCount;
  }
  return out;
}

// ---------- load ----------

const BUILD_SECTIONS = ['columns', 'unparsed', 'joins'] as const;
type BuildParts = Record<(typeof BUILD_SECTIONS)[number], string>;

/**
 * The sections of a layer's build SQL (`-- @columns`, `-- @unparsed`, `-- @joins`, each on a
 * line of its own; text before the first one is its header comment), for queries/layer_build.
 */
export function buildParts(name: string): BuildParts {
  const parts: BuildParts = { columns: '', unparsed: '', joins: '' };
  const chunks = namedSql(name).split(/^-- @(\w+)[ \t]*$/m);
  for (let i = 1; i < chunks.length; i += 2) {
    const section = chunks[i] as keyof BuildParts;
    if (!BUILD_SECTIONS.includes(section)) throw new Error(`${name}.sql: unknown section @${section}`);
    const text = chunks[i + 1].replace(/^\n+|\s+$/g, '');
    // The template follows a section with a comma or a parenthesis on the same line.
    if (text.split('\n').at(-1)!.includes('--')) throw new Error(`${name}.sql: @${section} ends with a comment`);
    parts[section] = text;
  }
  if (!parts.columns) throw new Error(`${name}.sql: no @columns section`);
  return parts;
}

async function load(ctx: RunContext, spec: PolygonLayerSpec, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const client = await ctx.pool.connect();
  try {
    const staged = await ctx.stage(
      'read',
      async () => {
        const layers = await layersFromNestedZip(files[0].path, ctx.workDir, ctx.cfg.zip);
        const stage = ctx.stagingTable('src');
        return { layers, stage, ...(await stageLayers(client, stage, layers, spec.fields)) };
      },
      (s) => s.rows,
      (s) => ({ layers: s.layers.map(describeLayer), unknown: s.unknown }),
    );

    const vars: LayerSqlVars = {
      stage: staged.stage,
      fix: ctx.stagingTable('fix'),
      keys: ctx.stagingTable('keys'),
      classified: ctx.stagingTable('cls'),
      target: '',
      snapshot_id: String(target.snapshotId),
    };
    const built = await ctx.stage(
      'normalise',
      async () => {
        const repair = await repairInvalidPolygons(client, vars.stage, vars.fix, ctx.cfg.repairTimeoutMs);
        // An overflowed key ('**********') is no key; a declared fallback then gives a stable one.
        let key = `CASE WHEN NOT etl.is_overflow(${spec.classify.key}) THEN ${spec.classify.key} END`;
        let keyJoin = '';
        if (spec.classify.fallbackKeys) {
          await client.query(render(namedSql(spec.classify.fallbackKeys), vars));
          key = `coalesce(${key}, k.codigo)`;
          keyJoin = `LEFT JOIN ${vars.keys} k ON k.src_seq = s.src_seq`;
        }
        await client.query(render(namedSql('queries/layer_classify'), { ...vars, key, key_join: keyJoin, newest: spec.classify.newest ?? 'NULL::date' }));
        const verdicts = await countVerdicts(client, vars.classified, vars.stage);
        vars.target = await target.table(spec.relation);
        // The layer's sections may name staging tables too ({{keys}}): rendered before insertion.
        const parts = Object.fromEntries(Object.entries(buildParts(spec.build)).map(([k, v]) => [k, render(v, vars)]));
        await client.query(render(namedSql('queries/layer_build'), { ...vars, ...parts }));
        const future = await nullFutureDates(client, vars, spec, await releaseDateLiteral(client, target.snapshotId));
        const rows = await checkSnapshotTable(client, spec.relation, vars.target);
        return { repair, verdicts, rows, future };
      },
      (r) => r.rows,
      (r) => ({ verdicts: r.verdicts, repair: r.repair }),
    );

    await ctx.stage('index', () =>
      indexSnapshotTable(client, vars.target, { primaryKey: [KEY], gist: ['geom'], gin: spec.ginColumns, btree: spec.btreeColumns }),
    );

    // Verdicts: duplicates are dropped by design, everything else not kept is rejected.
    addVerdicts(facts, built.verdicts, { dropped: ['duplicate_key'] });
    addRepairFacts(facts, built.repair);
    facts.geometry.empty = facts.rejected.no_geometry ?? 0;
    facts.geometry.outsideBrazil = facts.rejected.outside_brazil ?? 0;
    addLayerFacts(facts, staged.layers);
    const dropped = new Set(spec.fields.filter((f) => f.drop).map((f) => f.name));
    facts.fields.missingOptional = staged.missingOptional.filter((n) => !dropped.has(n));
    facts.fields.unknown = staged.unknown;
    if (staged.layers.length > 1) facts.notes.push(`${staged.layers.length} shapefiles in the zip, loaded together: ${staged.layers.map((l) => l.name).join(', ')}`);
    if (facts.geometry.sridAssumed) facts.notes.push(`a layer had no .prj: EPSG:${LAYER_DEFAULTS.srid} (SIRGAS 2000) assumed`);
    facts.notes.push(...encodingNotes(staged.layers));
    if (staged.unknown.length) ctx.log.warn({ columns: staged.unknown }, 'source columns without a mapping, kept in extra');

    facts.fields.empty = await countNulls(client, vars.target, spec.emptyColumns);
    await fieldChecks(client, vars, spec, facts);
    addCounts(facts, 'implausible', built.future);
    if (facts.dates.implausible) facts.notes.push(`dates after the release date loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
    addCounts(facts, 'overflowed', await overflowCounts(client, vars.stage, staged.layers, spec.fields));
    if (facts.fields.overflowed) facts.notes.push(`overflowed cells (a run of asterisks: no value, loaded as NULL) per field: ${JSON.stringify(facts.fields.overflowed)}`);

    const fffd = await countReplacementChars(client, vars.stage, spec.fields);
    const fffdTotal = sum(fffd);
    facts.encoding.replacementChars = fffdTotal;
    if (fffdTotal > 0) {
      const where = Object.entries(fffd).map(([c, n]) => `${c} ${n}`).join(', ');
      facts.notes.push(`U+FFFD replacement characters per field: ${where}`);
      if (spec.failOnReplacementChars) {
        facts.failures.push({
          rule: 'replacement_characters',
          message: `${fffdTotal} U+FFFD replacement characters in the source text (${where}): accents were lost before publication`,
          value: fffdTotal,
          threshold: 0,
        });
      }
    }
    if (spec.extraChecks) await spec.extraChecks({ client, vars, facts, rowsLoaded: built.rows });

    return {
      rowsRead: staged.rows,
      rowsLoaded: built.rows,
      rowsRejected: sum(facts.rejected),
      facts,
      fingerprint: staged.fingerprint,
    };
  } finally {
    client.release();
  }
}

/** A pipeline (contract §2) for one national polygon layer described by `spec`. */
export function polygonLayerPipeline(spec: PolygonLayerSpec): PolygonLayerPipeline {
  return {
    name: spec.name,
    scopedByUf: false,
    relations: [spec.relation],
    mainRelation: spec.relation,
    key: KEY,
    spec,
    fetch: (ctx) => fetchLayer(ctx, spec),
    releaseDate: (_ctx, files) => releaseDate(spec, files),
    load: (ctx, files, target) => load(ctx, spec, files, target),
  };
}

/** Rows named in a check query `SELECT name, n …`, as `"A" (2), "B" (1)` for messages. */
export function describeCounts(rows: { name: string; n: number }[]): string {
  return rows.map((r) => `"${r.name}" (${r.n})`).join(', ');
}
