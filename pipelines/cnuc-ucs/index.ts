// CNUC conservation units (MMA), national, from the `shp_cnuc_YYYY_MM.zip` release (the
// YYYY_MM is the snapshot's as-of date). Every DBF field is text: areas are parsed with
// validation, `cria_ano` is a dd-mm-yyyy date, and `uf` holds full upper-case state
// names that become siglas through a 27-entry accent-insensitive map; an unknown name
// fails the quality gate (SOURCES §5.7). Duplicate cd_cnuc: the copy read last is kept.
import { describeCounts, polygonLayerPipeline, type LayerField } from '../_polygon-layer.ts';
import { namedSql, render } from '../../src/sql.ts';

/** Canonical staging name ← spellings of the 2024_02 and 2024_10 DBFs. */
export const CNUC_FIELDS: LayerField[] = [
  { name: 'codigo', aliases: ['cd_cnuc'], required: true },
  { name: 'uc_id', aliases: ['uc_id'] },
  { name: 'nome', aliases: ['nome_uc'], required: true },
  { name: 'categoria', aliases: ['categoria'] },
  { name: 'grupo', aliases: ['grupo'] },
  { name: 'esfera', aliases: ['esfera'] },
  { name: 'data_criacao', aliases: ['cria_ano'] },
  { name: 'ato_criacao', aliases: ['cria_ato'] },
  { name: 'outros_atos', aliases: ['outro_ato'] },
  { name: 'plano_manejo', aliases: ['pl_manejo'] },
  { name: 'cogestor', aliases: ['co_gestor'] },
  { name: 'quali_pol', aliases: ['quali_pol'] },
  { name: 'ppgr', aliases: ['ppgr'] },
  { name: 'area_total_ha', aliases: ['ha_total'] },
  { name: 'area_ato_ha', aliases: ['ha_ato'] },
  { name: 'area_fonte_ha', aliases: ['area_ha'] },
  { name: 'ufs', aliases: ['uf'] },
  { name: 'municipios', aliases: ['municipio'] },
  { name: 'orgao_gestor', aliases: ['org_gestor'] },
  { name: 'categoria_iucn', aliases: ['cat_iucn'] },
  { name: 'amazonia', aliases: ['amazonia'] },
  { name: 'caatinga', aliases: ['caatinga'] },
  { name: 'cerrado', aliases: ['cerrado'] },
  { name: 'matlantica', aliases: ['matlantica'] },
  { name: 'pampa', aliases: ['pampa'] },
  { name: 'pantanal', aliases: ['pantanal'] },
  { name: 'marinho', aliases: ['marinho'] },
  { name: 'situacao', aliases: ['situacao'] },
  { name: 'limite', aliases: ['limite'] },
  { name: 'docleg_id', aliases: ['docleg_id'] },
  { name: 'wdpa_pid', aliases: ['wdpa_pid'] },
  { name: 'nome_abreviado', aliases: ['nomeabrev'] },
  // Always empty (SOURCES §5.4): dropped.
  { name: 'gml_id', aliases: ['gml_id'], drop: true },
];

const BIOMES = ['amazonia', 'caatinga', 'cerrado', 'matlantica', 'pampa', 'pantanal', 'marinho'];

/** shp_cnuc_2024_10.zip → 2024-10-01 (SOURCES §1.8: CNUC's release is the YYYY_MM). */
export function cnucReleaseDate(fileName: string): string | null {
  const m = /cnuc_(\d{4})_(\d{2})/i.exec(fileName);
  return m && Number(m[2]) >= 1 && Number(m[2]) <= 12 ? `${m[1]}-${m[2]}-01` : null;
}

export const cnucUcs = polygonLayerPipeline({
  name: 'cnuc-ucs',
  relation: 'cnuc_ucs',
  fields: CNUC_FIELDS,
  source: { fileName: 'shp_cnuc.zip', pattern: /^shp_cnuc_\d{4}_\d{2}\.zip$/i, releaseDate: cnucReleaseDate },
  // The layer carries no update date: among copies of a cd_cnuc the one read last wins.
  classify: { key: "nullif(btrim(s.codigo), '')" },
  build: 'queries/cnuc_build',
  checks: {
    dates: [{ column: 'data_criacao', kind: 'etl.date_kind' }],
    numbers: ['area_total_ha', 'area_ato_ha', 'area_fonte_ha', ...BIOMES],
  },
  emptyColumns: ['nome', 'categoria', 'grupo', 'esfera', 'data_criacao', 'area_total_ha', 'ufs', 'municipios', 'orgao_gestor', 'situacao'],
  ginColumns: ['ufs'],
  async extraChecks({ client, vars, facts }) {
    const r = await client.query(render(namedSql('queries/cnuc_unknown_ufs'), vars));
    if (!r.rows.length) return;
    const units = (await client.query(`SELECT count(*)::int AS n FROM ${vars.target} WHERE extra ? 'ufs'`)).rows[0].n as number;
    facts.failures.push({
      rule: 'unknown_uf_name',
      message: `${units} unit(s) name a state outside the 27-entry map: ${describeCounts(r.rows)} (kept in extra.ufs)`,
      value: units,
      threshold: 0,
    });
  },
});
