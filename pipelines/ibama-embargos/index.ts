// IBAMA embargoes (termos de embargo), one national snapshot per release. Two routes,
// told apart by the file's content (SOURCES.md §3, contract §2b/§3):
// - the SIFISC CSV `termo_embargo.csv` (`;`, header, UTF-8 with BOM, polygons as inline
//   WKT cells that exceed 128 KB, many terms with only a point), streamed into staging
//   by header through the one CSV reader (src/etl/csv-records.ts: encoding and delimiter
//   detected); WKT is parsed in SQL, per row, so a bad cell never aborts;
// - a zip: the `adm_embargo_a` shapefile layout (truncated DBF names, EPSG:4674,
//   status_tad 'AL' = lavrado, DMS coordinates), or a zip holding the CSV;
// - the ArcGIS REST layer (rest-route.ts): taken when the CSV download fails, or when
//   --source names a …/FeatureServer/N (or MapServer/N) layer; GeoJSON pages in EPSG:4674.
// All land in the same staging columns (read.csv of the shape, src/etl/shape-csv.ts) and go
// through the same SQL: the polygons (WKT parsed, or the shapefile's) repaired row by row,
// then one typed pass (sql/queries/ibama_typed.sql) that types each term once — key,
// statuses, document, point vs polygon, verdict and the declared columns — from which the
// snapshot is built and every fact counted (typed: true).
//
// Key (`id_tad`): SEQ_TAD, IBAMA's internal term sequence, when the row has one. Terms
// drawn up in the electronic AIe system have none (2,862 of 116,332 in the 2026-09-23
// file, per agrobr's notes) and the shapefile layout carries none, so those fall back to
// 'tad:' || NUM_TAD [|| '/' || SER_TAD]. Duplicates of a key keep the most recently
// changed version (DAT_ULT_ALTERACAO), then the one read last. Whether NUM_TAD alone (the
// overlaps' feicao_id) is unique is reported per load (facts.embargos.numero_tad_repetido).
//
// Rows without any geometry (no WKT, no usable point: 3.7 % of the terms of one Pará
// subset) are dropped by design and counted (facts.dropped.no_geometry): counting them as
// rejected would trip the 1 % gate on every national load. Documents (CPF/CNPJ) are
// personal data: they are never logged nor shown in the report's examples; documento_hmac
// is keyed by configuration.
import { isArcgisLayer } from '../../src/etl/arcgis.ts';
import { readCsvHead } from '../../src/etl/csv-records.ts';
import { isHttp, type FetchedFile } from '../../src/etl/download.ts';
import { AgroError, isAgroError } from '../../src/errors.ts';
import type { RunContext } from '../../src/etl/pipeline.ts';
import { defineRelation, type FieldDef } from '../../src/etl/relation.ts';
import { repairInvalidPolygons } from '../../src/etl/repair.ts';
import { fetchFile, shapedPipeline, type ShapedPipeline, type ShapeSpec } from '../../src/etl/shape.ts';
import { sourceByContent } from '../../src/etl/shape-csv.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { typedColumns } from '../../src/etl/sql/typed.ts';
import { normaliseHeader } from '../../src/etl/header-match.ts';
import { classifyTerms, createGeoms, termCounts, type NotListed } from './queries.ts';
import { addRestFacts, fetchRest, isRestManifest, restEndpoint, restReleaseStamp, restSourceInfo, stageRest, type RestStaged } from './rest-route.ts';

/** File names looked for when --source names a folder, in order of preference. */
export const SOURCE_NAMES = ['termo_embargo.csv', 'termo_de_embargo.csv', 'adm_embargo_a.zip', 'termo_embargo_csv.zip'];

