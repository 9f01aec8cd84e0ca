// IBGE Malha Municipal (SOURCES §9): one national snapshot per mesh year from
// `BR_Municipios_<YYYY>.zip` (one polygon shapefile, EPSG:4674, encoding per .cpg).
// Fills ibge_municipios (serving.ibge_municipios, municipalities only) and, through it,
// serving.ref_municipio, the crosswalk name-only sources resolve through (SOURCES §1.3).
import { defineRelation, type FieldDef } from '../../src/etl/relation.ts';
import { shapedPipeline } from '../../src/etl/shape.ts';
import type { QualityFacts } from '../../src/etl/quality.ts';
import { listPart } from './official-list.ts';
import { classifyMesh, keptMunicipalities, meshReport, runList, runLists } from './queries.ts';

/** Kept in `extra` under these names (SOURCES §9.4: "same names lower-cased"). */
const EXTRA_FIELDS: FieldDef[] = [
  { name: 'nm_uf', from: ['nm_uf'], keep: 'extra' },
  { name: 'cd_rgi', from: ['cd_rgi'], keep: 'extra' },
  { name: 'nm_rgi', from: ['nm_rgi'], keep: 'extra' },
  { name: 'cd_rgint', from: ['cd_rgint'], keep: 'extra' },
  { name: 'nm_rgint', from: ['nm_rgint'], keep: 'extra' },
  { name: 'cd_regiao', from: ['cd_regiao', 'cd_regia'], keep: 'extra' },
  { name: 'nm_regiao', from: ['nm_regiao', 'nm_regia'], keep: 'extra' },
  { name: 'sigla_rg', from: ['sigla_rg'], keep: 'extra' },
  { name: 'cd_concurb', from: ['cd_concurb'], keep: 'extra' },
  { name: 'nm_concurb', from: ['nm_concurb'], keep: 'extra' },
];

/**
 * snap.ibge_municipios, with every known spelling (2023/2024 layout, 2020–2022, 2015–2019
 * CD_GEOCMU/NM_MUNICIP). UF and its code come from the geocode (classify checks that the
 * source's sigla agrees); the mesh year is the file's.
 */
