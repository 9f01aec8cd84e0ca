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
import { fetchSource, joinSource, type FetchedFile } from '../../src/etl/download.ts';
import { encodingNotes, layersFromZip } from '../../src/etl/layers.ts';
import { checkSnapshotTable, countNulls, countVerdicts, indexSnapshotTable } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addCounts, addRepairFacts, addVerdicts, describeLayer, emptyFacts, sum } from '../../src/etl/quality.ts';
import { countShapefileOverflows } from '../../src/etl/dbf-overflow.ts';
import { releaseDateLiteral } from '../../src/etl/load-steps.ts';
import { assertSameShape, repairInvalidPolygons, type RepairResult } from '../../src/etl/repair.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { stageLayers, type FieldSpec } from '../../src/etl/stage-vector.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { namedSql, render } from '../../src/sql.ts';
import { stepTimer, type StepTimer } from '../../src/etl/steps.ts';
import { addWfsFacts, fetchWfsState, isWfsManifest, sicarRoute, sicarSourceInfo, stageWfsAreaImovel, type WfsStaged } from './wfs-route.ts';

export const THEMES = ['APPS', 'RESERVA_LEGAL', 'AREA_CONSOLIDADA'] as const;
export type Theme = (typeof THEMES)[number];

/** AREA_IMOVEL: canonical staging name ← every known spelling (state zip, legacy municipal layout, WFS). */
export const PROPERTY_FIELDS: FieldSpec[] = [
  { name: 'car', aliases: ['cod_imovel'], required: true },
  { name: 'cod_estado', aliases: ['cod_estado', 'uf'] },
  { name: 'municipio', aliases: ['municipio', 'nom_munici'] },
  { name: 'num_area', aliases: ['num_area', 'area'] },
  { name: 'ind_status', aliases: ['ind_status', 'situacao', 'status_imovel'] },
  { name: 'des_condic', aliases: ['des_condic', 'condicao_i', 'condicao'] },
  { name: 'ind_tipo', aliases: ['ind_tipo', 'tipo_imove', 'tipo_imovel'] },
  { name: 'mod_fiscal', aliases: ['mod_fiscal', 'num_modulo', 'm_fiscal'] },
  { name: 'dat_criaca', aliases: ['dat_criaca', 'dat_criacao'] },
  { name: 'dat_atuali', aliases: ['dat_atuali', 'data_atualizacao'] },
];

/** Themes: cod_imovel and cod_tema are checked per layer (checkThemeLayers): a layer without cod_imovel is linked spatially. */
export const THEME_FIELDS: FieldSpec[] = [
  { name: 'car', aliases: ['cod_imovel'] },
  { name: 'cod_tema', aliases: ['cod_tema'] },
  { name: 'nom_tema', aliases: ['nom_tema'] },
  { name: 'num_area', aliases: ['num_area'] },
  { name: 'ind_status', aliases: ['ind_status'] },
  { name: 'des_condic', aliases: ['des_condic'] },
];

const DEFAULT_SRID = 4674;
const EMPTY_FIELDS = ['municipio', 'situacao', 'tipo', 'condicao', 'modulos_fiscais', 'area_total_ha', 'data_inscricao', 'data_atualizacao'];

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

interface StagedTheme {
  theme: string;
  /** Layers without cod_imovel (older per-municipality layout): linked to properties spatially. */
  unkeyedLayers: string[];
  stage: string;
  fix: string;
  classified: string;
  layers: VectorLayer[];
  rows: number;
  repair: RepairResult;
  unknown: string[];
  missingOptional: string[];
  replacementChars: number;
  fingerprint: string;
  /** Set when AREA_IMOVEL came by the WFS route. */
  wfs?: WfsStaged;
}

async function stageTheme(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, theme: string): Promise<StagedTheme> {
  const name = theme.toLowerCase();
  const stage = ctx.stagingTable(name);
  const specs = theme === 'AREA_IMOVEL' ? PROPERTY_FIELDS : THEME_FIELDS;
  const staged = isWfsManifest(file) ? await stageWfs(ctx, client, file, stage, specs) : await stageZip(ctx, client, file, theme, stage, specs);
  return { theme, unkeyedLayers: [], stage, fix: ctx.stagingTable(`${name}_fix`), classified: ctx.stagingTable(`${name}_cls`), repair: { invalid: 0, repaired: 0, rejected: 0, empty: 0 }, ...staged };
}