/** Workflow columns of SOURCES §3.4 and a few legacy/shapefile ones: kept in `extra` under their source name (staged as x_<name>). */
const WORKFLOW: { name: string; from: string[] }[] = [
  ...[
    'des_status_formulario_aie', 'cod_substituicao', 'dat_impressao', 'forma_entrega', 'num_pessoa_embargo',
    'unid_apresentacao', 'unid_controle', 'seq_auto_infracao', 'seq_notificacao', 'seq_acao_fiscalizatoria',
    'cd_acao_fiscalizatoria', 'operacao', 'seq_ordem_fiscalizacao', 'ordem_fiscalizacao', 'unid_ordenadora',
    'seq_solicitacao_recurso', 'solicitacao_recurso', 'operacao_sol_recurso', 'dat_ult_alter_geom',
    'tipo_alteracao', 'justificativa_alteracao',
  ].map((n) => ({ name: n, from: [n] })),
  { name: 'sit_desmatamento', from: ['sit_desmatamento', 'sit_desmat'] },
  { name: 'des_tipo_bioma', from: ['des_tipo_bioma', 'des_tipo_b'] },
  { name: 'cod_uf', from: ['cod_uf', 'cod_uf_tad'] },
];

/** Staged-only fields: the point in degrees and DMS, the WKT, the release stamp, the workflow columns, and personal data read only so that it never reaches `extra`. */
const FIELDS: FieldDef[] = [
  { name: 'longitude', from: ['num_longitude_tad', 'num_longit'], keep: 'sql' },
  { name: 'latitude', from: ['num_latitude_tad', 'num_latitu'], keep: 'sql' },
  { name: 'longitude_dms', from: ['num_longitude_gms_tad', 'num_long_1'], keep: 'sql' },
  { name: 'latitude_dms', from: ['num_latitude_gms_tad', 'num_lati_1'], keep: 'sql' },
  // The polygon as WKT: a CSV without it fails; a shapefile carries its own geometry.
  { name: 'geom_wkt', from: ['geom_area_embargada', 'wkt_geom_area_embargada'], keep: 'sql', required: 'csv' },
  { name: 'ultima_atualizacao', from: ['ultima_atualizacao_relatorio'], keep: 'sql', check: 'timestamp' },
  ...WORKFLOW.map((w): FieldDef => ({ name: `x_${w.name}`, from: w.from, keep: 'sql' })),
  // The formatted document copy and the officer's CPF and name (SOURCES §1.6).
  { name: 'drop_documento_formatado', from: ['cpf_cnpj_i'], keep: 'drop', personal: true },
  { name: 'drop_cpf_agente', from: ['cpf_agente'], keep: 'drop', personal: true },
  { name: 'drop_nome_agente', from: ['nom_autuan'], keep: 'drop', personal: true },
];

/**
 * snap.ibama_embargos: columns in template order with every spelling of both routes (2024+
 * CSV, pre-2024 CSV, the 2024 shapefile's truncated DBF names). `c` is the term as
 * queries/ibama_typed.sql types it (key, statuses, document, polygon, point). Without
 * NUM_TAD, the status or the cancel/lift flags the load fails before reading a row: a
 * vanished status or cancel column would make every term look active.
 */