export const IBGE_MUNICIPIOS = defineRelation({
  name: 'ibge_municipios',
  columns: [
    { name: 'geocodigo', type: 'text', from: ['cd_mun', 'cd_geocmu', 'cd_municip', 'geocodigo'], required: true, sql: 'c.geocodigo' },
    { name: 'nome', type: 'text', from: ['nm_mun', 'nm_municip', 'nome'], required: true },
    { name: 'uf', type: 'text', from: ['sigla_uf', 'sigla'], sql: 'etl.uf_from_ibge_code(left(c.geocodigo, 2))' },
    { name: 'cod_uf', type: 'text', from: ['cd_uf'], sql: 'left(c.geocodigo, 2)' },
    { name: 'area_oficial_km2', type: 'double precision', from: ['area_km2'], counted: true },
    { name: 'area_calculada_km2', type: 'double precision', sql: 'ST_Area(c.geom::geography) / 1e6' },
    { name: 'ponto_interior', type: 'geometry(Point,4326)', sql: 'ST_PointOnSurface(c.geom)' },
    { name: 'ano', type: 'integer', sql: 'v.ano' },
    // In the official list when the run has one, else by code shape (classify: c.oficial).
    { name: 'is_municipio', type: 'boolean', sql: 'c.oficial' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 'c.geom' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  fields: EXTRA_FIELDS,
  indexes: { primaryKey: ['geocodigo'], gist: ['geom'], btree: ['uf'] },
  orderBy: 'c.geocodigo',
});

/** The staging fields (canonical name ← every spelling), as the read stage maps them. */
export const MESH_FIELDS = IBGE_MUNICIPIOS.staging;

const MESH_FILE = /^BR_Municipios_(\d{4})\.zip$/i;

/** Mesh year in the official file name, e.g. 2024 for BR_Municipios_2024.zip. */
export function meshYear(fileName: string): number | null {
  const m = MESH_FILE.exec(fileName);
  return m ? Number(m[1]) : null;
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
  /** The official list the mesh was joined with (SOURCES §9.7); fonte null: none, `ausente` says why. */
  lista_oficial: {
    fonte: string | null;
    ausente?: string;
    municipios: number;
    /** Official codes the mesh lacks: loaded without geometry. */
    sem_malha: Municipio[];
    /** Mesh features with a municipality-shaped code that the list lacks: not municipalities. */
    fora_da_lista: Municipio[];
  };
}

type Municipio = { geocodigo: string; nome: string; uf: string };

/** Largest share of the mesh's municipality-shaped codes the official list may lack (a wrong list, e.g. one state's, would empty serving). */
export const MAX_UNLISTED_SHARE = 0.01;

export const ibgeMunicipios = shapedPipeline({
  name: 'ibge-municipios',
  relation: IBGE_MUNICIPIOS,
  // A folder may hold several years: the newest mesh wins.
  source: {
    pattern: MESH_FILE, ext: /\.zip$/i, what: 'BR_Municipios_<YYYY>.zip',
    newest: (names) => [...names].sort((a, b) => meshYear(a)! - meshYear(b)!).at(-1)!,
    releaseDate: (name) => (meshYear(name) ? `${meshYear(name)}-01-01` : null),
  },
  // The official list joined with the mesh is part of the source: a list-only change loads.
  sourceParts: async (ctx) => listPart(await runList(ctx)),
  read: { srid: 4674 },
  repairPolygons: true,
  classify: classifyMesh,
  kept: keptMunicipalities,
  values: (file, asOf) => ({ ano: meshYear(file.name) ?? Number(asOf.slice(0, 4)) }),
  replacementChars: 'own',
  overlay: { camada: 'municipio', kind: 'area', filter: 'l.is_municipio' },
  async facts({ client, t, ctx, target, file, asOf, facts, staged, verdicts, rowsLoaded }): Promise<Pick<MeshFacts, 'ibge' | 'lista_oficial'>> {
    const fileYear = meshYear(file.name);
    const ano = fileYear ?? Number(asOf.slice(0, 4));
    const report = await meshReport(client, { target, classified: t.classified });
    const naoMunicipios = report.filter((r) => r.kind === 'nao_municipio').map((r) => ({ geocodigo: r.geocodigo, nome: r.nome!, uf: r.uf! }));
    const repetidos = report.filter((r) => r.kind === 'codigo_repetido').map((r) => ({ geocodigo: r.geocodigo, feicoes: r.features! }));
    const named = (kind: string): Municipio[] => report.filter((r) => r.kind === kind).map((r) => ({ geocodigo: r.geocodigo, nome: r.nome!, uf: r.uf! }));
    const list = runLists.get(ctx) ?? { missing: 'not read' };
    const lista: MeshFacts['lista_oficial'] = 'municipios' in list
      ? { fonte: list.fonte, municipios: list.municipios.length, sem_malha: named('sem_malha'), fora_da_lista: named('fora_da_lista') }
      : { fonte: null, ausente: list.missing, municipios: 0, sem_malha: [], fora_da_lista: [] };
    const n = facts.notes;
    if (lista.fonte === null) n.push(`no official municipality list (${lista.ausente}): municipalities told apart by their code (municipality number 0000 is not one)`);
    if (lista.sem_malha.length) {
      n.push(`${lista.sem_malha.length} official municipalities are not in the mesh (served with a NULL geometry): ${lista.sem_malha.slice(0, 20).map((m) => `${m.geocodigo} ${m.nome} (${m.uf})`).join(', ')}`);
    }
    if (lista.fora_da_lista.length) {
      const shaped = lista.fora_da_lista.length + rowsLoaded - lista.sem_malha.length - naoMunicipios.length;
      const share = lista.fora_da_lista.length / Math.max(1, shaped);
      const what = `${lista.fora_da_lista.length} mesh features have a municipality's code that the official list (${lista.fonte}) lacks`;
      n.push(`${what} (not municipalities): ${lista.fora_da_lista.slice(0, 20).map((m) => `${m.geocodigo} ${m.nome} (${m.uf})`).join(', ')}`);
      if (share > MAX_UNLISTED_SHARE) facts.failures.push({ rule: 'official_list_mismatch', message: `${what}: ${(share * 100).toFixed(1)} % of them (is it the national list?)`, value: share, threshold: MAX_UNLISTED_SHARE });
    }
    const okFeatures = verdicts.ok ?? 0;
    if (okFeatures > rowsLoaded) facts.dropped.duplicate_geocodigo_merged = okFeatures - rowsLoaded;
    if (naoMunicipios.length) {
      facts.notes.push(
        `${naoMunicipios.length} features are not municipalities (kept in the snapshot, left out of serving.ibge_municipios and serving.ref_municipio): ` +
          naoMunicipios.map((n) => `${n.geocodigo} ${n.nome} (${n.uf})`).join(', '),
      );
    }
    for (const r of repetidos) facts.notes.push(`code ${r.geocodigo} is carried by ${r.feicoes} features: their polygons were merged into one row`);
    // Names are the crosswalk's join key: corrupted ones must not replace good ones.
    facts.encoding.replacementChars = staged.replacementChars;
    if (staged.replacementChars > 0) {
      const why = facts.encoding.assumed ? 'the source bytes already carry it' : `the DBF is not in the encoding its .cpg declares (${facts.encoding.name})`;
      facts.failures.push({ rule: 'replacement_characters', message: `${staged.replacementChars} values hold U+FFFD: ${why}`, value: staged.replacementChars });
    }
    if (fileYear === null) facts.notes.push(`${file.name} carries no mesh year (BR_Municipios_<YYYY>.zip): ano = ${ano}, the as-of year`);
    return {
      ibge: { ano, ano_do_arquivo: fileYear !== null, municipios: rowsLoaded - naoMunicipios.length, nao_municipios: naoMunicipios, codigos_repetidos: repetidos },
      lista_oficial: lista,
    };
  },
});
