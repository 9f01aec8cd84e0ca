// SICAR (CAR rural registry), one state per run: <UF>_AREA_IMOVEL.zip (required) and
// the optional theme zips APPS, RESERVA_LEGAL, AREA_CONSOLIDADA, in the layout of the
// official per-state download. See SOURCES.md §2 and contract §2b/§3.
//
// Themes in the older per-municipality layout (fields IDF, NOM_TEMA, NUM_AREA; no
// cod_imovel, no cod_tema) do not sink the state: the properties load, and each polygon of
// such a layer is linked to the property of this snapshot whose polygon contains the theme
// polygon's point-on-surface, when exactly one does (sql/queries/sicar_theme_link.sql).
// No property or several (overlapping self-declared properties) → not linked: counted
// (facts.dropped '<theme>:not_linked_*', facts.temas_sem_imovel) and not loaded. A theme of
// which no polygon could be linked is treated as not loaded (its areas NULL, with a note).
// Without cod_tema, APPS polygons count as detailed APP polygons (the union never double counts).
//
// Dates after the release date (data_inscricao, data_atualizacao) are NULL, their text kept
// in `extra` (contract §3); numbers that do not parse are NULL, their text kept in `extra`.
import type pg from 'pg';
import { AgroError } from '../../src/errors.ts';
import { countShapefileOverflows } from '../../src/etl/dbf-overflow.ts';
import { fetchSource, joinSource, type FetchedFile } from '../../src/etl/download.ts';
import { encodingNotes, layersFromZip, readerNote } from '../../src/etl/layers.ts';
import { checkSnapshotTable, countNulls, countVerdicts } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addCounts, addRepairFacts, addVerdicts, describeLayer, emptyFacts, sum } from '../../src/etl/quality.ts';
import { repairInPlace, type RepairResult } from '../../src/etl/repair.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { stageLayers, type FieldSpec, type LayerStageResult } from '../../src/etl/stage-vector.ts';
import { stepTimer } from '../../src/etl/steps.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { tableName, type Sql } from '../../src/sql.ts';
import {
  NO_LINK, buildFromTyped, createThemeArea, indexThemeArea, keptThemeRows, linkProperties, linkTheme, orphanThemePolygons, tableBytes, propertyFacts, themeAreaPart, themeLink,
  typeProperties, typeTheme, winningProperties, type PropertyFacts, type ThemeLink,
} from './queries.ts';
import { indexSnapshotTables, indexTasks, onTwoConnections, overlapOn, type Overlap } from './two-connections.ts';
import { CAR_IMOVEL, CAR_TEMA } from './relations.ts';
import { addWfsFacts, fetchWfsState, isWfsManifest, sicarRoute, sicarSourceInfo, stageWfsAreaImovel, type WfsStaged } from './wfs-route.ts';

export { CAR_IMOVEL, CAR_TEMA } from './relations.ts';

export const THEMES = ['APPS', 'RESERVA_LEGAL', 'AREA_CONSOLIDADA'] as const;
export type Theme = (typeof THEMES)[number];

/** AREA_IMOVEL's staging fields (canonical name ← every known spelling: state zip, legacy municipal layout, WFS). */
export const PROPERTY_FIELDS: FieldSpec[] = CAR_IMOVEL.staging;
/** The themes' staging fields: cod_imovel and cod_tema are checked per layer (checkThemeLayers). */
export const THEME_FIELDS: FieldSpec[] = CAR_TEMA.staging;

const DEFAULT_SRID = 4674;

const themeOf = (f: FetchedFile) => isWfsManifest(f) ? 'AREA_IMOVEL' : (/_(AREA_IMOVEL|APPS|RESERVA_LEGAL|AREA_CONSOLIDADA)\.zip$/i.exec(f.name)?.[1] ?? '').toUpperCase();

