// IBGE Malha Municipal (SOURCES §9): one national snapshot per mesh year from
// `BR_Municipios_<YYYY>.zip` (one polygon shapefile, EPSG:4674, encoding per .cpg).
// Fills ibge_municipios (serving.ibge_municipios, municipalities only) and, through it,
// serving.ref_municipio, the crosswalk name-only sources resolve through (SOURCES §1.3).
import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AgroError } from '../../src/errors.ts';
import { extractZip } from '../../src/etl/archive.ts';
import { fetchSource, type FetchedFile } from '../../src/etl/download.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { assertSameShape, repairInvalidPolygons } from '../../src/etl/repair.ts';
import { stageLayers, type FieldSpec } from '../../src/etl/stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from '../../src/etl/vector-reader.ts';
import { ident } from '../../src/db/pool.ts';
import { namedSql, render } from '../../src/sql.ts';

/** Canonical staging name ← known spellings (2023/2024 layout, 2020–2022, 2015–2019 CD_GEOCMU/NM_MUNICIP). */
export const MESH_FIELDS: FieldSpec[] = [
  { name: 'geocodigo', aliases: ['cd_mun', 'cd_geocmu', 'cd_municip', 'geocodigo'], required: true },
  { name: 'nome', aliases: ['nm_mun', 'nm_municip', 'nome'], required: true },
  { name: 'uf', aliases: ['sigla_uf', 'sigla'] },
  { name: 'cod_uf', aliases: ['cd_uf'] },
  { name: 'area_km2', aliases: ['area_km2'] },
  // Kept in `extra` under these names (SOURCES §9.4: "same names lower-cased").
  { name: 'nm_uf', aliases: ['nm_uf'] },
  { name: 'cd_rgi', aliases: ['cd_rgi'] },
  { name: 'nm_rgi', aliases: ['nm_rgi'] },
  { name: 'cd_rgint', aliases: ['cd_rgint'] },
  { name: 'nm_rgint', aliases: ['nm_rgint'] },
  { name: 'cd_regiao', aliases: ['cd_regiao', 'cd_regia'] },
  { name: 'nm_regiao', aliases: ['nm_regiao', 'nm_regia'] },
  { name: 'sigla_rg', aliases: ['sigla_rg'] },
  { name: 'cd_concurb', aliases: ['cd_concurb'] },
  { name: 'nm_concurb', aliases: ['nm_concurb'] },
];

/** Optional fields whose absence is worth reporting (the others only feed `extra`). */
const REPORTED_OPTIONAL = new Set(['uf', 'cod_uf', 'area_km2']);

const MESH_FILE = /^BR_Municipios_(\d{4})\.zip$/i;

/** Mesh year in the official file name, e.g. 2024 for BR_Municipios_2024.zip. */
export function meshYear(fileName: string): number | null {
  const m = MESH_FILE.exec(fileName);
  return m ? Number(m[1]) : null;
}

// ---------------------------------------------------------------------------------
// Helpers shared with other national pipelines (dnit-snv imports them).

const isHttp = (s: string) => /^https?:\/\//i.test(s);

/**
 * A local folder (path or file:// URL) → the file in it that `pick` chooses among the
 * names matching `pattern`; anything else (a file, an http(s) URL) is returned as is.
 */
export async function pickFromLocalFolder(source: string, pattern: RegExp, pick: (names: string[]) => string, what: string): Promise<string> {
  if (isHttp(source)) return source;
  const local = source.startsWith('file:') ? fileURLToPath(source) : path.resolve(source);
  const st = await stat(local).catch(() => null);
  if (!st?.isDirectory()) return source;
  const names = (await readdir(local)).filter((n) => pattern.test(n));
  if (names.length === 0) throw new AgroError('source_not_found', `${local} holds no ${what}`);
  return path.join(local, pick(names));
}

/**
 * Whether a DBF's records are valid UTF-8 (pure ASCII counts as UTF-8). Used only when a
 * layer has no .cpg: a Latin-1 DBF read as UTF-8 would turn every accent into U+FFFD,
 * a UTF-8 DBF read as Latin-1 into mojibake that nothing detects later.
 */
export async function dbfLooksUtf8(dbf: string): Promise<boolean> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let headerLeft = -1;
  try {
    for await (const chunk of createReadStream(dbf)) {
      let buf = chunk as Buffer;
      if (headerLeft < 0) headerLeft = buf.length >= 10 ? buf.readUInt16LE(8) : 32; // header length (bytes 8–9)
      if (headerLeft > 0) {
        const skip = Math.min(headerLeft, buf.length);
        headerLeft -= skip;
        buf = buf.subarray(skip);
      }
      if (buf.length) decoder.decode(buf, { stream: true });
    }
    decoder.decode();
    return true;
  } catch {
    return false;
  }
}

