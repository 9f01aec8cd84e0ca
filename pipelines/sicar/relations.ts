// SICAR's two relations, declared once each (src/etl/relation.ts): columns in template order
// with their types, the staged source fields with every known spelling, and the indexes.
// The typed pass (sql/queries/sicar_typed_*.sql) types each staged row once into the
// template's columns, plus its verdict and what the facts count; the builds read only the
// typed rows (`s` below) — no join back to the staging tables, no re-scan after the build.
// Staged names are the SICAR field names the report has always used (dat_criaca, ind_status…).
import { defineRelation } from '../../src/etl/relation.ts';

const typed = (name: string) => `s.${name}`;

/** snap.car_imovel: one row per CAR number (the most recently updated copy, then the last read). */
export const CAR_IMOVEL = defineRelation({
  name: 'car_imovel',
  columns: [
    { name: 'car', type: 'text', from: ['cod_imovel'], required: true, sql: typed('car') },
    { name: 'uf', type: 'text', sql: typed('uf') },
    { name: 'cod_municipio_ibge', type: 'text', sql: typed('cod_municipio_ibge') },
    { name: 'municipio', type: 'text', from: ['municipio', 'nom_munici'], sql: typed('municipio'), counted: true },
    { name: 'situacao', type: 'text', sql: typed('situacao'), counted: true },
    { name: 'tipo', type: 'text', sql: typed('tipo'), counted: true },
    { name: 'condicao', type: 'text', sql: typed('condicao'), counted: true },
    { name: 'modulos_fiscais', type: 'double precision', sql: typed('modulos_fiscais'), counted: true },
    { name: 'area_total_ha', type: 'double precision', sql: typed('area_total_ha'), counted: true },
    { name: 'area_calculada_ha', type: 'double precision', sql: typed('area_calculada_ha') },
    // Hectares of each theme (sicar_theme_area.sql); NULL when the theme was not loaded.
    { name: 'app_ha', type: 'double precision', sql: 'CASE WHEN v.apps_loaded THEN coalesce(ta.app_ha, 0) END' },
    { name: 'reserva_legal_ha', type: 'double precision', sql: 'CASE WHEN v.rl_loaded THEN coalesce(ta.reserva_legal_ha, 0) END' },
    { name: 'area_consolidada_ha', type: 'double precision', sql: 'CASE WHEN v.ac_loaded THEN coalesce(ta.area_consolidada_ha, 0) END' },
    { name: 'data_inscricao', type: 'date', sql: typed('data_inscricao'), counted: true },
    { name: 'data_atualizacao', type: 'date', sql: typed('data_atualizacao'), counted: true },
    { name: 'centroid', type: 'geometry(Point,4326)', sql: 'ST_Centroid(s.geom)' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: typed('geom') },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  // Staged under SICAR's names; the typed pass reads them (keep: 'sql'). The WFS names come
  // whole and cut to 10 characters (the WFS layer saved as a shapefile: status_imo, data_atual).
  fields: [
    { name: 'cod_estado', from: ['cod_estado', 'uf'], keep: 'sql' },
    { name: 'num_area', from: ['num_area', 'area'], keep: 'sql' },
    { name: 'ind_status', from: ['ind_status', 'situacao', 'status_imovel', 'status_imo'], keep: 'sql' },
    { name: 'des_condic', from: ['des_condic', 'condicao_i', 'condicao'], keep: 'sql' },
    { name: 'ind_tipo', from: ['ind_tipo', 'tipo_imove', 'tipo_imovel'], keep: 'sql' },
    { name: 'mod_fiscal', from: ['mod_fiscal', 'num_modulo', 'm_fiscal'], keep: 'sql' },
    { name: 'dat_criaca', from: ['dat_criaca', 'dat_criacao'], keep: 'sql' },
    { name: 'dat_atuali', from: ['dat_atuali', 'data_atualizacao', 'data_atual'], keep: 'sql' },
  ],
  indexes: { primaryKey: ['car'], gist: ['geom'], btree: [{ name: 'mun', columns: ['cod_municipio_ibge'] }] },
});

/** snap.car_tema: the kept polygons of every theme loaded (APPS, RESERVA_LEGAL, AREA_CONSOLIDADA). */
export const CAR_TEMA = defineRelation({
  name: 'car_tema',
  columns: [
    // cod_imovel is checked per layer (checkThemeLayers): a layer without it is linked spatially.
    { name: 'car', type: 'text', from: ['cod_imovel'], sql: typed('car') },
    { name: 'uf', type: 'text', sql: typed('uf') },
    { name: 'tema_base', type: 'text', sql: typed('tema_base') },
    { name: 'cod_tema', type: 'text', from: ['cod_tema'], sql: typed('cod_tema') },
    { name: 'nome_tema', type: 'text', sql: typed('nome_tema') },
    { name: 'area_ha', type: 'double precision', sql: typed('area_ha') },
    { name: 'area_calculada_ha', type: 'double precision', sql: typed('area_calculada_ha') },
    { name: 'situacao', type: 'text', sql: typed('situacao') },
    { name: 'condicao', type: 'text', sql: typed('condicao') },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: typed('geom') },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  fields: [
    { name: 'nom_tema', from: ['nom_tema'], keep: 'sql' },
    { name: 'num_area', from: ['num_area'], keep: 'sql' },
    { name: 'ind_status', from: ['ind_status'], keep: 'sql' },
    { name: 'des_condic', from: ['des_condic'], keep: 'sql' },
  ],
  indexes: { gist: ['geom'], btree: ['car'] },
});