export const IBAMA_EMBARGOS = defineRelation({
  name: 'ibama_embargos',
  columns: [
    { name: 'id_tad', type: 'text', sql: 'c.id_tad' },
    { name: 'numero_tad', type: 'text', from: ['num_tad', 'numero_tad'], required: true },
    { name: 'serie_tad', type: 'text', from: ['ser_tad', 'serie_tad'] },
    { name: 'seq_tad', type: 'text', from: ['seq_tad'], sql: 'etl.ibama_seq(s.seq_tad)' },
    { name: 'data_embargo', type: 'date', from: ['dat_embargo', 'dat_embarg'], counted: true },
    { name: 'situacao', type: 'text', sql: 'c.situacao' },
    { name: 'ativo', type: 'boolean', sql: "coalesce(c.situacao = 'ativo', false)" },
    // 'AL' (the shapefile's code) reads 'Lavrado'; empty in AIe terms, whose status is DES_STATUS_FORMULARIO_AIE.
    { name: 'status_formulario', type: 'text', from: ['des_status_formulario', 'status_tad'], required: true, counted: true, sql: 'c.status' },
    // A flag that is neither yes nor no reads no (the term stays active, contract §3); its text is kept and listed.
    { name: 'cancelado', type: 'boolean', from: ['sit_cancelado', 'sit_cancel'], required: true, sql: 'c.cancelado', keepRaw: 'CASE WHEN NOT etl.ibama_flag_known(s.cancelado) THEN s.cancelado END' },
    { name: 'desembargado', type: 'boolean', from: ['sit_desembargo', 'sit_desemb'], required: true, sql: 'c.desembargado', keepRaw: 'CASE WHEN NOT etl.ibama_flag_known(s.desembargado) THEN s.desembargado END' },
    { name: 'data_desembargo', type: 'date', from: ['dat_desembargo', 'dat_desemb'] },
    { name: 'tipo_desembargo', type: 'text', from: ['tipo_desembargo'] },
    { name: 'descricao_desembargo', type: 'text', from: ['des_desembargo'] },
    // Bare digits (a masked one as written, asterisks kept); the type by check digits (etl.documento_tipo, src/documents.ts); the HMAC keyed by configuration.
    { name: 'documento', type: 'text', from: ['cpf_cnpj_embargado', 'cpf_cnpj_s'], counted: true, personal: true, sql: 'c.doc' },
    { name: 'documento_tipo', type: 'text', sql: 'etl.documento_tipo(c.doc)' },
    // None for a document the source masks ('***456789**'): it is no one's key. Personal data
    // (left out of the report's examples): with the development key, trying every CPF finds it again.
    { name: 'documento_hmac', type: 'text', personal: true, sql: "CASE WHEN strpos(c.doc, '*') = 0 THEN etl.ibama_hmac(c.doc, current_setting('agro.hmac_key')) END" },
    { name: 'nome_embargado', type: 'text', from: ['nome_embargado', 'nome_pessoa_embargada', 'nom_pessoa'], counted: true, personal: true },
    { name: 'cod_municipio_ibge', type: 'text', from: ['cod_municipio', 'cod_munici'], convert: 'ibge_code', counted: true },
    { name: 'municipio', type: 'text', from: ['municipio', 'nom_municipio_tad', 'nom_munici'], counted: true },
    { name: 'uf', type: 'text', from: ['uf', 'sig_uf_tad', 'sig_uf'], convert: 'upper', counted: true },
    { name: 'area_embargada_ha', type: 'double precision', from: ['qtd_area_embargada', 'qtd_area_e'], counted: true, convert: 'area' },
    { name: 'area_calculada_ha', type: 'double precision', sql: 'CASE WHEN c.poly_in THEN etl.area_ha(c.poly) END' },
    { name: 'nome_imovel', type: 'text', from: ['nome_imovel', 'nom_propri'] },
    { name: 'tipo_area', type: 'text', from: ['tipo_area'] },
    { name: 'descricao', type: 'text', from: ['des_tad', 'des_infracao'] },
    { name: 'localizacao', type: 'text', from: ['des_localizacao', 'des_locali'] },
    { name: 'numero_processo', type: 'text', from: ['num_processo', 'num_proces'] },
    { name: 'numero_auto_infracao', type: 'text', from: ['num_auto_infracao', 'num_auto_i'] },
    { name: 'deter_prodes', type: 'text', from: ['deter_prodes'] },
    { name: 'id_poligono', type: 'text', from: ['id_poligono'] },
    { name: 'embarga_poligono', type: 'text', from: ['embarga_poligono'] },
    // DAT_ULT_ALTERACAO, with its time of day: also what decides between versions of a term.
    { name: 'data_alteracao', type: 'timestamp without time zone', from: ['dat_ult_alteracao'], convert: 'timestamp' },
    { name: 'geom_origem', type: 'text', sql: "CASE WHEN c.poly_in THEN 'poligono' ELSE 'ponto' END" },
    { name: 'geom_problema', type: 'text', sql: 'c.poly_problem' },
    { name: 'geom', type: 'geometry(Geometry,4326)', sql: 'CASE WHEN c.poly_in THEN c.poly ELSE c.pt END' },
    { name: 'geom_ponto', type: 'geometry(Point,4326)', sql: 'c.pt', counted: true },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  fields: FIELDS,
  // The workflow columns, non-empty ones, under their source names.
  extra: Object.fromEntries(WORKFLOW.map((w) => [w.name, `nullif(btrim(s.x_${w.name}), '')`])),
  indexes: { primaryKey: ['id_tad'], gist: ['geom'], btree: ['numero_tad', 'documento_hmac'] },
});

/** What this pipeline adds to the report's facts. */
export interface EmbargoFacts {
  /** csv: the SIFISC CSV (or a zip holding it); shp: the adm_embargo_a shapefile; rest: the ArcGIS REST layer. */
  route: 'csv' | 'shp' | 'rest';
  poligono: number;
  ponto: number;
  /** Share of loaded terms whose geometry is their point (0..1). */
  ponto_share: number;
  ativos: number;
  /** Terms loaded with their point because their polygon was unusable (bad WKT, unrepairable, outside Brazil). */
  ponto_em_vez_de_poligono: number;
  /** Why source polygons were not used, among keyed terms. */
  problemas_poligono: Record<string, number>;
  /** Loaded terms sharing their NUM_TAD with another loaded term (distinct id_tad). */
  numero_tad_repetido: number;
  /**
   * mascarado: masked in the source ('***456789**'), kept as written, no type nor HMAC; outro: neither
   * a CPF nor a CNPJ by its check digits, or written without a digit ('n/d': no document, its text
   * not kept, personal data); ausente: blank; zeros_completados: bare digits that had lost their leading
   * zeros, completed because the padded value passes its check digits (also counted as cpf/cnpj).
   */
  documentos: { cpf: number; cnpj: number; outro: number; mascarado: number; zeros_completados: number; ausente: number };
  /** Distinct ULTIMA_ATUALIZACAO_RELATORIO values and their range. */
  ultima_atualizacao: { distintos: number; min: string | null; max: string | null };
  /**
   * Loaded terms whose statuses (DES_STATUS_FORMULARIO / DES_STATUS_FORMULARIO_AIE, '∅' for
   * empty) say neither issued nor a known inactive status: counted as active (contract §3).
   */
  status_desconhecido: Record<string, number>;
  /**
   * Loaded terms whose SIT_CANCELADO / SIT_DESEMBARGO is neither yes nor no ('SIT_CANCELADO "X"'):
   * read as no, so counted as active (contract §3); the text is kept in `extra`.
   */
  flag_desconhecido: Record<string, number>;
  /** Both lists name the CODES_NAMED most frequent values; the others are counted here (absent: none). */
  status_nao_listados?: NotListed;
  flag_nao_listados?: NotListed;
  /** Where cfg.hmacKey came from (AGRO_HMAC_KEY or the development key). */
  hmac_key: 'env' | 'development';
}

/** The values a note does not name, as it says them. */
const notListed = (m: NotListed) => (m.codigos ? `, and ${m.codigos} more on ${m.termos} terms` : '');

/** 'yyyy-mm-dd' from the first 10 characters of an ISO-like or dd/mm/yyyy text, or null. */
export function isoDate(text: string | null | undefined): string | null {
  const s = (text ?? '').trim();
  let m = /^(\d{4})-(\d{2})-(\d{2})/.exec(s);
  const [y, mo, d] = m ? [m[1], m[2], m[3]] : (m = /^(\d{2})\/(\d{2})\/(\d{4})/.exec(s)) ? [m[3], m[2], m[1]] : [];
  if (!y) return null;
  const date = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  if (Number.isNaN(date.getTime()) || date.getUTCDate() !== Number(d) || Number(y) < 1900 || Number(y) > 2200) return null;
  return `${y}-${mo}-${d}`;
}

/** ULTIMA_ATUALIZACAO_RELATORIO of the first data row (the file's own release stamp). */
export async function csvReleaseStamp(file: string): Promise<string | null> {
  try {
    const { header, first } = await readCsvHead(file, ';');
    const col = header.findIndex((h) => normaliseHeader(h) === 'ultima_atualizacao_relatorio');
    return col < 0 || !first ? null : first[col] ?? null;
  } catch {
    return null; // a broken file fails properly in load()
  }
}

const SHAPEFILE_SRID = 4674;

/** What the download layer reports when the CSV could not be had: the REST route is tried instead. */
const CSV_FAILED = new Set(['download_failed', 'html_instead_of_archive', 'source_not_found', 'corrupt_archive']);

/**
 * The download stage. --source naming an ArcGIS layer: the REST route. A local file or folder:
 * read as it is (no fallback: a person chose it). An http(s) CSV (the configured one, which is
 * what the nightly passes): downloaded, and when that fails the REST layer
 * (AGRO_SOURCE_IBAMA_EMBARGOS_REST) is downloaded instead, the reason kept for the report.
 */
async function fetchIbama(ctx: RunContext): Promise<FetchedFile[]> {
  const src = ctx.source;
  if (src && isArcgisLayer(src)) return fetchRest(ctx, src, null);
  if (!src || !isHttp(src)) return fetchFile(ctx, SPEC);
  try {
    return await fetchFile(ctx, SPEC);
  } catch (e) {
    const rest = restEndpoint(ctx.cfg.sources);
    if (!isAgroError(e) || !CSV_FAILED.has(e.code) || !rest) throw e;
    ctx.log.warn({ csv: src, code: e.code, reason: e.message, rest }, 'ibama-embargos: the CSV download failed, taking the ArcGIS REST route');
    try {
      return await fetchRest(ctx, rest, { uri: src, code: e.code, reason: e.message });
    } catch (r) {
      // Both routes failed: the REST failure is the run's, and says what happened to the CSV.
      if (!isAgroError(r)) throw r;
      throw new AgroError(r.code, `${r.message} (ArcGIS REST route, taken because the CSV download failed: ${e.message})`, r.details);
    }
  }
}

/** The REST route's staged pages, per run, for the facts step. */
const restLoads = new WeakMap<RunContext, RestStaged>();

const SPEC: ShapeSpec = {
  name: 'ibama-embargos',
  relation: IBAMA_EMBARGOS,
  source: {
    fileName: SOURCE_NAMES[0],
    pattern: new RegExp(`^(${SOURCE_NAMES.slice(1).map((n) => n.replace(/\./g, '\\.')).join('|')})$`, 'i'),
    newest: (names) => [...names].sort((a, b) => SOURCE_NAMES.indexOf(a.toLowerCase()) - SOURCE_NAMES.indexOf(b.toLowerCase()))[0],
    ext: /\.(csv|zip)$/i,
    what: `file among ${SOURCE_NAMES.join(', ')}`,
  },
  // The SIFISC CSV (';', coordinates and WKT in EPSG:4326) or the adm_embargo_a shapefile zip (SIRGAS 2000), by content.
  read: { srid: SHAPEFILE_SRID, csv: { delimiter: ';', badRows: 'reject', srid: 4326 } },
  fetch: fetchIbama,
  // The REST route's pages (GeoJSON, EPSG:4674) into the same staging columns as the shapefile's features.
  async stage({ ctx, client }, file, table) {
    if (!isRestManifest(file)) return null;
    const rest = await stageRest(ctx, client, file, table, IBAMA_EMBARGOS.staging);
    restLoads.set(ctx, rest);
    return { layers: [rest.layer], rows: rest.rows, missingOptional: rest.missingOptional, unknown: rest.unknown, replacementChars: rest.replacementChars, fingerprint: rest.fingerprint };
  },
  async sourceInfo(files) {
    if (isRestManifest(files[0])) return restSourceInfo(files[0]);
    return { route: /\.zip$/i.test(files[0]?.name ?? '') ? 'zip' : 'csv' };
  },
  typed: true,
  // Terms without any geometry are dropped by design (see the top of this file), as are superseded versions.
  dropped: ['duplicate_key', 'no_geometry'],
  replacementChars: 'own',
  async classify({ client, ctx, t, route, asOf, snapshotId }) {
    const geoms = t.aux('geoms');
    await createGeoms(client, route ?? 'layers', { geoms, stage: t.stage });
    const repair = await repairInvalidPolygons(client, geoms, t.fix, ctx.cfg.repairTimeoutMs);
    await classifyTerms(client, t, { geoms, columns: typedColumns(IBAMA_EMBARGOS, asOf, snapshotId), hmacKey: ctx.cfg.hmacKey });
    return { repair };
  },
  overlay: { camada: 'embargo', kind: 'area', idColumn: 'numero_tad', active: 'ativo' },
  async facts({ client, ctx, t, facts, staged, rowsLoaded }) {
    const c = await termCounts(client, t);
    const hmacKey = ctx.cfg.hmacKeySource;
    // A polygon unusable for any reason is a rejected geometry, even when its term loads with its point.
    facts.geometry.rejected = c.polygons_unusable;
    facts.geometry.outsideBrazil = c.polygons_outside + c.points_outside;
    facts.encoding.replacementChars = staged.csv ? c.replacement_chars : staged.replacementChars;
    const unknownStatus = c.status_desconhecido;
    const embargos: EmbargoFacts = {
      route: staged.csv ? 'csv' : restLoads.has(ctx) ? 'rest' : 'shp',
      poligono: c.poligono,
      ponto: c.ponto,
      ponto_share: rowsLoaded ? c.ponto / rowsLoaded : 0,
      ativos: c.ativos,
      ponto_em_vez_de_poligono: c.ponto_em_vez_de_poligono,
      problemas_poligono: c.problemas_poligono,
      numero_tad_repetido: c.repetidos,
      documentos: { cpf: c.cpf, cnpj: c.cnpj, outro: c.outro, mascarado: c.mascarado, zeros_completados: c.zeros_completados, ausente: c.ausente },
      ultima_atualizacao: { distintos: c.stamps, min: c.stamp_min, max: c.stamp_max },
      status_desconhecido: Object.fromEntries(unknownStatus),
      flag_desconhecido: Object.fromEntries(c.flag_desconhecido),
      ...(c.status_nao_listados.codigos ? { status_nao_listados: c.status_nao_listados } : {}),
      ...(c.flag_nao_listados.codigos ? { flag_nao_listados: c.flag_nao_listados } : {}),
      hmac_key: hmacKey,
    };
    const noGeometry = facts.dropped.no_geometry ?? 0;
    if (noGeometry) facts.notes.push(`${noGeometry} terms have neither a polygon nor a usable point (lon/lat empty or 0/0): not loaded`);
    if (c.ponto_em_vez_de_poligono) facts.notes.push(`${c.ponto_em_vez_de_poligono} terms loaded with their point because their polygon was unusable (see geom_problema)`);
    if (c.mascarado) facts.notes.push(`${c.mascarado} documents are masked in the source: kept as written (asterisks included), without type or documento_hmac`);
    if (c.zeros_completados) facts.notes.push(`${c.zeros_completados} documents had lost their leading zeros (bare digits read as a number): completed, as their check digits agree`);
    if (c.repetidos) facts.notes.push(`${c.repetidos} loaded terms share their NUM_TAD with another term (${c.grupos} numbers): numero_tad is not unique`);
    if (unknownStatus.length) facts.notes.push(`terms counted as active because their status is not known to be inactive (contract §3): ${unknownStatus.map(([s, n]) => `"${s}" × ${n}`).join(', ')}${notListed(c.status_nao_listados)}`);
    if (c.flag_desconhecido.length) facts.notes.push(`terms whose cancel/lift flag is neither yes nor no, read as no (kept in extra): ${c.flag_desconhecido.map(([s, n]) => `${s} × ${n}`).join(', ')}${notListed(c.flag_nao_listados)}`);
    if (c.stamps > 1) facts.notes.push(`ULTIMA_ATUALIZACAO_RELATORIO differs between rows (${c.stamps} values, ${c.stamp_min} … ${c.stamp_max})`);
    if (hmacKey === 'development') facts.notes.push('documento_hmac computed with the development key: set AGRO_HMAC_KEY in production');
    if (staged.csv) facts.notes.push('CSV coordinates and WKT taken as EPSG:4326 (the file declares no CRS)');
    if (facts.fields.unknown.length) facts.notes.push(`unknown columns kept in extra: ${facts.fields.unknown.join(', ')}`);
    const rest = restLoads.get(ctx);
    if (rest) await addRestFacts(client, facts, rest, t.stage, rowsLoaded);
    return { embargos };
  },
};

const shaped: ShapedPipeline = shapedPipeline(SPEC);

/** The release date: the CSV's own stamp (ULTIMA_ATUALIZACAO_RELATORIO), else the download's Last-Modified. */
async function releaseDate(ctx: RunContext, files: FetchedFile[]): Promise<string | null> {
  if (isRestManifest(files[0])) return restReleaseStamp(files[0]);
  const source = await sourceByContent(ctx, files[0], SHAPEFILE_SRID);
  if (source.kind === 'csv') {
    const stamp = isoDate(await csvReleaseStamp(source.csv));
    if (stamp) return stamp;
  }
  return lastModifiedDay(files[0]);
}

export const ibamaEmbargos: ShapedPipeline = { ...shaped, releaseDate };
