// INCRA quilombola areas, national, from `Áreas de Quilombolas.zip` (a URL with the
// encoded name, a URL prefix, or a folder holding the manually dropped zip: the download
// is often unavailable, SOURCES §6.1). Dates mix dd/mm/yyyy and yyyy-mm-dd in one column:
// both parse, also followed by a time of day (an export's '15/03/2018 00:00:00': the day as
// written, sql/0119), anything else is NULL, counted, and kept as text in `extra`. `cd_uf` is a
// sigla. Duplicate cd_quilomb: the copy read last is kept.
//
// Keys: cd_quilomb when it holds a code. In the real layer it is '**********' in most rows
// (a DBF numeric overflow, no value): those territories are kept under a stable fallback key,
// the process number, else UF/municipality/community, else a hash of the geometry, whichever
// no other such row shares (sql/queries/incra_keys.sql). The report counts the overflowed
// cells (fields.overflowed.codigo) and the fallbacks (facts.incra.chave_substituta).
import { defineRelation, type ColumnDef } from '../../src/etl/relation.ts';
import { describeCounts, shapedPipeline } from '../../src/etl/shape.ts';
import { sqlText } from '../../src/sql.ts';
import { polygonLayer } from '../_polygon-layer.ts';
import { createFallbackKeys, fallbackKeyCounts, unknownUfs } from './queries.ts';

/** The official file name (with a non-ASCII 'Á'; URLs carry it percent-encoded). */
export const INCRA_FILE_NAME = 'Áreas de Quilombolas.zip';

/** Dates come as dd/mm/yyyy or yyyy-mm-dd in the same column, maybe with a time (sql/0119). */
const date = (name: string, from: string[]): ColumnDef => ({ name, type: 'date', from, convert: 'date_dmy_iso', counted: true });

/** snap.incra_quilombos: columns in template order with their shapefile names (SOURCES §6.4). */
export const INCRA_QUILOMBOS = defineRelation({
  name: 'incra_quilombos',
  columns: [
    { name: 'codigo', type: 'text', from: ['cd_quilomb', 'cd_quilombo'], required: true, sql: 'c.codigo' },
    { name: 'comunidade', type: 'text', from: ['nm_comunid', 'nm_comunidade'], required: true, counted: true },
    { name: 'municipio', type: 'text', from: ['nm_municip', 'nm_municipio'], counted: true },
    // A sigla (SOURCES §6.7); anything else loads as NULL with its text kept.
    {
      name: 'uf', type: 'text', from: ['cd_uf'], counted: true,
      sql: 'CASE WHEN etl.uf_ibge_code(btrim(s.uf)) IS NOT NULL THEN upper(btrim(s.uf)) END',
      keepRaw: "CASE WHEN btrim(s.uf) <> '' AND etl.uf_ibge_code(btrim(s.uf)) IS NULL THEN s.uf END",
    },
    { name: 'sr_incra', type: 'text', from: ['cd_sr'] },
    { name: 'numero_processo', type: 'text', from: ['nr_process', 'nr_processo'] },
    { name: 'fase', type: 'text', from: ['fase'], counted: true },
    { name: 'esfera', type: 'text', from: ['esfera'], counted: true },
    { name: 'responsavel', type: 'text', from: ['responsave', 'responsavel'] },
    { name: 'familias', type: 'integer', from: ['nr_familia', 'nr_familias'], counted: true },
    { name: 'area_ha', type: 'double precision', from: ['nr_area_ha'], counted: true, convert: 'area' },
    { name: 'perimetro', type: 'double precision', from: ['nr_perimet', 'nr_perimetro'] },
    { name: 'area_calc_fonte', type: 'double precision', from: ['area_calc_'] },
    { name: 'perimetro_calc_fonte', type: 'double precision', from: ['perimetro_'] },
    // geodesic: these polygons reach far from the Albers origin
    { name: 'area_calculada_ha', type: 'double precision', sql: 'ST_Area(c.geom::geography) / 10000' },
    { name: 'titulado', type: 'boolean', from: ['st_titulad', 'st_titulado'], counted: true },
    date('data_portaria', ['dt_publica', 'dt_publicacao']),
    date('data_publicacao_decreto', ['dt_public1']),
    date('data_decreto', ['dt_decreto']),
    date('data_titulacao', ['dt_titulac', 'dt_titulacao']),
    { name: 'cod_sipra', type: 'text', from: ['cd_sipra'] },
    { name: 'observacao', type: 'text', from: ['ob_descric', 'ob_descricao'] },
    { name: 'tipo_levantamento', type: 'text', from: ['tp_levanta', 'tp_levantamento'] },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 'c.geom' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  // A territory keyed by a fallback says which one ('processo', 'comunidade', 'geometria').
  extra: { codigo_origem: 'k.origem' },
  indexes: { primaryKey: ['codigo'], gist: ['geom'], btree: ['uf'] },
});

/** The staging fields (canonical name ← every spelling), as the read stage maps them. */
export const INCRA_FIELDS = INCRA_QUILOMBOS.staging;

export const incraQuilombos = shapedPipeline({
  name: 'incra-quilombos',
  relation: INCRA_QUILOMBOS,
  source: { fileName: INCRA_FILE_NAME, pattern: /quilomb.*\.zip$/i, ext: /\.zip$/i, what: INCRA_FILE_NAME, fileDates: true },
  // The layer carries no update date: among copies of a cd_quilomb the one read last wins.
  ...polygonLayer({
    key: 'etl.code_text(s.codigo)',
    async fallbackKeys({ client, t }) {
      await createFallbackKeys(client, { keys: t.aux('keys'), stage: t.stage });
      return t.aux('keys');
    },
  }),
  joins: (t) => sqlText(`LEFT JOIN ${t.aux('keys')} k ON k.src_seq = s.src_seq`),
  overlay: { camada: 'quilombo', kind: 'area' },
  async facts({ client, t, facts }) {
    const keys = await fallbackKeyCounts(client, { keys: t.aux('keys'), classified: t.classified });
    const fallbacks: Record<string, number> = Object.fromEntries(keys.map((r) => [r.origem, r.n]));
    const total = Object.values(fallbacks).reduce((a, b) => a + b, 0);
    if (total) facts.notes.push(`${total} territories without a usable cd_quilomb kept under a fallback key (${keys.map((r) => `${r.origem} ${r.n}`).join(', ')}; extra.codigo_origem says which)`);
    const r = await unknownUfs(client, t);
    if (r.length) facts.notes.push(`cd_uf values that are not UF siglas (uf loaded as NULL, text kept in extra): ${describeCounts(r)}`);
    return { incra: { chave_substituta: fallbacks } };
  },
});