export interface OpenedLayers {
  layers: VectorLayer[];
  /** Layers without a .cpg and the encoding their bytes were found to be in. */
  detected: { layer: string; encoding: string }[];
}

/**
 * Extracts a zip and opens every shapefile in it, sub-folders included. A layer without a
 * .cpg is decoded as UTF-8 when its bytes are valid UTF-8, else as ISO-8859-1.
 */
export async function openZipLayers(zipPath: string, workDir: string, srid: number): Promise<OpenedLayers> {
  const dir = path.join(workDir, path.basename(zipPath).replace(/\.zip$/i, ''));
  const shps = findShapefiles(await extractZip(zipPath, dir));
  if (shps.length === 0) throw new AgroError('no_layer', `${path.basename(zipPath)} holds no shapefile`);
  const layers: VectorLayer[] = [];
  const detected: OpenedLayers['detected'] = [];
  for (const shp of shps) {
    const base = shp.slice(0, -4);
    const hasCpg = (await Promise.all(['.cpg', '.CPG'].map((e) => stat(base + e).then(() => true, () => false)))).some(Boolean);
    let encoding = 'UTF-8';
    if (!hasCpg) {
      const dbf = ['.dbf', '.DBF'].map((e) => base + e);
      const found = (await Promise.all(dbf.map((p) => stat(p).then(() => p, () => null)))).find((p) => p !== null)!;
      encoding = (await dbfLooksUtf8(found)) ? 'UTF-8' : 'ISO-8859-1';
    }
    const layer = openLayer(shp, { srid, encoding });
    if (layer.encodingAssumed) detected.push({ layer: layer.name, encoding });
    layers.push(layer);
  }
  return { layers, detected };
}

// ---------------------------------------------------------------------------------

async function fetchMesh(ctx: RunContext): Promise<FetchedFile[]> {
  const base = ctx.options.source ?? ctx.cfg.sources['ibge-municipios'];
  if (!base) throw new AgroError('usage', 'ibge-municipios needs --source <BR_Municipios_YYYY.zip, a folder holding it, or a URL>');
  // A folder may hold several years: the newest mesh wins.
  const uri = await pickFromLocalFolder(base, MESH_FILE, (names) => names.sort((a, b) => meshYear(a)! - meshYear(b)!).at(-1)!, 'BR_Municipios_<YYYY>.zip');
  const f = await fetchSource(uri, { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, expect: 'zip', log: (m, extra) => ctx.log.info(extra ?? {}, m) });
  if (!f) throw new AgroError('source_not_found', uri);
  return [f];
}

/** Pipeline-specific facts, stored with the quality report beside the common ones. */
export interface MeshFacts extends QualityFacts {
  ibge: {
    ano: number;
    ano_do_arquivo: boolean;
    municipios: number;
    nao_municipios: { geocodigo: string; nome: string; uf: string }[];
    codigos_repetidos: { geocodigo: string; feicoes: number }[];
  };
}

