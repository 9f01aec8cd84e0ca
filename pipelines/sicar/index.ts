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
// which no polygon could be linked is treated as not loaded (its areas NULL, with a note);
// one whose layers hold no polygon at all is loaded (its areas 0, as in the current layout).
// Without cod_tema, APPS polygons count as detailed APP polygons (the union never double counts).
//
// Dates after the release date (data_inscricao, data_atualizacao) are NULL, their text kept
// in `extra` (contract §3); numbers that do not parse are NULL, their text kept in `extra`.
//
// A declaration on the one shape (src/etl/shape.ts, InputsSpec): four inputs, two relations.
// The engine reads each input, repairs it in place, runs its typed pass on a second connection
// while the next zip is read, builds car_tema then car_imovel from the typed rows (each beside
// the other's work), indexes them and counts the common facts per input. What is SICAR's own
// is here: the inputs and their files (route A zips, route B WFS), the theme-layer check, the
// typed SQL, the spatial linking of older-layout themes, the theme hectares beside car_tema's
// build, the `from` of each build, and its facts.
import { AgroError } from '../../src/errors.ts';
import { fetchSource, joinSource, type FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import { addSnapshotTable } from '../../src/etl/catalog.ts';
import { qualifiedSnapshotTable, REJECTED_PROPERTIES } from '../../src/etl/names.ts';
import { addCounts, addExamples, noteImplausibleDates, sum } from '../../src/etl/quality.ts';
import { inputPrefix } from '../../src/etl/shape-facts.ts';
import { shapedPipeline, type InputDone, type ShapeInput } from '../../src/etl/shape.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { requiredFieldMissing, type FieldSpec } from '../../src/etl/stage-vector.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { verdictExamples } from '../../src/etl/verdict-examples.ts';
import { tableName, type Sql } from '../../src/sql.ts';
import {
  NO_LINK, createThemeArea, indexThemeArea, keptThemeRows, linkProperties, linkTheme, olderCopies, orphanThemePolygons, propertyFacts, themeAreaOf, themeFacts, themeLink,
  typeProperties, typeTheme, winningProperties, writeRejectedProperties, type MoreCodes, type PropertyFacts, type ThemeFacts, type ThemeLink,
} from './queries.ts';
import { THEME_CODES } from './theme-codes.ts';
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
  const common = { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, ...ctx.cfg.download, expect: 'zip' as const, zipLimits: ctx.cfg.zip, log: (m: string) => ctx.log.info(m), agentOptions: { ciphers: 'DEFAULT:@SECLEVEL=1' } };
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

/**
 * Refuses, before staging, a theme layer with cod_imovel but no cod_tema: the current layout
 * has both. (A layer without cod_imovel is the older per-municipality layout: unkeyedLayers.)
 */
export function checkThemeLayers(theme: string, layers: VectorLayer[]): void {
  for (const l of layers) {
    const names = new Set(l.fields.map((f) => f.name));
    if (names.has('cod_imovel') && !names.has('cod_tema')) {
      throw requiredFieldMissing(`${l.name} (${theme}) has cod_imovel but no cod_tema`, [{ name: 'cod_tema', aliases: ['cod_tema'] }], { layer: l.name });
    }
  }
}

/**
 * Refuses, before staging, a theme layer inside the AREA_IMOVEL zip (a folder zipped whole:
 * GO_APPS.shp beside GO_AREA_IMOVEL.shp): its polygons carry cod_imovel and would load as
 * copies of the properties, one of which wins as the property's geometry.
 */
export function checkPropertyLayers(layers: VectorLayer[]): void {
  const themes = layers.filter((l) => l.fields.some((f) => f.name === 'cod_tema'));
  if (themes.length) {
    throw new AgroError('malformed_source', `the AREA_IMOVEL zip holds theme layers (with cod_tema): ${themes.map((l) => l.name).join(', ')}; each theme has its own zip (<UF>_<THEME>.zip)`, { layers: themes.map((l) => l.name) });
  }
}

/** A theme's layers without cod_imovel (the older per-municipality layout): linked spatially. */
const unkeyedLayers = (layers: VectorLayer[]): string[] => layers.filter((l) => !l.fields.some((f) => f.name === 'cod_imovel')).map((l) => l.name);

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

/** Unknown codes past the named ones, as a note says them. */
const moreCodes = (m: MoreCodes) => `${m.codes} more (${m.n} rows)`;

/** What SICAR's steps hand each other during one load. */
interface SicarLoad {
  /** The winning properties in EPSG:4326 for linking (made once, by the first theme that needs them, after AREA_IMOVEL's pass). */
  linking: Promise<void> | null;
  /** Per theme with layers without cod_imovel: their links. */
  unkeyed: Record<string, UnkeyedThemeFacts>;
  /** Themes whose polygons are built (a theme none of whose older-layout polygons could be linked is not). */
  loaded: string[];
  /** Hectares per property and theme (built beside car_tema). */
  themeArea: Sql | null;
  /** Set when AREA_IMOVEL came by the WFS route. */
  wfs?: WfsStaged;
}

/** AREA_IMOVEL: the route A zip or the route B WFS pages; typed by sicar_typed_imovel.sql, its dates, numbers and codes counted from the typed rows. */
const AREA_IMOVEL: ShapeInput<SicarLoad> = {
  name: 'AREA_IMOVEL',
  relation: CAR_IMOVEL,
  required: true,
  file: (f) => themeOf(f) === 'AREA_IMOVEL',
  read: { srid: DEFAULT_SRID, refuse: checkPropertyLayers },
  async stage({ ctx, client, state }, file, table) {
    if (!isWfsManifest(file)) return null;
    const wfs = (state.wfs = await stageWfsAreaImovel(ctx, client, file, table, PROPERTY_FIELDS));
    return { layers: [wfs.layer], rows: wfs.rows, missingOptional: wfs.missingOptional, unknown: wfs.unknown, replacementChars: wfs.replacementChars, fingerprint: wfs.fingerprint };
  },
  typed: ({ client, ctx, t, asOf, steps }) => steps.time('typed AREA_IMOVEL', () => typeProperties(client, { typed: t.classified, stage: t.stage, uf: ctx.scope, asOf })),
  // What the facts count of the properties, from their typed table (one scan), while the themes are read.
  counted: ({ client, t, steps }) => steps.time('facts AREA_IMOVEL', () => propertyFacts(client, t.classified)),
};

/** A theme zip: its layers checked before staging, older-layout layers linked spatially, typed by sicar_typed_tema.sql. */
const theme = (name: Theme): ShapeInput<SicarLoad> => ({
  name,
  relation: CAR_TEMA,
  file: (f) => themeOf(f) === name,
  // Checked before staging: a theme layer without cod_imovel (older layout) is linked spatially later.
  read: { srid: DEFAULT_SRID, refuse: (layers) => checkThemeLayers(name, layers) },
  // A theme's staged rows are read no more after its pass (about 1 s a dropped table at 200,000 properties).
  dropStaged: true,
  async typed({ client: c, ctx, t, staged, state, steps, live, passed, inputs }) {
    const unkeyed = unkeyedLayers(staged.layers);
    let link: ThemeLink = NO_LINK;
    if (unkeyed.length) {
      // Linked to the typed properties: waits for AREA_IMOVEL's pass (read first, taken first) and fails with it.
      const properties = t.aux('link_properties');
      await (state.linking ??= passed('AREA_IMOVEL').then(() =>
        steps.time('link properties', () => linkProperties(c, { properties, typed: inputs('AREA_IMOVEL')!.t.classified }))));
      live();
      const links = t.aux(`${name.toLowerCase()}_links`);
      const n = await steps.time(`link ${name}`, () => linkTheme(c, { links, stage: t.stage, properties, layers: unkeyed }));
      state.unkeyed[name] = { layers: unkeyed, ...n, regra: LINK_RULE };
      link = themeLink(links, unkeyed);
      live();
    }
    await steps.time(`typed ${name}`, () => typeTheme(c, { typed: t.classified, stage: t.stage, uf: ctx.scope, tema: name, link }));
  },
  // Its areas that are not numbers, status codes outside §2.5 and cod_tema outside the vocabulary, from its typed table.
  counted: ({ client, t, steps }) => steps.time(`facts ${name}`, () => themeFacts(client, t.classified, THEME_CODES[name])),
});

/** The themes built, in the inputs' order. */
const builtThemes = (inputs: InputDone[], loaded: string[]) => inputs.filter((d) => loaded.includes(d.name));

export const sicar = shapedPipeline<SicarLoad>({
  name: 'sicar',
  scopedByUf: true,
  // AREA_IMOVEL first: a drifted or broken main layer fails before themes are read.
  inputs: [AREA_IMOVEL, ...THEMES.map(theme)],
  mainRelation: 'car_imovel',
  fetch: fetchState,
  sourceInfo: sicarSourceInfo,
  releaseDate: (files) => lastModifiedDay(files.find((f) => themeOf(f) === 'AREA_IMOVEL')),
  dropped: DROPPED_VERDICTS,
  state: () => ({ linking: null, unkeyed: {}, loaded: [], themeArea: null }),
  async passesDone({ inputs, state, facts }) {
    for (const d of inputs.slice(1)) {
      // A theme none of whose older-layout polygons could be linked is not loaded: its areas
      // stay NULL. Layers present with no polygon at all say the state has none of the theme:
      // loaded, 0 ha for every property, as an empty layer of the current layout (NULL is for
      // a theme whose zip is absent).
      if ((d.verdicts.ok ?? 0) > 0 || !state.unkeyed[d.name] || d.staged.rows === 0) state.loaded.push(d.name);
      else facts.notes.push(`${d.name}: no polygon of its layers without cod_imovel could be linked to a property; the theme is skipped and ${d.name.toLowerCase()} areas are NULL`);
    }
  },
  relations: [
    {
      // The theme polygons of this snapshot (their kept typed rows) and, beside the build, the
      // hectares per property of each theme from the same rows: the two connections take the
      // build and the themes (the most polygons first) as each comes free.
      relation: CAR_TEMA,
      async from({ client, ctx, inputs, state }) {
        const themes = builtThemes(inputs, state.loaded);
        if (!themes.length) return null;
        const themeArea = (state.themeArea = tableName(ctx.stagingTable('theme_area')));
        await createThemeArea(client, themeArea);
        return {
          from: keptThemeRows(themes.map((d) => d.t.classified)),
          beside: [...themes].sort((a, b) => b.staged.rows - a.staged.rows).map((d) => ({
            label: `theme_area ${d.name}`,
            task: (c) => themeAreaOf(c, { theme_area: themeArea, polygons: keptThemeRows([d.t.classified]) }),
          })),
          after: (c) => indexThemeArea(c, themeArea),
        };
      },
    },
    {
      // One row per CAR number, with its theme hectares (car_tema's indexes build meanwhile).
      relation: CAR_IMOVEL,
      async from({ inputs, state }) {
        const loaded = (name: Theme) => state.loaded.includes(name);
        return { from: winningProperties(inputs[0].t.classified, state.themeArea, { apps: loaded('APPS'), rl: loaded('RESERVA_LEGAL'), ac: loaded('AREA_CONSOLIDADA') }) };
      },
    },
  ],
  // From the typed pass (one scan of it): dates and numbers.
  async counted({ inputs, facts, asOf }) {
    const pf = inputs[0].counted as PropertyFacts;
    for (const d of pf.dates) {
      if (d.kind === 'placeholder') facts.dates.placeholders[d.col] = d.n;
      if (d.kind === 'bad') facts.dates.unparseable[d.col] = d.n;
      if (d.kind === 'implausible') addCounts(facts, 'implausible', { [d.col]: d.n });
    }
    noteImplausibleDates(facts, asOf);
    addCounts(facts, 'unparsed', { area_total_ha: pf.numbers.num_area, modulos_fiscais: pf.numbers.mod_fiscal });
    addCounts(facts, 'overflowed', { 'area_imovel:num_area': pf.numbers.num_area_overflow, 'area_imovel:mod_fiscal': pf.numbers.mod_fiscal_overflow });
  },
  // The links of older-layout themes, unknown codes, theme polygons of no loaded property.
  async checked({ client, inputs, state, facts, built }) {
    const pf = inputs[0].counted as PropertyFacts;
    const unkeyed = inputs.filter((d) => state.unkeyed[d.name]).map((d) => [d.name, state.unkeyed[d.name]] as const);
    if (unkeyed.length) {
      Object.assign(facts, { temas_sem_imovel: Object.fromEntries(unkeyed) });
      for (const [th, u] of unkeyed) {
        facts.notes.push(`${th}: ${u.layers.length} layer(s) without cod_imovel (older per-municipality layout): ${u.vinculados} polygon(s) linked to a property, ${u.sem_imovel} inside none, ${u.ambiguos} inside several (not loaded); rule: ${LINK_RULE}`);
      }
    }
    for (const u of pf.unknownCodes) facts.notes.push(`unknown ${u.field} code "${u.code}" in ${u.n} rows (loaded as NULL)`);
    for (const m of pf.moreCodes) facts.notes.push(`${moreCodes(m)} unknown ${m.field} codes (loaded as NULL)`);
    // The themes' own values, counted as the properties' are (the areas under '<theme>:area_ha').
    const outside: Record<string, Record<string, number>> = {};
    const outsideMore: Record<string, { codigos: number; linhas: number }> = {};
    for (const d of inputs.slice(1)) {
      const tf = d.counted as ThemeFacts;
      addCounts(facts, 'unparsed', { [`${inputPrefix(d.name)}area_ha`]: tf.areaUnparsed });
      if (tf.areaUnparsed) facts.notes.push(`${d.name}: ${tf.areaUnparsed} num_area value(s) are not numbers, or negative areas (area_ha loaded as NULL, source text kept in extra)`);
      for (const u of tf.unknownStatus) facts.notes.push(`${d.name}: unknown ind_status code "${u.code}" in ${u.n} rows (situacao loaded as NULL, text kept in extra)`);
      if (tf.moreStatus) facts.notes.push(`${d.name}: ${moreCodes(tf.moreStatus)} unknown ind_status codes (situacao loaded as NULL, text kept in extra)`);
      if (!tf.unknownCodes.length) continue;
      outside[d.name] = Object.fromEntries(tf.unknownCodes.map((u) => [u.code, u.n]));
      if (tf.moreCodes) outsideMore[d.name] = { codigos: tf.moreCodes.codes, linhas: tf.moreCodes.n };
      facts.notes.push(`${d.name}: cod_tema outside SOURCES §2.5's vocabulary (loaded as written; in APPS only APP_* and *_TOTAL codes count in app_ha): ${tf.unknownCodes.map((u) => `${u.code} × ${u.n}`).join(', ')}${tf.moreCodes ? `, and ${moreCodes(tf.moreCodes)}` : ''}`);
    }
    if (Object.keys(outside).length) Object.assign(facts, { cod_tema_fora_do_vocabulario: outside });
    if (Object.keys(outsideMore).length) Object.assign(facts, { cod_tema_fora_do_vocabulario_nao_listados: outsideMore });
    const orphans = await orphanThemePolygons(client, { car_tema: built.car_tema.table, car_imovel: built.car_imovel.table });
    if (orphans) facts.notes.push(`${orphans} theme polygons belong to no loaded property`);
  },
  async facts({ client, inputs, input, state, facts, built, snapshotId }) {
    const main = inputs[0];
    // Registered with the snapshot (dropped with it): what the change events must not take for gone.
    const rejected = qualifiedSnapshotTable(REJECTED_PROPERTIES, snapshotId);
    await addSnapshotTable(client, snapshotId, rejected);
    await writeRejectedProperties(client, { rejected: tableName(rejected), typed: main.t.classified, car_imovel: built.car_imovel.table });
    const rows = built.car_imovel.rows;
    // Copies of a CAR number: the most recently updated one is loaded.
    const ok = main.verdicts.ok ?? 0;
    if (ok > rows) {
      facts.dropped.duplicate_car = ok - rows;
      // The older copies, shown as the other reasons' rows are (file, row, values, where).
      addExamples(facts, await verdictExamples(client, main.t.classified, { stage: main.t.stage, copies: { reason: 'duplicate_car', where: olderCopies(main.t.classified) } }));
    }
    for (const th of THEMES) if (!input(th)) facts.notes.push(`${th} not in the source: ${th.toLowerCase()} areas are NULL`);
    if (state.wfs) await addWfsFacts(client, facts, state.wfs, main.t.stage, rows);
    const rowsRead = inputs.reduce((a, d) => a + d.staged.rows, 0);
    facts.notes.push(`${rowsRead} features read across all themes, ${sum(facts.rejected)} rejected in all`);
  },
});
