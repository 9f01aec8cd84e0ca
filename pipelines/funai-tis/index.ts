// FUNAI indigenous lands (tis_poligonais), national, from the WFS SHAPE-ZIP or a dropped
// zip. Field names come in two spellings: the WFS's full names and the 10-character DBF
// names (SOURCES §4.4); both map to the same canonical columns. Accents that arrive as
// U+FFFD fail the quality gate (SOURCES §4.2). Duplicate terrai_codigo: the copy with the
// latest data_atualizacao is kept, then the one read last.
import { describeCounts, polygonLayerPipeline, type LayerField } from '../_polygon-layer.ts';
import { namedSql, render } from '../../src/sql.ts';

/** Canonical staging name ← WFS name, then the truncated shapefile name. */
export const FUNAI_FIELDS: LayerField[] = [
  { name: 'codigo', aliases: ['terrai_codigo', 'terrai_cod'], required: true },
  { name: 'nome', aliases: ['terrai_nome', 'terrai_nom'], required: true },
  { name: 'etnias', aliases: ['etnia_nome'] },
  { name: 'municipios', aliases: ['municipio_nome', 'municipio_'] },
  { name: 'ufs', aliases: ['uf_sigla'] },
  { name: 'area_declarada_ha', aliases: ['superficie_perimetro_ha', 'superficie'] },
  { name: 'fase', aliases: ['fase_ti'] },
  { name: 'modalidade', aliases: ['modalidade_ti', 'modalidade'] },
  { name: 'reestudo', aliases: ['reestudo_ti', 'reestudo_t'] },
  { name: 'coordenacao_regional', aliases: ['cr'] },
  { name: 'faixa_fronteira', aliases: ['faixa_fronteira', 'faixa_fron'] },
  { name: 'unidade_adm_codigo', aliases: ['undadm_codigo', 'undadm_cod'] },
  { name: 'unidade_adm_nome', aliases: ['undadm_nome', 'undadm_nom'] },
  { name: 'unidade_adm_sigla', aliases: ['undadm_sigla', 'undadm_sig'] },
  { name: 'dominio_uniao', aliases: ['dominio_uniao', 'dominio_un'] },
  { name: 'data_atualizacao', aliases: ['data_atualizacao', 'data_atual'] },
  // Always 0 in the service (SOURCES §4.4): dropped. `gid` (server row id) stays in extra.
  { name: 'epsg', aliases: ['epsg'], drop: true },
];

export const funaiTis = polygonLayerPipeline({
  name: 'funai-tis',
  relation: 'funai_tis',
  fields: FUNAI_FIELDS,
  // GeoServer names the SHAPE-ZIP after the layer; a manual drop keeps any *.zip name.
  source: { fileName: 'tis_poligonais.zip', pattern: /^tis_poligonais.*\.zip$/i },
  classify: { key: 'etl.code_text(s.codigo)', newest: 'etl.parse_date(s.data_atualizacao)' },
  build: 'queries/funai_build',
  checks: {
    dates: [{ column: 'data_atualizacao', kind: 'etl.date_kind' }],
    numbers: ['area_declarada_ha'],
    flags: ['faixa_fronteira', 'dominio_uniao'],
  },
  emptyColumns: ['nome', 'etnias', 'municipios', 'ufs', 'area_declarada_ha', 'fase', 'modalidade', 'coordenacao_regional', 'faixa_fronteira', 'dominio_uniao', 'data_atualizacao'],
  ginColumns: ['ufs'],
  failOnReplacementChars: true,
  async extraChecks({ client, vars, facts }) {
    const r = await client.query(render(namedSql('queries/funai_unknown_ufs'), vars));
    if (r.rows.length) facts.notes.push(`uf_sigla values that are not UF siglas (loaded as given): ${describeCounts(r.rows)}`);
  },
});
