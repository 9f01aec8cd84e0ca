// CNUC conservation units (MMA), national, from the `shp_cnuc_YYYY_MM.zip` release (the
// YYYY_MM is the snapshot's as-of date). Every DBF field is text: areas are parsed with
// validation, `cria_ano` is a dd-mm-yyyy date, and `uf` holds full upper-case state
// names that become siglas through a 27-entry accent-insensitive map; an unknown name
// fails the quality gate (SOURCES §5.7). Duplicate cd_cnuc: the copy read last is kept.
import { todayInBrazil } from '../../src/dates.ts';
import { AgroError } from '../../src/errors.ts';
import { ckanResources, isPackageShow, type CkanResource } from '../../src/etl/ckan.ts';
import type { FetchedFile } from '../../src/etl/download.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import { defineRelation, type FieldDef } from '../../src/etl/relation.ts';
import { describeCounts, fetchFile, shapedPipeline, type ShapeSpec } from '../../src/etl/shape.ts';
import { fetchOneFile } from '../../src/etl/source-files.ts';
import { polygonLayer } from '../_polygon-layer.ts';
import { unitsWithUnknownUf, unknownUfNames } from './queries.ts';

const BIOMES = ['amazonia', 'caatinga', 'cerrado', 'matlantica', 'pampa', 'pantanal', 'marinho'];
const biomeObject = (value: (b: string) => string) => `nullif(jsonb_strip_nulls(jsonb_build_object(${BIOMES.map((b) => `'${b}', ${value(b)}`).join(', ')})), '{}'::jsonb)`;