async function fetchState(ctx: RunContext): Promise<FetchedFile[]> {
  const uf = ctx.scope;
  // Route B (WFS, AREA_IMOVEL only) or route A (zips, themes included): see wfs-route.ts.
  const route = sicarRoute(ctx);
  if (route.kind === 'wfs') return fetchWfsState(ctx, route.endpoint);
  const base = route.base;
  const common = { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, expect: 'zip' as const, zipLimits: ctx.cfg.zip, log: (m: string) => ctx.log.info(m), agentOptions: { ciphers: 'DEFAULT:@SECLEVEL=1' } };
  const files: FetchedFile[] = [];
  const main = await fetchSource(joinSource(base, `${uf}_AREA_IMOVEL.zip`), common);
  if (!main) throw new AgroError('source_not_found', `${uf}_AREA_IMOVEL.zip`);
  files.push(main);
  for (const theme of THEMES) {
    const f = await fetchSource(joinSource(base, `${uf}_${theme}.zip`), { ...common, optional: true });
    if (f) files.push(f);
  }
  return files;
}

/** One input of the state (AREA_IMOVEL or a theme): its staging table (repairs in place) and its typed pass. */
interface StagedInput {
  theme: string;
  /** Layers without cod_imovel (older per-municipality layout): linked to properties spatially. */
  unkeyedLayers: string[];
  stage: Sql;
  typed: Sql;
  layers: VectorLayer[];
  rows: number;
  repair: RepairResult;
  unknown: string[];
  missingOptional: string[];
  replacementChars: number;
  fingerprint: string;
  /** The reader's result (zips): which reader, deleted records, overflowed cells. */
  read?: LayerStageResult;
  /** Set when AREA_IMOVEL came by the WFS route. */
  wfs?: WfsStaged;
}

async function stageInput(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, theme: string): Promise<StagedInput> {
  const name = theme.toLowerCase();
  const stage = tableName(ctx.stagingTable(name));
  const specs = theme === 'AREA_IMOVEL' ? PROPERTY_FIELDS : THEME_FIELDS;
  const staged = isWfsManifest(file) ? await stageWfs(ctx, client, file, stage, specs) : await stageZip(ctx, client, file, theme, stage, specs);
  return { theme, unkeyedLayers: [], stage, typed: tableName(ctx.stagingTable(`${name}_typed`)), repair: { invalid: 0, repaired: 0, rejected: 0, empty: 0 }, ...staged };
}

async function stageZip(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, theme: string, stage: Sql, specs: FieldSpec[]) {
  const layers = await layersFromZip(file.path, ctx.workDir, { srid: DEFAULT_SRID, limits: ctx.cfg.zip });
  // Checked before staging: a theme layer without cod_imovel (older layout) is linked spatially later.
  const unkeyedLayers = theme === 'AREA_IMOVEL' ? [] : checkThemeLayers(theme, layers);
  const read = await stageLayers(client, stage, layers, specs);
  return { layers, unkeyedLayers, ...read, read };
}

async function stageWfs(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, stage: Sql, specs: FieldSpec[]) {
  const wfs = await stageWfsAreaImovel(ctx, client, file, stage, specs);
  return { layers: [wfs.layer], rows: wfs.rows, missingOptional: wfs.missingOptional, unknown: wfs.unknown, replacementChars: wfs.replacementChars, fingerprint: wfs.fingerprint, wfs };
}

/**
 * A theme layer with cod_imovel must have cod_tema (the current layout); one without
 * cod_imovel is the older per-municipality layout, linked spatially. Returns those layers.
 */
export function checkThemeLayers(theme: string, layers: VectorLayer[]): string[] {
  const unkeyed: string[] = [];
  for (const l of layers) {
    const names = new Set(l.fields.map((f) => f.name));
    if (!names.has('cod_imovel')) unkeyed.push(l.name);
    else if (!names.has('cod_tema')) {
      throw new AgroError('required_field_missing', `${l.name} (${theme}) has cod_imovel but no cod_tema`, { layer: l.name, field: 'cod_tema' });
    }
  }
  return unkeyed;
}

/** The typed table holds the repair status from here on; the staged row goes back to what was read (as the report's examples show it). */
const dropRepairColumn = (client: pg.ClientBase, stage: Sql) => client.query(`ALTER TABLE ${stage} DROP COLUMN repair`);

/** What the typed pass of one input gives the facts: its verdict counts, and for a theme with layers without cod_imovel, their links. */
interface TypedInput {
  verdicts: Record<string, number>;
  linked?: UnkeyedThemeFacts;
  /** AREA_IMOVEL's counted facts (dates, numbers, unknown codes). */
  properties?: PropertyFacts;
}