async function stageZip(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, theme: string, stage: string, specs: FieldSpec[]) {
  const layers = await layersFromZip(file.path, ctx.workDir, { srid: DEFAULT_SRID, limits: ctx.cfg.zip });
  // Checked before staging: a theme layer without cod_imovel (older layout) is linked spatially later.
  const unkeyedLayers = theme === 'AREA_IMOVEL' ? [] : checkThemeLayers(theme, layers);
  return { layers, unkeyedLayers, ...(await stageLayers(client, stage, layers, specs)) };
}

async function stageWfs(ctx: RunContext, client: pg.ClientBase, file: FetchedFile, stage: string, specs: FieldSpec[]) {
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

const NO_LINK = { car: 's.car', link_join: '', link_verdict: 'NULL::text' };

async function classify(ctx: RunContext, client: pg.ClientBase, t: StagedTheme, steps: StepTimer, link: typeof NO_LINK = NO_LINK) {
  await steps.query(`classify ${t.theme}`, render(namedSql('queries/sicar_classify'), { classified: t.classified, stage: t.stage, fix: t.fix, uf: client.escapeLiteral(ctx.scope), ...link }));
  return countVerdicts(client, t.classified, t.stage);
}

const repair = async (ctx: RunContext, client: pg.ClientBase, t: StagedTheme, steps: StepTimer) => {
  t.repair = await steps.time(`repair ${t.theme}`, () => repairInvalidPolygons(client, t.stage, t.fix, ctx.cfg.repairTimeoutMs));
};

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

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const lit = (v: string | number | boolean) => (typeof v === 'string' ? `'${v.replace(/'/g, "''")}'` : String(v));
  const client = await ctx.pool.connect();
  try {
    const staged = await ctx.stage(
      'read',
      async () => {
        const out: StagedTheme[] = [];
        // AREA_IMOVEL first: a drifted or broken main layer fails before themes are read.
        for (const f of [...files].sort((a, b) => (themeOf(a) === 'AREA_IMOVEL' ? -1 : themeOf(b) === 'AREA_IMOVEL' ? 1 : 0))) {
          out.push(await stageTheme(ctx, client, f, themeOf(f)));
        }
        return out;
      },
      (s) => s.reduce((a, t) => a + t.rows, 0),
      (s) => Object.fromEntries(s.map((t) => [t.theme, { rows: t.rows, layers: t.layers.map((l) => l.name) }])),
    );
    const main = staged.find((t) => t.theme === 'AREA_IMOVEL')!;
    const themes = staged.filter((t) => t.theme !== 'AREA_IMOVEL');
    const uf = lit(ctx.scope);
    let mainRejected = 0;

    const steps = stepTimer(client);
    const unkeyed: Record<string, UnkeyedThemeFacts> = {};
    const loadedThemes: StagedTheme[] = [];
    const releaseDate = await releaseDateLiteral(client, target.snapshotId);
    const carImovel = await ctx.stage('normalise', async () => {
      await repair(ctx, client, main, steps);
      const verdicts = await classify(ctx, client, main, steps);
      mainRejected = Object.entries(verdicts).filter(([v]) => v !== 'ok' && !DROPPED_VERDICTS.includes(v)).reduce((a, [, n]) => a + n, 0);
      addVerdicts(facts, verdicts, { dropped: DROPPED_VERDICTS });
      const winners = ctx.stagingTable('winners');
      await steps.query('winners', render(namedSql('queries/sicar_winners'), { winners, classified: main.classified, stage: main.stage }));

      const properties = ctx.stagingTable('link_properties');
      for (const t of themes) {
        await repair(ctx, client, t, steps);
        let link = NO_LINK;
        if (t.unkeyedLayers.length) {
          if (!(await client.query(`SELECT to_regclass($1) AS t`, [properties])).rows[0].t) {
            await steps.query('link properties', render(namedSql('queries/sicar_link_properties'), { properties, winners, stage: main.stage, fix: main.fix }));
            await client.query(`CREATE INDEX ON ${properties} USING gist (geom)`);
            await client.query(`ANALYZE ${properties}`);
          }
          const links = ctx.stagingTable(`${t.theme.toLowerCase()}_links`);
          const layers = `ARRAY[${t.unkeyedLayers.map((n) => client.escapeLiteral(n)).join(', ')}]`;
          await steps.query(`link ${t.theme}`, render(namedSql('queries/sicar_theme_link'), { links, stage: t.stage, fix: t.fix, properties, layers }));
          link = {
            car: 'coalesce(s.car, l.car)',
            link_join: `LEFT JOIN ${links} l ON l.src_seq = s.src_seq`,
            link_verdict: `CASE WHEN s.src_layer = ANY(${layers}) THEN CASE
              WHEN s.geom IS NULL THEN 'no_geometry' WHEN f.status = 'rejected' THEN 'geometry_unrepairable'
              WHEN f.status = 'empty' THEN 'geometry_empty_after_repair'
              WHEN l.matches = 0 THEN 'not_linked_no_property' WHEN l.matches > 1 THEN 'not_linked_ambiguous' END END`,
          };
          const c = (await client.query(
            `SELECT count(*) FILTER (WHERE matches = 1)::int AS vinculados, count(*) FILTER (WHERE matches = 0)::int AS sem_imovel,
                    count(*) FILTER (WHERE matches > 1)::int AS ambiguos FROM ${links}`,
          )).rows[0];
          unkeyed[t.theme] = { layers: t.unkeyedLayers, ...c, regra: LINK_RULE };
        }
        const v = await classify(ctx, client, t, steps, link);
        addVerdicts(facts, v, { dropped: DROPPED_VERDICTS, prefix: `${t.theme.toLowerCase()}:` });
        // A theme none of whose polygons could be kept is not loaded: its areas stay NULL.
        if ((v.ok ?? 0) > 0 || !t.unkeyedLayers.length) loadedThemes.push(t);
        else facts.notes.push(`${t.theme}: no polygon of its layers without cod_imovel could be linked to a property; the theme is skipped and ${t.theme.toLowerCase()} areas are NULL`);
      }

      // Theme polygons of this snapshot, then hectares per property and theme.
      const carTema = await target.table('car_tema');
      if (loadedThemes.length) {
        const parts = loadedThemes.map((t) =>
          render(namedSql('queries/sicar_car_tema_part'), { classified: t.classified, stage: t.stage, fix: t.fix, uf, tema: lit(t.theme), snapshot_id: String(target.snapshotId) }),
        );
        await steps.query('car_tema', `CREATE TABLE ${carTema} AS ${parts.join('\nUNION ALL\n')}`);
      } else {
        await client.query(`CREATE TABLE ${carTema} (LIKE snap.car_tema__template INCLUDING ALL)`);
      }
      await assertSameShape(client, 'snap.car_tema__template', carTema);
      const themeArea = ctx.stagingTable('theme_area');
      await steps.query('theme_area', render(namedSql('queries/sicar_theme_area'), { theme_area: themeArea, car_tema: carTema }));
      await client.query(`CREATE INDEX ON ${themeArea} (car)`);

      const table = await target.table('car_imovel');
      const loaded = (name: Theme) => lit(loadedThemes.some((t) => t.theme === name));
      await steps.query(
        'car_imovel',
        render(namedSql('queries/sicar_car_imovel'), {
          target: table, winners, stage: main.stage, fix: main.fix, theme_area: themeArea, uf,
          apps_loaded: loaded('APPS'), rl_loaded: loaded('RESERVA_LEGAL'), ac_loaded: loaded('AREA_CONSOLIDADA'),
          snapshot_id: String(target.snapshotId), release_date: releaseDate,
        }),
      );
      const rows = await checkSnapshotTable(client, 'car_imovel', table);
      const okRows = verdicts.ok ?? 0;
      if (okRows > rows) facts.dropped.duplicate_car = okRows - rows;
      return { table, carTema, rows };
    }, (r) => r.rows, () => ({ steps: steps.timings }));

    await ctx.stage('index', async () => {
      await indexSnapshotTable(client, carImovel.table, { primaryKey: ['car'], gist: ['geom'], btree: [{ name: 'mun', columns: ['cod_municipio_ibge'] }] });
      await indexSnapshotTable(client, carImovel.carTema, { gist: ['geom'], btree: ['car'] });
    });

    // Quality facts beyond the verdicts.
    const t = carImovel.table;
    facts.fields.empty = await countNulls(client, t, EMPTY_FIELDS);
    const dates = await client.query(
      `SELECT col, CASE WHEN etl.parse_date(v) > ${releaseDate} THEN 'implausible' ELSE etl.date_kind(v) END AS kind, count(*)::int AS n
         FROM (SELECT 'dat_criaca' AS col, dat_criaca AS v FROM ${main.stage} UNION ALL SELECT 'dat_atuali', dat_atuali FROM ${main.stage}) d
        GROUP BY 1, 2`,
    );
    for (const d of dates.rows) {
      if (d.kind === 'placeholder') facts.dates.placeholders[d.col] = d.n;
      if (d.kind === 'bad') facts.dates.unparseable[d.col] = d.n;
      if (d.kind === 'implausible') addCounts(facts, 'implausible', { [d.col]: d.n });
    }
    if (facts.dates.implausible) facts.notes.push(`dates after the release date ${releaseDate.slice(1, 11)} loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
    const numbers = (await client.query(
      `SELECT count(*) FILTER (WHERE btrim(num_area) <> '' AND etl.parse_number(num_area) IS NULL AND NOT etl.is_overflow(num_area))::int AS num_area,
              count(*) FILTER (WHERE btrim(mod_fiscal) <> '' AND etl.parse_number(mod_fiscal) IS NULL AND NOT etl.is_overflow(mod_fiscal))::int AS mod_fiscal,
              count(*) FILTER (WHERE etl.is_overflow(num_area))::int AS num_area_overflow,
              count(*) FILTER (WHERE etl.is_overflow(mod_fiscal))::int AS mod_fiscal_overflow
         FROM ${main.stage}`,
    )).rows[0];
    addCounts(facts, 'unparsed', { area_total_ha: numbers.num_area, modulos_fiscais: numbers.mod_fiscal });
    addCounts(facts, 'overflowed', { 'area_imovel:num_area': numbers.num_area_overflow, 'area_imovel:mod_fiscal': numbers.mod_fiscal_overflow });
    for (const s of staged) {
      for (const l of s.layers) {
        const specs = s.theme === 'AREA_IMOVEL' ? PROPERTY_FIELDS : THEME_FIELDS;
        const over = await countShapefileOverflows(l.file);
        addCounts(facts, 'overflowed', Object.fromEntries(Object.entries(over).map(([k, n]) => [`${s.theme.toLowerCase()}:${specs.find((f) => f.aliases.includes(k))?.name ?? k}`, n])));
      }
    }
    if (facts.fields.overflowed) facts.notes.push(`overflowed numeric cells (asterisks: no value, NULL) per layer and field: ${JSON.stringify(facts.fields.overflowed)}`);
    if (Object.keys(unkeyed).length) {
      Object.assign(facts, { temas_sem_imovel: unkeyed });
      for (const [th, u] of Object.entries(unkeyed)) {
        facts.notes.push(`${th}: ${u.layers.length} layer(s) without cod_imovel (older per-municipality layout): ${u.vinculados} polygon(s) linked to a property, ${u.sem_imovel} inside none, ${u.ambiguos} inside several (not loaded); rule: ${LINK_RULE}`);
      }
    }
    const unknownCodes = await client.query(
      `SELECT 'ind_status' AS field, ind_status AS code, count(*)::int AS n FROM ${main.stage} WHERE ind_status IS NOT NULL AND etl.car_situacao(ind_status) IS NULL GROUP BY 2
       UNION ALL SELECT 'ind_tipo', ind_tipo, count(*)::int FROM ${main.stage} WHERE ind_tipo IS NOT NULL AND etl.car_tipo(ind_tipo) IS NULL GROUP BY 2`,
    );
    for (const u of unknownCodes.rows) facts.notes.push(`unknown ${u.field} code "${u.code}" in ${u.n} rows (loaded as NULL)`);
    const orphan = await client.query(`SELECT count(*)::int AS n FROM ${carImovel.carTema} m WHERE NOT EXISTS (SELECT 1 FROM ${t} c WHERE c.car = m.car)`);
    if (orphan.rows[0].n) facts.notes.push(`${orphan.rows[0].n} theme polygons belong to no loaded property`);

    for (const s of staged) {
      addRepairFacts(facts, s.repair);
      facts.encoding.replacementChars += s.replacementChars;
      for (const l of s.layers) {
        facts.layers.push(describeLayer(l));
        if (l.sridAssumed) facts.geometry.sridAssumed = true;
      }
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
    if (main.wfs) await addWfsFacts(client, facts, main.wfs, main.stage, carImovel.rows);

    const rowsRead = staged.reduce((a, s) => a + s.rows, 0);
    const rowsRejected = sum(facts.rejected);
    return {
      rowsRead: main.rows,
      rowsLoaded: carImovel.rows,
      rowsRejected: mainRejected,
      facts: { ...facts, notes: [...facts.notes, `${rowsRead} features read across all themes, ${rowsRejected} rejected in all`] },
      fingerprint: main.fingerprint,
    };
  } finally {
    client.release();
  }
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
