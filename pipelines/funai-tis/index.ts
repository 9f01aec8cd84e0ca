// FUNAI indigenous lands (tis_poligonais), national, from the WFS SHAPE-ZIP or a dropped
// zip. Field names come in two spellings: the WFS's full names and the 10-character DBF
// names (SOURCES §4.4); both map to the same canonical columns. Accents that arrive as
// U+FFFD fail the quality gate (SOURCES §4.2). Duplicate terrai_codigo: the copy with the
// latest data_atualizacao is kept, then the one read last.
import { defineRelation } from '../../src/etl/relation.ts';
import { describeCounts, shapedPipeline } from '../../src/etl/shape.ts';
import { polygonLayer } from '../_polygon-layer.ts';
import { unknownUfs } from './queries.ts';

/** snap.funai_tis: columns in template order, each with its WFS name, then its truncated shapefile name. */
export const FUNAI_TIS = defineRelation({
  name: 'funai_tis',
  columns: [
    { name: 'codigo', type: 'text', from: ['terrai_codigo', 'terrai_cod'], required: true, sql: 'c.codigo' },
    { name: 'nome', type: 'text', from: ['terrai_nome', 'terrai_nom'], required: true, counted: true },
    { name: 'etnias', type: 'text[]', from: ['etnia_nome'], counted: true },
    { name: 'municipios', type: 'text[]', from: ['municipio_nome', 'municipio_'], counted: true },
    { name: 'ufs', type: 'text[]', from: ['uf_sigla'], convert: 'uf_list', counted: true },
    { name: 'area_declarada_ha', type: 'double precision', from: ['superficie_perimetro_ha', 'superficie'], counted: true, convert: 'area' },
    // geodesic: these polygons reach far from the Albers origin
    { name: 'area_calculada_ha', type: 'double precision', sql: 'ST_Area(c.geom::geography) / 10000' },
    { name: 'fase', type: 'text', from: ['fase_ti'], counted: true },
    { name: 'modalidade', type: 'text', from: ['modalidade_ti', 'modalidade'], counted: true },
    { name: 'reestudo', type: 'text', from: ['reestudo_ti', 'reestudo_t'] },
    { name: 'coordenacao_regional', type: 'text', from: ['cr'], counted: true },
    { name: 'faixa_fronteira', type: 'boolean', from: ['faixa_fronteira', 'faixa_fron'], counted: true },
    { name: 'unidade_adm_codigo', type: 'text', from: ['undadm_codigo', 'undadm_cod'], convert: 'code' },
    { name: 'unidade_adm_nome', type: 'text', from: ['undadm_nome', 'undadm_nom'] },
    { name: 'unidade_adm_sigla', type: 'text', from: ['undadm_sigla', 'undadm_sig'] },
    { name: 'dominio_uniao', type: 'boolean', from: ['dominio_uniao', 'dominio_un'], counted: true },
    { name: 'data_atualizacao', type: 'date', from: ['data_atualizacao', 'data_atual'], counted: true },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 'c.geom' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  // Always 0 in the service (SOURCES §4.4): dropped. `gid` (server row id) stays in extra.
  fields: [{ name: 'epsg', from: ['epsg'], keep: 'drop' }],
  indexes: { primaryKey: ['codigo'], gist: ['geom'], gin: ['ufs'] },
});

/** The staging fields (canonical name ← every spelling), as the read stage maps them. */
export const FUNAI_FIELDS = FUNAI_TIS.staging;

/**
 * The feature cap a WFS request sets (maxFeatures in 1.x, count in 2.0; any case), or null for
 * a URL without one and for a dropped file. The server stops at it without saying so.
 */
export function wfsFeatureLimit(uri: string): number | null {
  let params: URLSearchParams;
  try {
    params = new URL(uri).searchParams;
  } catch {
    return null;
  }
  for (const [k, v] of params) if (/^(maxfeatures|count)$/i.test(k) && /^\d+$/.test(v.trim())) return Number(v);
  return null;
}

export const funaiTis = shapedPipeline({
  name: 'funai-tis',
  relation: FUNAI_TIS,
  // GeoServer names the SHAPE-ZIP after the layer; a manual drop keeps any *.zip name.
  source: { fileName: 'tis_poligonais.zip', pattern: /^tis_poligonais.*\.zip$/i, ext: /\.zip$/i, what: 'tis_poligonais.zip', fileDates: true },
  ...polygonLayer({ key: 'etl.code_text(s.codigo)', newest: 'etl.parse_date(s.data_atualizacao)' }),
  replacementChars: 'fail',
  overlay: { camada: 'ti', kind: 'area' },
  async facts({ client, t, facts, file, staged }) {
    // As many lands as the request's cap: the server cut the layer there (SOURCES §4.7).
    const limit = wfsFeatureLimit(file.sourceUri);
    if (limit !== null && staged.rows >= limit) {
      facts.failures.push({
        rule: 'wfs_feature_limit',
        message: `the WFS answered ${staged.rows} features, its maxFeatures/count limit (${limit}): lands past it may be missing; raise the limit in the source URL`,
        value: staged.rows,
        threshold: limit,
      });
    }
    const r = await unknownUfs(client, t);
    if (r.length) facts.notes.push(`uf_sigla values that are not UF siglas (loaded as given): ${describeCounts(r)}`);
  },
});