/** Other-state rows and theme polygons that could not be linked to one property are dropped by design (counted); the rest of what is not kept is rejected. */
const DROPPED_VERDICTS = ['other_state', 'not_linked_no_property', 'not_linked_ambiguous'];

/** What happened to the polygons of theme layers without cod_imovel (facts.temas_sem_imovel). */
interface UnkeyedThemeFacts {
  layers: string[];
  vinculados: number;
  sem_imovel: number;
  ambiguos: number;
  regra: string;
}
const LINK_RULE = 'linked to the property whose polygon contains the theme polygon\'s point-on-surface, when exactly one does; none or several: not linked, not loaded';

/** Overflowed numeric cells per input and canonical field: counted by the streaming reader as it read (GDAL-read layers: one pass over their DBF). */
async function overflowedCells(s: StagedInput): Promise<Record<string, number>> {
  const specs = s.theme === 'AREA_IMOVEL' ? PROPERTY_FIELDS : THEME_FIELDS;
  const out: Record<string, number> = {};
  for (const l of s.layers) {
    if (!s.read) continue;
    const counted = s.read.overflowed ? (s.read.overflowed[l.name] ?? {}) : await countShapefileOverflows(l.file);
    for (const [k, n] of Object.entries(counted)) {
      const key = `${s.theme.toLowerCase()}:${specs.find((f) => f.aliases.includes(k))?.name ?? k}`;
      out[key] = (out[key] ?? 0) + n;
    }
  }
  return out;
}

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const client = await ctx.pool.connect();
  const uf = ctx.scope!;
  // The typed passes that overlap the read (a second connection): abandoned on any failure.
  const typing: { ov: Overlap<StagedInput, TypedInput> | null } = { ov: null };
  try {
    const steps = stepTimer(client);
    const unkeyed: Record<string, UnkeyedThemeFacts> = {};
    const loadedThemes: StagedInput[] = [];
    // One typed pass per input (repairs, verdict, typed columns, counted facts, from the staged
    // rows alone; then its staging table is dropped): each starts on a second connection as
    // soon as its input is staged, while the next zip is read on this one, so both cores work.
    // Themes of the older layout (no cod_imovel) are linked to the typed properties: they wait
    // for AREA_IMOVEL's typed pass (read first, taken first) and the linking table.
    const properties = tableName(ctx.stagingTable('link_properties'));
    const mainDone = settledLater();
    let linking: Promise<void> | null = null;
    const propertiesLinked = (c: pg.ClientBase) => (linking ??= mainDone.promise.then(() => steps.time('link properties', () => linkProperties(c, { properties, typed: staged[0].typed }))));
    const typeInput = async (c: pg.ClientBase, t: StagedInput, live: () => void): Promise<TypedInput> => {
      if (t.theme !== 'AREA_IMOVEL') return typeOne(c, t, live);
      // Themes linked spatially wait for this one: they fail with it.
      try {
        const r = await typeOne(c, t, live);
        mainDone.resolve();
        return r;
      } catch (e) {
        mainDone.reject(e);
        throw e;
      }
    };
    const typeOne = async (c: pg.ClientBase, t: StagedInput, live: () => void): Promise<TypedInput> => {
      // Alone (no theme): the validity scan is split over two connections, the reader being done.
      const split = files.length === 1;
      await steps.time(`repair ${t.theme}`, async () => {
        t.repair = await repairInPlace(c, t.stage, ctx.cfg.repairTimeoutMs, split ? { pool: ctx.pool } : {});
      });
      live();
      let link: ThemeLink = NO_LINK;
      let unkeyedFacts: UnkeyedThemeFacts | undefined;
      if (t.theme === 'AREA_IMOVEL') {
        await steps.time('typed AREA_IMOVEL', () => typeProperties(c, { typed: t.typed, stage: t.stage, uf, asOf: target.asOf }));
      } else {
        if (t.unkeyedLayers.length) {
          await propertiesLinked(c);
          live();
          const links = tableName(ctx.stagingTable(`${t.theme.toLowerCase()}_links`));
          const n = await steps.time(`link ${t.theme}`, () => linkTheme(c, { links, stage: t.stage, properties, layers: t.unkeyedLayers }));
          unkeyedFacts = { layers: t.unkeyedLayers, ...n, regra: LINK_RULE };
          link = themeLink(links, t.unkeyedLayers);
          live();
        }
        await steps.time(`typed ${t.theme}`, () => typeTheme(c, { typed: t.typed, stage: t.stage, uf, tema: t.theme, link }));
      }
      live();
      await dropRepairColumn(c, t.stage);
      const verdicts = await countVerdicts(c, t.typed, t.stage);
      // What the facts count of the properties, from their typed table (one scan), while the themes are read.
      const counted = t.theme === 'AREA_IMOVEL' ? await steps.time('facts AREA_IMOVEL', () => propertyFacts(c, t.typed)) : undefined;
      // A theme's staged rows are read no more: dropped here, while the other connection works,
      // rather than with the run's cleanup (about 1 s a dropped table at 200,000 properties).
      if (t.theme !== 'AREA_IMOVEL') await c.query(`DROP TABLE ${t.stage}`);
      return { verdicts, linked: unkeyedFacts, properties: counted };
    };
    // AREA_IMOVEL first: a drifted or broken main layer fails before themes are read. Its typed
    // pass goes first too (weight: the themes wait for it when they link spatially).
    const ordered = [...files].sort((a, b) => (themeOf(a) === 'AREA_IMOVEL' ? -1 : themeOf(b) === 'AREA_IMOVEL' ? 1 : 0));
    const staged: StagedInput[] = [];
    const readMs: Record<string, number> = {};
    const t0 = performance.now();
    const since = () => Math.round(performance.now() - t0);
    // On a failure the `finally` below abandons the typed passes under way.
    await ctx.stage(
      'read',
      async () => {
        const ov = (typing.ov = await overlapOn(ctx.pool, client, typeInput));
        for (const f of ordered) {
          ov.check();
          const r0 = performance.now();
          const t = await stageInput(ctx, client, f, themeOf(f));
          readMs[t.theme] = Math.round(performance.now() - r0);
          staged.push(t);
          // Sized before it is handed over (its repair then alters the table).
          const weight = t.theme === 'AREA_IMOVEL' ? Infinity : await tableBytes(client, t.stage);
          ov.push(t, weight);
        }
        // A typed pass that failed while the last zip was read fails the read.
        ov.check();
      },
      () => staged.reduce((a, t) => a + t.rows, 0),
      () => Object.fromEntries(staged.map((t) => [t.theme, { rows: t.rows, ms: readMs[t.theme], layers: t.layers.map((l) => l.name), ...(t.read ? { reader: t.read.reader } : {}) }])),
    );
    const readEnd = since();
    const main = staged[0];
    const themes = staged.slice(1);
    let mainRejected = 0;

    const built = await ctx.stage('normalise', async () => {
      // The typed passes not done while reading, on both connections now (heaviest first); their
      // facts are added in the inputs' order, as before.
      const results = await typing.ov!.finish();
      const typed = new Map<StagedInput, TypedInput>(staged.map((t, i) => [t, results[i]]));

      const verdicts = typed.get(main)!.verdicts;
      mainRejected = Object.entries(verdicts).filter(([v]) => v !== 'ok' && !DROPPED_VERDICTS.includes(v)).reduce((a, [, n]) => a + n, 0);
      addVerdicts(facts, verdicts, { dropped: DROPPED_VERDICTS });
      for (const t of themes) {
        const { verdicts: v, linked } = typed.get(t)!;
        if (linked) unkeyed[t.theme] = linked;
        addVerdicts(facts, v, { dropped: DROPPED_VERDICTS, prefix: `${t.theme.toLowerCase()}:` });
        // A theme none of whose polygons could be kept is not loaded: its areas stay NULL.
        if ((v.ok ?? 0) > 0 || !t.unkeyedLayers.length) loadedThemes.push(t);
        else facts.notes.push(`${t.theme}: no polygon of its layers without cod_imovel could be linked to a property; the theme is skipped and ${t.theme.toLowerCase()} areas are NULL`);
      }

      // The theme polygons of this snapshot (their kept typed rows) and the hectares per property
      // and theme (from the same rows) at once: car_tema's build on one connection, the hectares'
      // two parts on the other (the free one takes the second part).
      const carTema = tableName(await target.table('car_tema'));
      const themeArea = loadedThemes.length ? tableName(ctx.stagingTable('theme_area')) : null;
      if (themeArea) {
        const kept = keptThemeRows(loadedThemes.map((t) => t.typed));
        await createThemeArea(client, themeArea);
        await onTwoConnections(ctx.pool, client, [
          (c: pg.ClientBase) => steps.time('car_tema', () => buildFromTyped(c, { rel: CAR_TEMA, target: carTema, from: kept, asOf: target.asOf, snapshotId: target.snapshotId })),
          ...([0, 1] as const).map((part) => (c: pg.ClientBase) => steps.time(`theme_area ${part + 1}/2`, () => themeAreaPart(c, { theme_area: themeArea, polygons: kept, part }))),
        ]);
        await indexThemeArea(client, themeArea);
      } else {
        await client.query(`CREATE TABLE ${carTema} (LIKE snap.car_tema__template INCLUDING ALL)`);
      }
      await checkSnapshotTable(client, 'car_tema', carTema);

      // car_imovel's build beside car_tema's indexes (its GiST is the longest index).
      const table = tableName(await target.table('car_imovel'));
      const loaded = (name: Theme) => loadedThemes.some((t) => t.theme === name);
      const [first, ...rest] = indexTasks(carTema, CAR_TEMA.indexes).map(({ name, task }) => (c: pg.ClientBase) => steps.time(`car_tema index ${name}`, () => task(c)));
      await onTwoConnections(ctx.pool, client, [
        ...(first ? [first] : []),
        (c: pg.ClientBase) => steps.time('car_imovel', () =>
          buildFromTyped(c, {
            rel: CAR_IMOVEL, target: table, asOf: target.asOf, snapshotId: target.snapshotId,
            from: winningProperties(main.typed, themeArea, { apps: loaded('APPS'), rl: loaded('RESERVA_LEGAL'), ac: loaded('AREA_CONSOLIDADA') }),
          })),
        ...rest,
      ]);
      const rows = await checkSnapshotTable(client, 'car_imovel', table);
      const okRows = verdicts.ok ?? 0;
      if (okRows > rows) facts.dropped.duplicate_car = okRows - rows;
      return { table, carTema, rows, properties: typed.get(main)!.properties! };
    }, (r) => r.rows, () => ({ steps: steps.timings, timeline: timeline(staged, typing.ov!.spans, readMs, readEnd) }));

    // car_imovel's indexes (car_tema's were built during normalise, beside car_imovel's build),
    // then ANALYZE of both tables.
    await ctx.stage('index', () => indexSnapshotTables(ctx.pool, client, [
      { table: built.carTema, indexes: {} },
      { table: built.table, indexes: CAR_IMOVEL.indexes },
    ]), undefined, () => ({ built_during_normalise: Object.keys(steps.timings).filter((k) => k.startsWith('car_tema index ')) }));

    // Quality facts: from the typed pass (one scan of it), the reader's counts and the snapshot.
    facts.fields.empty = await countNulls(client, built.table, CAR_IMOVEL.counted);
    const pf = built.properties;
    for (const d of pf.dates) {
      if (d.kind === 'placeholder') facts.dates.placeholders[d.col] = d.n;
      if (d.kind === 'bad') facts.dates.unparseable[d.col] = d.n;
      if (d.kind === 'implausible') addCounts(facts, 'implausible', { [d.col]: d.n });
    }
    if (facts.dates.implausible) facts.notes.push(`dates after the release date ${target.asOf} loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
    addCounts(facts, 'unparsed', { area_total_ha: pf.numbers.num_area, modulos_fiscais: pf.numbers.mod_fiscal });
    addCounts(facts, 'overflowed', { 'area_imovel:num_area': pf.numbers.num_area_overflow, 'area_imovel:mod_fiscal': pf.numbers.mod_fiscal_overflow });
    for (const s of staged) addCounts(facts, 'overflowed', await overflowedCells(s));
    if (facts.fields.overflowed) facts.notes.push(`overflowed numeric cells (asterisks: no value, NULL) per layer and field: ${JSON.stringify(facts.fields.overflowed)}`);
    if (Object.keys(unkeyed).length) {
      Object.assign(facts, { temas_sem_imovel: unkeyed });
      for (const [th, u] of Object.entries(unkeyed)) {
        facts.notes.push(`${th}: ${u.layers.length} layer(s) without cod_imovel (older per-municipality layout): ${u.vinculados} polygon(s) linked to a property, ${u.sem_imovel} inside none, ${u.ambiguos} inside several (not loaded); rule: ${LINK_RULE}`);
      }
    }
    for (const u of pf.unknownCodes) facts.notes.push(`unknown ${u.field} code "${u.code}" in ${u.n} rows (loaded as NULL)`);
    const orphans = await orphanThemePolygons(client, { car_tema: built.carTema, car_imovel: built.table });
    if (orphans) facts.notes.push(`${orphans} theme polygons belong to no loaded property`);

    for (const s of staged) {
      addRepairFacts(facts, s.repair);
      facts.encoding.replacementChars += s.replacementChars;
      for (const l of s.layers) {
        facts.layers.push(describeLayer(l));
        if (l.sridAssumed) facts.geometry.sridAssumed = true;
      }
      if (s.read) facts.notes.push(`${s.theme}: ${readerNote(s.read)}`);
    }
    facts.geometry.srid = main.layers[0].srid;
    facts.geometry.empty = facts.rejected.no_geometry ?? 0;
    facts.geometry.outsideBrazil = facts.rejected.outside_brazil ?? 0;
    facts.encoding.name = main.layers[0].encoding;
    facts.encoding.assumed = main.layers.some((l) => l.encodingAssumed);
    facts.fields.missingOptional = main.missingOptional;
    facts.fields.unknown = [...new Set(staged.flatMap((s) => s.unknown))];
    if (facts.geometry.sridAssumed) facts.notes.push('a layer had no .prj: EPSG:4674 (SIRGAS 2000) assumed');
    facts.notes.push(...encodingNotes(staged.flatMap((s) => s.layers)));
    for (const th of THEMES) if (!themes.some((t) => t.theme === th)) facts.notes.push(`${th} not in the source: ${th.toLowerCase()} areas are NULL`);
    if (main.wfs) await addWfsFacts(client, facts, main.wfs, main.stage, built.rows);

    const rowsRead = staged.reduce((a, s) => a + s.rows, 0);
    const rowsRejected = sum(facts.rejected);
    return {
      rowsRead: main.rows,
      rowsLoaded: built.rows,
      rowsRejected: mainRejected,
      facts: { ...facts, notes: [...facts.notes, `${rowsRead} features read across all themes, ${rowsRejected} rejected in all`] },
      fingerprint: main.fingerprint,
    };
  } finally {
    await typing.ov?.abandon();
    client.release();
  }
}

/** A promise settled from outside (rejections are awaited by whoever waits on it, or ignored). */
function settledLater() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => {});
  return { promise, resolve, reject };
}

/**
 * When each input's typed pass ran, in seconds from the start of the read stage, beside the
 * read stage's end: the typed passes overlap the read (the ledger's `read` ends when the last
 * zip is staged; `normalise` covers what is left).
 */
function timeline(staged: StagedInput[], spans: { start: number; end: number }[], readMs: Record<string, number>, readEnd: number) {
  const s = (ms: number) => Math.round(ms) / 1000;
  return {
    read_end_s: s(readEnd),
    inputs: staged.map((t, i) => ({ input: t.theme, read_s: s(readMs[t.theme] ?? 0), typed_from_s: s(spans[i]?.start ?? -1), typed_to_s: s(spans[i]?.end ?? -1) })),
  };
}

export const sicar: Pipeline = {
  name: 'sicar',
  scopedByUf: true,
  relations: ['car_imovel', 'car_tema'],
  mainRelation: 'car_imovel',
  key: 'car',
  fetch: fetchState,
  sourceInfo: sicarSourceInfo,
  async releaseDate(_ctx, files) {
    return lastModifiedDay(files.find((f) => themeOf(f) === 'AREA_IMOVEL'));
  },
  load,
};