const todayUtc = () => new Date().toISOString().slice(0, 10);

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const file = files[0];
  const fileYear = meshYear(file.name);
  const ano = fileYear ?? Number((ctx.options.asOf ?? todayUtc()).slice(0, 4));
  const client = await ctx.pool.connect();
  try {
    const staged = await ctx.stage(
      'read',
      async () => {
        const opened = await openZipLayers(file.path, ctx.workDir, 4674);
        const stage = ctx.stagingTable('mun');
        const r = await stageLayers(client, stage, opened.layers, MESH_FIELDS);
        return { ...r, ...opened, stage };
      },
      (s) => s.rows,
      (s) => ({ layers: s.layers.map((l) => ({ name: l.name, features: l.featureCount, srid: l.srid, encoding: l.encoding })) }),
    );

    const fix = ctx.stagingTable('mun_fix');
    const classified = ctx.stagingTable('mun_cls');
    const built = await ctx.stage(
      'normalise',
      async () => {
        const repair = await repairInvalidPolygons(client, staged.stage, fix, ctx.cfg.repairTimeoutMs);
        await client.query(render(namedSql('queries/ibge_classify'), { classified, stage: staged.stage, fix }));
        const v = await client.query(`SELECT verdict, count(*)::int AS n FROM ${classified} GROUP BY verdict`);
        const verdicts = Object.fromEntries(v.rows.map((x) => [x.verdict, x.n])) as Record<string, number>;
        const table = await target.table('ibge_municipios');
        await client.query(
          render(namedSql('queries/ibge_municipios'), { target: table, classified, stage: staged.stage, ano: String(ano), snapshot_id: String(target.snapshotId) }),
        );
        await assertSameShape(client, 'snap.ibge_municipios__template', table);
        const rows = Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);
        return { table, repair, verdicts, rows };
      },
      (r) => r.rows,
    );

    await ctx.stage('index', async () => {
      const t = built.table;
      const base = t.replace(/^snap\."?|"$/g, '');
      await client.query(`ALTER TABLE ${t} ALTER COLUMN geocodigo SET NOT NULL, ADD CONSTRAINT ${ident(base + '_pk')} PRIMARY KEY (geocodigo)`);
      await client.query(`CREATE INDEX ${ident(base + '_geom')} ON ${t} USING gist (geom)`);
      await client.query(`CREATE INDEX ${ident(base + '_uf')} ON ${t} (uf)`);
      await client.query(`ANALYZE ${t}`);
    });

    // Quality facts.
    for (const [verdict, n] of Object.entries(built.verdicts)) if (verdict !== 'ok') facts.rejected[verdict] = n;
    const report = await client.query(render(namedSql('queries/ibge_report'), { target: built.table, classified }));
    const naoMunicipios = report.rows.filter((r) => r.kind === 'nao_municipio').map((r) => ({ geocodigo: r.geocodigo, nome: r.nome, uf: r.uf }));
    const repetidos = report.rows.filter((r) => r.kind === 'codigo_repetido').map((r) => ({ geocodigo: r.geocodigo, feicoes: r.features }));
    const okFeatures = built.verdicts.ok ?? 0;
    if (okFeatures > built.rows) facts.dropped.duplicate_geocodigo_merged = okFeatures - built.rows;
    if (naoMunicipios.length) {
      facts.notes.push(
        `${naoMunicipios.length} features are not municipalities (kept in the snapshot, left out of serving.ibge_municipios and serving.ref_municipio): ` +
          naoMunicipios.map((n) => `${n.geocodigo} ${n.nome} (${n.uf})`).join(', '),
      );
    }
    for (const r of repetidos) facts.notes.push(`code ${r.geocodigo} is carried by ${r.feicoes} features: their polygons were merged into one row`);
    const empties = await client.query(`SELECT count(*) FILTER (WHERE area_oficial_km2 IS NULL)::int AS area_oficial_km2 FROM ${built.table}`);
    facts.fields.empty = empties.rows[0];
    facts.fields.missingOptional = staged.missingOptional.filter((n) => REPORTED_OPTIONAL.has(n));
    facts.fields.unknown = staged.unknown;
    facts.geometry.invalid = built.repair.invalid;
    facts.geometry.repaired = built.repair.repaired;
    facts.geometry.rejected = built.repair.rejected + built.repair.empty;
    facts.geometry.empty = built.verdicts.no_geometry ?? 0;
    facts.geometry.outsideBrazil = built.verdicts.outside_brazil ?? 0;
    facts.geometry.srid = staged.layers[0].srid;
    facts.geometry.sridAssumed = staged.layers.some((l) => l.sridAssumed);
    if (facts.geometry.sridAssumed) facts.notes.push('a layer had no .prj: EPSG:4674 (SIRGAS 2000) assumed');
    facts.encoding.name = staged.layers[0].encoding;
    facts.encoding.assumed = staged.layers.some((l) => l.encodingAssumed);
    facts.encoding.replacementChars = staged.replacementChars;
    for (const d of staged.detected) facts.notes.push(`${d.layer} had no .cpg: its DBF bytes read as ${d.encoding}`);
    if (staged.replacementChars > 0) {
      // Names are the crosswalk's join key: corrupted ones must not replace good ones.
      const why = facts.encoding.assumed ? 'the source bytes already carry it' : `the DBF is not in the encoding its .cpg declares (${facts.encoding.name})`;
      facts.failures.push({ rule: 'replacement_characters', message: `${staged.replacementChars} values hold U+FFFD: ${why}`, value: staged.replacementChars });
    }
    for (const l of staged.layers) facts.layers.push({ name: l.name, features: l.featureCount, srid: l.srid, encoding: l.encoding });
    if (fileYear === null) facts.notes.push(`${file.name} carries no mesh year (BR_Municipios_<YYYY>.zip): ano = ${ano}, the as-of year`);

    const meshFacts: MeshFacts = {
      ...facts,
      ibge: {
        ano,
        ano_do_arquivo: fileYear !== null,
        municipios: built.rows - naoMunicipios.length,
        nao_municipios: naoMunicipios,
        codigos_repetidos: repetidos,
      },
    };
    return { rowsRead: staged.rows, rowsLoaded: built.rows, rowsRejected: sum(facts.rejected), facts: meshFacts, fingerprint: staged.fingerprint };
  } finally {
    client.release();
  }
}

export const ibgeMunicipios: Pipeline & { key: string } = {
  name: 'ibge-municipios',
  scopedByUf: false,
  relations: ['ibge_municipios'],
  mainRelation: 'ibge_municipios',
  key: 'geocodigo',
  fetch: fetchMesh,
  async releaseDate(_ctx, files) {
    const year = meshYear(files[0]?.name ?? '');
    return year ? `${year}-01-01` : null;
  },
  load,
};

