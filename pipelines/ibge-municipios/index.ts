// IBGE Malha Municipal (SOURCES §9): one national snapshot per mesh year from
// `BR_Municipios_<YYYY>.zip` (one polygon shapefile, EPSG:4674, encoding per .cpg).
// Fills ibge_municipios (serving.ibge_municipios, municipalities only) and, through it,
// serving.ref_municipio, the crosswalk name-only sources resolve through (SOURCES §1.3).
import { AgroError } from '../../src/errors.ts';
import type { FetchedFile } from '../../src/etl/download.ts';
import { readZipLayers } from '../../src/etl/layers.ts';
import { checkSnapshotTable, countNulls, countUnparsed, countVerdicts, indexSnapshotTable } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addLayerFacts, addRepairFacts, addVerdicts, emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { repairInvalidPolygons } from '../../src/etl/repair.ts';
import { fetchOneFile, pickFromLocalFolder } from '../../src/etl/source-files.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
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

async function fetchMesh(ctx: RunContext): Promise<FetchedFile[]> {
  const base = ctx.options.source ?? ctx.cfg.sources['ibge-municipios'];
  if (!base) throw new AgroError('usage', 'ibge-municipios needs --source <BR_Municipios_YYYY.zip, a folder holding it, or a URL>');
  // A folder may hold several years: the newest mesh wins.
  const uri = await pickFromLocalFolder(base, MESH_FILE, (names) => names.sort((a, b) => meshYear(a)! - meshYear(b)!).at(-1)!, 'BR_Municipios_<YYYY>.zip');
  return fetchOneFile(ctx, uri, { expect: 'zip' });
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
    const staged = await readZipLayers(ctx, client, file.path, MESH_FIELDS, { table: 'mun', srid: 4674 });

    const fix = ctx.stagingTable('mun_fix');
    const classified = ctx.stagingTable('mun_cls');
    const built = await ctx.stage(
      'normalise',
      async () => {
        const repair = await repairInvalidPolygons(client, staged.stage, fix, ctx.cfg.repairTimeoutMs);
        await client.query(render(namedSql('queries/ibge_classify'), { classified, stage: staged.stage, fix }));
        const verdicts = await countVerdicts(client, classified, staged.stage);
        const table = await target.table('ibge_municipios');
        await client.query(
          render(namedSql('queries/ibge_municipios'), { target: table, classified, stage: staged.stage, ano: String(ano), snapshot_id: String(target.snapshotId) }),
        );
        const rows = await checkSnapshotTable(client, 'ibge_municipios', table);
        return { table, repair, verdicts, rows };
      },
      (r) => r.rows,
    );

    await ctx.stage('index', () => indexSnapshotTable(client, built.table, { primaryKey: ['geocodigo'], gist: ['geom'], btree: ['uf'] }));

    // Quality facts.
    addVerdicts(facts, built.verdicts);
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
    facts.fields.empty = await countNulls(client, built.table, ['area_oficial_km2']);
    await countUnparsed(client, built.table, ['area_oficial_km2'], facts);
    facts.fields.missingOptional = staged.missingOptional.filter((n) => REPORTED_OPTIONAL.has(n));
    facts.fields.unknown = staged.unknown;
    addRepairFacts(facts, built.repair);
    facts.geometry.empty = built.verdicts.no_geometry ?? 0;
    facts.geometry.outsideBrazil = built.verdicts.outside_brazil ?? 0;
    addLayerFacts(facts, staged.layers);
    if (facts.geometry.sridAssumed) facts.notes.push('a layer had no .prj: EPSG:4674 (SIRGAS 2000) assumed');
    facts.encoding.replacementChars = staged.replacementChars;
    for (const d of staged.detected) facts.notes.push(`${d.layer} had no .cpg: its DBF bytes read as ${d.encoding}`);
    if (staged.replacementChars > 0) {
      // Names are the crosswalk's join key: corrupted ones must not replace good ones.
      const why = facts.encoding.assumed ? 'the source bytes already carry it' : `the DBF is not in the encoding its .cpg declares (${facts.encoding.name})`;
      facts.failures.push({ rule: 'replacement_characters', message: `${staged.replacementChars} values hold U+FFFD: ${why}`, value: staged.replacementChars });
    }
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

