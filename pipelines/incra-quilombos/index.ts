// INCRA quilombola areas, national, from `Áreas de Quilombolas.zip` (a URL with the
// encoded name, a URL prefix, or a folder holding the manually dropped zip: the download
// is often unavailable, SOURCES §6.1). Dates mix dd/mm/yyyy and yyyy-mm-dd in one column:
// both parse, anything else is NULL, counted, and kept as text in `extra`. `cd_uf` is a
// sigla. Duplicate cd_quilomb: the copy read last is kept.
//
// Keys: cd_quilomb when it holds a code. In the real layer it is '**********' in most rows
// (a DBF numeric overflow, no value): those territories are kept under a stable fallback key,
// the process number, else UF/municipality/community, else a hash of the geometry, whichever
// no other such row shares (sql/queries/incra_keys.sql). The report counts the overflowed
// cells (fields.overflowed.codigo) and the fallbacks (facts.incra.chave_substituta).
import { describeCounts, polygonLayerPipeline, type LayerField } from '../_polygon-layer.ts';
import { namedSql, render } from '../../src/sql.ts';

/** The official file name (with a non-ASCII 'Á'; URLs carry it percent-encoded). */
export const INCRA_FILE_NAME = 'Áreas de Quilombolas.zip';

/** Canonical staging name ← shapefile name (SOURCES §6.4). */
export const INCRA_FIELDS: LayerField[] = [
  { name: 'codigo', aliases: ['cd_quilomb', 'cd_quilombo'], required: true },
  { name: 'comunidade', aliases: ['nm_comunid', 'nm_comunidade'], required: true },
  { name: 'municipio', aliases: ['nm_municip', 'nm_municipio'] },
  { name: 'uf', aliases: ['cd_uf'] },
  { name: 'sr_incra', aliases: ['cd_sr'] },
  { name: 'numero_processo', aliases: ['nr_process', 'nr_processo'] },
  { name: 'data_portaria', aliases: ['dt_publica', 'dt_publicacao'] },
  { name: 'data_publicacao_decreto', aliases: ['dt_public1'] },
  { name: 'data_decreto', aliases: ['dt_decreto'] },
  { name: 'data_titulacao', aliases: ['dt_titulac', 'dt_titulacao'] },
  { name: 'familias', aliases: ['nr_familia', 'nr_familias'] },
  { name: 'area_ha', aliases: ['nr_area_ha'] },
  { name: 'perimetro', aliases: ['nr_perimet', 'nr_perimetro'] },
  { name: 'area_calc_fonte', aliases: ['area_calc_'] },
  { name: 'perimetro_calc_fonte', aliases: ['perimetro_'] },
  { name: 'cod_sipra', aliases: ['cd_sipra'] },
  { name: 'observacao', aliases: ['ob_descric', 'ob_descricao'] },
  { name: 'titulado', aliases: ['st_titulad', 'st_titulado'] },
  { name: 'tipo_levantamento', aliases: ['tp_levanta', 'tp_levantamento'] },
  { name: 'esfera', aliases: ['esfera'] },
  { name: 'fase', aliases: ['fase'] },
  { name: 'responsavel', aliases: ['responsave', 'responsavel'] },
];

const DATE_COLUMNS = ['data_portaria', 'data_publicacao_decreto', 'data_decreto', 'data_titulacao'];

export const incraQuilombos = polygonLayerPipeline({
  name: 'incra-quilombos',
  relation: 'incra_quilombos',
  fields: INCRA_FIELDS,
  source: { fileName: INCRA_FILE_NAME, pattern: /quilomb.*\.zip$/i },
  // The layer carries no update date: among copies of a cd_quilomb the one read last wins.
  classify: { key: 'etl.code_text(s.codigo)', fallbackKeys: 'queries/incra_keys' },
  build: 'queries/incra_build',
  checks: {
    dates: DATE_COLUMNS.map((column) => ({ column, kind: 'etl.date_dmy_iso_kind' as const })),
    numbers: ['area_ha', 'perimetro', 'area_calc_fonte', 'perimetro_calc_fonte'],
    flags: ['titulado'],
  },
  emptyColumns: ['comunidade', 'municipio', 'uf', 'fase', 'esfera', 'familias', 'area_ha', 'titulado', ...DATE_COLUMNS],
  btreeColumns: ['uf'],
  async extraChecks({ client, vars, facts }) {
    const keys = await client.query(
      `SELECT k.origem, count(*)::int AS n FROM ${vars.keys} k JOIN ${vars.classified} c ON c.src_seq = k.src_seq
        WHERE c.verdict = 'ok' AND k.origem IS NOT NULL GROUP BY 1 ORDER BY 1`,
    );
    const fallbacks: Record<string, number> = Object.fromEntries(keys.rows.map((r) => [r.origem, r.n]));
    Object.assign(facts, { incra: { chave_substituta: fallbacks } });
    const total = Object.values(fallbacks).reduce((a, b) => a + b, 0);
    if (total) facts.notes.push(`${total} territories without a usable cd_quilomb kept under a fallback key (${keys.rows.map((r) => `${r.origem} ${r.n}`).join(', ')}; extra.codigo_origem says which)`);
    const r = await client.query(render(namedSql('queries/incra_unknown_ufs'), vars));
    if (r.rows.length) facts.notes.push(`cd_uf values that are not UF siglas (uf loaded as NULL, text kept in extra): ${describeCounts(r.rows)}`);
    const frac = await client.query(`SELECT count(*)::int AS n FROM ${vars.target} WHERE extra ? 'familias'`);
    if (frac.rows[0].n) facts.notes.push(`familias: ${frac.rows[0].n} value(s) are not whole numbers (loaded as NULL, source text kept in extra)`);
  },
});