/** snap.cnuc_ucs: columns in template order, with the spellings of the 2024_02 and 2024_10 DBFs. */
export const CNUC_UCS = defineRelation({
  name: 'cnuc_ucs',
  columns: [
    { name: 'codigo', type: 'text', from: ['cd_cnuc'], required: true, sql: 'c.codigo' },
    { name: 'uc_id', type: 'text', from: ['uc_id'], convert: 'code' },
    { name: 'nome', type: 'text', from: ['nome_uc'], required: true, counted: true },
    { name: 'categoria', type: 'text', from: ['categoria'], counted: true },
    { name: 'grupo', type: 'text', from: ['grupo'], counted: true },
    { name: 'esfera', type: 'text', from: ['esfera'], counted: true },
    { name: 'data_criacao', type: 'date', from: ['cria_ano'], counted: true },
    { name: 'ato_criacao', type: 'text', from: ['cria_ato'] },
    { name: 'outros_atos', type: 'text', from: ['outro_ato'] },
    { name: 'plano_manejo', type: 'text', from: ['pl_manejo'] },
    { name: 'cogestor', type: 'text', from: ['co_gestor'] },
    { name: 'area_total_ha', type: 'double precision', from: ['ha_total'], counted: true, convert: 'area' },
    { name: 'area_ato_ha', type: 'double precision', from: ['ha_ato'], convert: 'area' },
    { name: 'area_fonte_ha', type: 'double precision', from: ['area_ha'], convert: 'area' },
    // Full state names → siglas (joins: u); a list naming an unknown state keeps its text in extra.
    { name: 'ufs', type: 'text[]', from: ['uf'], sql: 'u.ufs', keepRaw: 'CASE WHEN u.unknown THEN s.ufs END', counted: true },
    { name: 'municipios', type: 'text[]', from: ['municipio'], counted: true },
    { name: 'orgao_gestor', type: 'text', from: ['org_gestor'], counted: true },
    { name: 'categoria_iucn', type: 'text', from: ['cat_iucn'] },
    { name: 'situacao', type: 'text', from: ['situacao'], counted: true },
    { name: 'limite', type: 'text', from: ['limite'] },
    { name: 'quali_pol', type: 'text', from: ['quali_pol'] },
    { name: 'ppgr', type: 'text', from: ['ppgr'] },
    { name: 'docleg_id', type: 'text', from: ['docleg_id'], convert: 'code' },
    { name: 'wdpa_pid', type: 'text', from: ['wdpa_pid'], convert: 'code' },
    { name: 'nome_abreviado', type: 'text', from: ['nomeabrev'] },
    // One object of the biome areas; their text that is not a number is kept in extra.area_bioma_ha.
    {
      name: 'area_bioma_ha', type: 'jsonb',
      sql: biomeObject((b) => `etl.parse_number(s.${b})`),
      keepRaw: biomeObject((b) => `CASE WHEN btrim(s.${b}) <> '' AND etl.parse_number(s.${b}) IS NULL THEN s.${b} END`),
    },
    // geodesic: these polygons reach far from the Albers origin
    { name: 'area_calculada_ha', type: 'double precision', sql: 'ST_Area(c.geom::geography) / 10000' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 'c.geom' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  fields: [
    ...BIOMES.map((b): FieldDef => ({ name: b, from: [b], keep: 'sql', check: 'number' })),
    // Always empty (SOURCES §5.4): dropped.
    { name: 'gml_id', from: ['gml_id'], keep: 'drop' },
  ],
  joins: `CROSS JOIN LATERAL (
  SELECT nullif(array_agg(etl.uf_sigla_from_name(x) ORDER BY n) FILTER (WHERE etl.uf_sigla_from_name(x) IS NOT NULL), '{}'::text[]) AS ufs,
         coalesce(bool_or(etl.uf_sigla_from_name(x) IS NULL), false) AS unknown
  FROM unnest(etl.text_list(s.ufs)) WITH ORDINALITY AS l(x, n)
) u`,
  indexes: { primaryKey: ['codigo'], gist: ['geom'], gin: ['ufs'] },
});

/** The staging fields (canonical name ← every spelling), as the read stage maps them. */
export const CNUC_FIELDS = CNUC_UCS.staging;

/** shp_cnuc_2024_10.zip → 2024-10-01 (SOURCES §1.8: CNUC's release is the YYYY_MM). */
export function cnucReleaseDate(fileName: string): string | null {
  const m = /cnuc_(\d{4})_(\d{2})/i.exec(fileName);
  return m && Number(m[2]) >= 1 && Number(m[2]) <= 12 ? `${m[1]}-${m[2]}-01` : null;
}

/**
 * The newest shp_cnuc_YYYY_MM.zip among a CKAN dataset's resources, by the YYYY_MM in its file
 * name (resource ids change with every release: SOURCES §5.1), or null when there is none.
 */
export function pickCnucResource(resources: CkanResource[]): { name: string; url: string } | null {
  let best: { name: string; url: string; release: string } | null = null;
  for (const r of resources) {
    const url = r.url ?? '';
    let file = url.split('?')[0].split('/').pop() ?? '';
    try {
      file = decodeURIComponent(file);
    } catch { /* kept as written */ }
    const release = /^shp_cnuc_\d{4}_\d{2}\.zip$/i.test(file) ? cnucReleaseDate(file) : null;
    if (release && (!best || release > best.release)) best = { name: file, url, release };
  }
  return best && { name: best.name, url: best.url };
}

/** A CKAN package_show URL: its newest shp_cnuc_YYYY_MM.zip resource, fetched under its own name. */
async function fetchFromCkan(ctx: RunContext, src: string): Promise<FetchedFile[]> {
  const resources = await ckanResources(ctx, src);
  const picked = pickCnucResource(resources);
  if (!picked) throw new AgroError('source_not_found', `${src}: no shp_cnuc_YYYY_MM.zip resource among ${resources.length}`);
  return fetchOneFile(ctx, picked.url, { expect: 'zip', name: picked.name });
}

/**
 * The release names its month only: as of its first day, its dates may fall on any day of that
 * month, up to today in Brazil (a unit created on the 15th is in that month's release; at 22:00
 * in Brasília the UTC day is already tomorrow). An --as-of the operator gives is the bound itself.
 */
export function cnucDatesUntil(fileName: string, asOf: string, today = todayInBrazil()): string {
  if (asOf !== cnucReleaseDate(fileName)) return asOf;
  const [y, m] = asOf.split('-').map(Number);
  const last = new Date(Date.UTC(y, m, 0)).toISOString().slice(0, 10);
  return last < today ? last : today > asOf ? today : asOf;
}

const CNUC_SOURCE: ShapeSpec['source'] = {
  fileName: 'shp_cnuc.zip', pattern: /^shp_cnuc_\d{4}_\d{2}\.zip$/i, ext: /\.zip$/i, what: 'shp_cnuc_<YYYY>_<MM>.zip', releaseDate: cnucReleaseDate, fileDates: true,
  datesUntil: cnucDatesUntil,
};

export const cnucUcs = shapedPipeline({
  name: 'cnuc-ucs',
  relation: CNUC_UCS,
  source: CNUC_SOURCE,
  // The default source is the dataset's package_show: the newest release is discovered there.
  fetch: (ctx) => (isPackageShow(ctx.source) ? fetchFromCkan(ctx, ctx.source) : fetchFile(ctx, { name: 'cnuc-ucs', source: CNUC_SOURCE, read: { srid: 4674 } })),
  // The layer carries no update date: among copies of a cd_cnuc the one read last wins.
  ...polygonLayer({ key: "nullif(btrim(s.codigo), '')" }),
  overlay: { camada: 'uc', kind: 'area' },
  async facts({ client, t, target, facts }) {
    const names = await unknownUfNames(client, t);
    if (!names.length) return;
    const units = await unitsWithUnknownUf(client, target);
    facts.failures.push({
      rule: 'unknown_uf_name',
      message: `${units} unit(s) name a state outside the 27-entry map: ${describeCounts(names)} (kept in extra.ufs)`,
      value: units,
      threshold: 0,
    });
  },
});
