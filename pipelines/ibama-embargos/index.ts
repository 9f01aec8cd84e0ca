// IBAMA embargoes (termos de embargo), one national snapshot per release. Two routes,
// told apart by the file's content (SOURCES.md §3, contract §2b/§3):
// - the SIFISC CSV `termo_embargo.csv` (`;`, header, UTF-8 with BOM, polygons as inline
//   WKT cells that exceed 128 KB, many terms with only a point), streamed into staging
//   by header through the one CSV reader (src/etl/csv-records.ts: encoding and delimiter
//   detected); WKT is parsed in SQL, per row, so a bad cell never aborts;
// - a zip: the `adm_embargo_a` shapefile layout (truncated DBF names, EPSG:4674,
//   status_tad 'AL' = lavrado, DMS coordinates), or a zip holding the CSV.
// Both land in the same staging columns and go through the same SQL.
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
// personal data: they are never logged; documento_hmac is keyed by configuration.
import fs from 'node:fs';
import path from 'node:path';
import { ident } from '../../src/db/pool.ts';
import { AgroError } from '../../src/errors.ts';
import { extractZip, readHead } from '../../src/etl/archive.ts';
import { countShapefileOverflows } from '../../src/etl/dbf-overflow.ts';
import { isHttp, localPath, type FetchedFile } from '../../src/etl/download.ts';
import { checkSnapshotTable, countNulls, indexSnapshotTable, releaseDateLiteral } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addCounts, describeLayer, emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { repairInvalidPolygons, type RepairResult } from '../../src/etl/repair.ts';
import { fetchOneFile, lastModifiedDay } from '../../src/etl/source-files.ts';
import { csvEncodingName, readCsvHead } from '../../src/etl/csv-records.ts';
import { normaliseHeader, stageCsv, type CsvStageResult } from '../../src/etl/stage-csv.ts';
import { stageLayers, type FieldSpec } from '../../src/etl/stage-vector.ts';
import { findShapefiles, openLayer, type VectorLayer } from '../../src/etl/vector-reader.ts';
import { namedSql, render } from '../../src/sql.ts';

/** File names looked for when --source names a folder, in order of preference. */
export const SOURCE_NAMES = ['termo_embargo.csv', 'termo_de_embargo.csv', 'adm_embargo_a.zip', 'termo_embargo_csv.zip'];

type Route = 'csv' | 'shp';

/** Canonical staging columns ← every known spelling (2024+ CSV, pre-2024 CSV, 2024 shapefile). */
const CANONICAL: FieldSpec[] = [
  { name: 'seq_tad', aliases: ['seq_tad'] },
  { name: 'numero_tad', aliases: ['num_tad', 'numero_tad'] },
  { name: 'serie_tad', aliases: ['ser_tad', 'serie_tad'] },
  { name: 'status_formulario', aliases: ['des_status_formulario', 'status_tad'] },
  { name: 'cancelado', aliases: ['sit_cancelado', 'sit_cancel'] },
  { name: 'data_embargo', aliases: ['dat_embargo', 'dat_embarg'] },
  { name: 'nome_embargado', aliases: ['nome_embargado', 'nome_pessoa_embargada', 'nom_pessoa'] },
  { name: 'documento', aliases: ['cpf_cnpj_embargado', 'cpf_cnpj_s'] },
  { name: 'numero_processo', aliases: ['num_processo', 'num_proces'] },
  { name: 'numero_auto_infracao', aliases: ['num_auto_infracao', 'num_auto_i'] },
  { name: 'descricao', aliases: ['des_tad', 'des_infracao'] },
  { name: 'localizacao', aliases: ['des_localizacao', 'des_locali'] },
  { name: 'cod_municipio', aliases: ['cod_municipio', 'cod_munici'] },
  { name: 'municipio', aliases: ['municipio', 'nom_municipio_tad', 'nom_munici'] },
  { name: 'uf', aliases: ['uf', 'sig_uf_tad', 'sig_uf'] },
  { name: 'longitude', aliases: ['num_longitude_tad', 'num_longit'] },
  { name: 'latitude', aliases: ['num_latitude_tad', 'num_latitu'] },
  { name: 'longitude_dms', aliases: ['num_longitude_gms_tad', 'num_long_1'] },
  { name: 'latitude_dms', aliases: ['num_latitude_gms_tad', 'num_lati_1'] },
  { name: 'deter_prodes', aliases: ['deter_prodes'] },
  { name: 'id_poligono', aliases: ['id_poligono'] },
  { name: 'embarga_poligono', aliases: ['embarga_poligono'] },
  { name: 'area_embargada', aliases: ['qtd_area_embargada', 'qtd_area_e'] },
  { name: 'nome_imovel', aliases: ['nome_imovel', 'nom_propri'] },
  { name: 'tipo_area', aliases: ['tipo_area'] },
  { name: 'geom_wkt', aliases: ['geom_area_embargada', 'wkt_geom_area_embargada'] },
  { name: 'desembargado', aliases: ['sit_desembargo', 'sit_desemb'] },
  { name: 'tipo_desembargo', aliases: ['tipo_desembargo'] },
  { name: 'data_desembargo', aliases: ['dat_desembargo', 'dat_desemb'] },
  { name: 'descricao_desembargo', aliases: ['des_desembargo'] },
  { name: 'data_alteracao', aliases: ['dat_ult_alteracao'] },
  { name: 'ultima_atualizacao', aliases: ['ultima_atualizacao_relatorio'] },
];

/** Known columns kept in `extra` under the key after 'x_': the workflow columns of SOURCES §3.4 and a few legacy/shapefile ones. */
const EXTRA: FieldSpec[] = [
  ...[
    'des_status_formulario_aie', 'cod_substituicao', 'dat_impressao', 'forma_entrega', 'num_pessoa_embargo',
    'unid_apresentacao', 'unid_controle', 'seq_auto_infracao', 'seq_notificacao', 'seq_acao_fiscalizatoria',
    'cd_acao_fiscalizatoria', 'operacao', 'seq_ordem_fiscalizacao', 'ordem_fiscalizacao', 'unid_ordenadora',
    'seq_solicitacao_recurso', 'solicitacao_recurso', 'operacao_sol_recurso', 'dat_ult_alter_geom',
    'tipo_alteracao', 'justificativa_alteracao',
  ].map((n) => ({ name: `x_${n}`, aliases: [n] })),
  { name: 'x_sit_desmatamento', aliases: ['sit_desmatamento', 'sit_desmat'] },
  { name: 'x_des_tipo_bioma', aliases: ['des_tipo_bioma', 'des_tipo_b'] },
  { name: 'x_cod_uf', aliases: ['cod_uf', 'cod_uf_tad'] },
];

/** Personal data read only so that it never reaches `extra`: the formatted document copy and the officer's CPF and name (SOURCES §1.6). */
const DROPPED: FieldSpec[] = [
  { name: 'drop_documento_formatado', aliases: ['cpf_cnpj_i'] },
  { name: 'drop_cpf_agente', aliases: ['cpf_agente'] },
  { name: 'drop_nome_agente', aliases: ['nom_autuan'] },
];

/** Without these the load fails before reading a row: a vanished status or cancel column would make every term look active. */
const REQUIRED: Record<Route, string[]> = {
  csv: ['numero_tad', 'status_formulario', 'cancelado', 'desembargado', 'geom_wkt'],
  shp: ['numero_tad', 'status_formulario', 'cancelado', 'desembargado'],
};

export function fieldSpecs(route: Route): FieldSpec[] {
  return [...CANONICAL, ...EXTRA, ...DROPPED].map((s) => ({ ...s, required: REQUIRED[route].includes(s.name) }));
}

/** jsonb of the x_ columns (empty values left out), keyed by their source name. */
const EXTRA_SQL = `jsonb_build_object(${EXTRA.map((s) => `'${s.name.slice(2)}', nullif(btrim(s.${ident(s.name)}), '')`).join(', ')})`;

const LAYER_DEFAULTS = { srid: 4674 };
const EMPTY_FIELDS = ['data_embargo', 'status_formulario', 'documento', 'nome_embargado', 'cod_municipio_ibge', 'municipio', 'uf', 'area_embargada_ha', 'geom_ponto'];
const DATE_FIELDS = ['data_embargo', 'data_desembargo', 'data_alteracao', 'ultima_atualizacao'];
const TEXT_FIELDS = ['nome_embargado', 'municipio', 'nome_imovel', 'descricao', 'localizacao'];

/** What this pipeline adds to the report's facts. */
export interface EmbargoFacts {
  route: Route;
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
  documentos: { cpf: number; cnpj: number; outro: number; ausente: number };
  /** Distinct ULTIMA_ATUALIZACAO_RELATORIO values and their range. */
  ultima_atualizacao: { distintos: number; min: string | null; max: string | null };
  /**
   * Loaded terms whose statuses (DES_STATUS_FORMULARIO / DES_STATUS_FORMULARIO_AIE, '∅' for
   * empty) say neither issued nor a known inactive status: counted as active (contract §3).
   */
  status_desconhecido: Record<string, number>;
  /** Where cfg.hmacKey came from (AGRO_HMAC_KEY or the development key). */
  hmac_key: 'env' | 'development';
}

// ---------------------------------------------------------------------------------
// Download and route detection

async function fetchIbama(ctx: RunContext): Promise<FetchedFile[]> {
  const src = ctx.options.source ?? ctx.cfg.sources['ibama-embargos'];
  if (!src) throw new AgroError('usage', 'ibama-embargos needs --source or a configured source');
  let uri = src;
  if (!isHttp(src) && fs.statSync(localPath(src), { throwIfNoEntry: false })?.isDirectory()) {
    const dir = localPath(src);
    const name = SOURCE_NAMES.find((n) => fs.existsSync(path.join(dir, n)));
    if (!name) throw new AgroError('source_not_found', `${dir} holds none of ${SOURCE_NAMES.join(', ')}`);
    uri = path.join(dir, name);
  }
  return fetchOneFile(ctx, uri, { expect: /\.zip$/i.test(uri) ? 'zip' : 'csv' });
}

type Source = { route: 'csv'; csv: string } | { route: 'shp'; layers: VectorLayer[] };

const resolved = new WeakMap<RunContext, Promise<Source>>();

/** CSV or shapefile, by content: a zip (PK signature) is extracted (every CRC checked) and searched for a .shp, else a .csv. */
function resolveSource(ctx: RunContext, file: FetchedFile): Promise<Source> {
  let p = resolved.get(ctx);
  if (!p) {
    p = (async (): Promise<Source> => {
      const head = await readHead(file.path, 4);
      if (head.length < 4 || head.toString('latin1', 0, 2) !== 'PK') return { route: 'csv', csv: file.path };
      const files = await extractZip(file.path, path.join(ctx.workDir, 'source'), { limits: ctx.cfg.zip });
      const shps = findShapefiles(files);
      if (shps.length) return { route: 'shp', layers: shps.map((s) => openLayer(s, LAYER_DEFAULTS)) };
      const csv = files.filter((f) => f.toLowerCase().endsWith('.csv')).sort()[0];
      if (csv) return { route: 'csv', csv };
      throw new AgroError('no_layer', `${file.name} holds neither a shapefile nor a CSV`);
    })();
    resolved.set(ctx, p);
  }
  return p;
}

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

// ---------------------------------------------------------------------------------
// Load

interface Staged extends Omit<CsvStageResult, 'header' | 'format'> {
  route: Route;
  /** The CSV route's detected encoding (UTF-8, ISO-8859-1, UTF-16LE, UTF-16BE). */
  csvEncoding: string | null;
  layers: VectorLayer[];
  replacementChars: number;
}

const nonZero = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).filter(([, n]) => n > 0));

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const source = await resolveSource(ctx, files[0]);
  const facts = emptyFacts();
  const stage = ctx.stagingTable('termos');
  const client = await ctx.pool.connect();
  try {
    const staged = await ctx.stage(
      'read',
      async (): Promise<Staged> => {
        if (source.route === 'csv') {
          const r = await stageCsv(client, stage, source.csv, fieldSpecs('csv'), { delimiter: ';', columns: 'header', badRows: 'reject' });
          return { route: 'csv', rows: r.rows, badRows: r.badRows, badRowSamples: r.badRowSamples, missingOptional: r.missingOptional, unknown: r.unknown, fingerprint: r.fingerprint, layers: [], replacementChars: 0, csvEncoding: csvEncodingName(r.format.encoding) };
        }
        const r = await stageLayers(client, stage, source.layers, fieldSpecs('shp'));
        return { route: 'shp', rows: r.rows, badRows: 0, badRowSamples: [], missingOptional: r.missingOptional, unknown: r.unknown, fingerprint: r.fingerprint, layers: source.layers, replacementChars: r.replacementChars, csvEncoding: null };
      },
      (s) => s.rows + s.badRows,
      (s) => ({ route: s.route, rows: s.rows, bad_rows: s.badRows, bad_row_lines: s.badRowSamples }),
    );

    const geoms = ctx.stagingTable('geoms');
    const fix = ctx.stagingTable('fix');
    const winners = ctx.stagingTable('winners');
    const classified = ctx.stagingTable('classified');
    const key = { key: ctx.cfg.hmacKey, source: ctx.cfg.hmacKeySource };
    let repair: RepairResult = { invalid: 0, repaired: 0, rejected: 0, empty: 0 };
    const releaseDate = await releaseDateLiteral(client, target.snapshotId);

    const built = await ctx.stage(
      'normalise',
      async () => {
        await client.query(render(namedSql(`queries/ibama_geoms_${staged.route}`), { geoms, stage }));
        repair = await repairInvalidPolygons(client, geoms, fix, ctx.cfg.repairTimeoutMs);
        await client.query(render(namedSql('queries/ibama_winners'), { winners, stage }));
        await client.query(render(namedSql('queries/ibama_classify'), { classified, stage, geoms, fix, winners }));
        const table = await target.table('ibama_embargos');
        await client.query(`SELECT set_config('agro.hmac_key', $1, false)`, [key.key]);
        try {
          await client.query(render(namedSql('queries/ibama_embargos'), { target: table, stage, classified, extra: EXTRA_SQL, snapshot_id: String(target.snapshotId), release_date: releaseDate }));
        } finally {
          await client.query(`SELECT set_config('agro.hmac_key', '', false)`);
        }
        const rows = await checkSnapshotTable(client, 'ibama_embargos', table);
        return { table, rows };
      },
      (r) => r.rows,
    );

    await ctx.stage('index', () =>
      indexSnapshotTable(client, built.table, { primaryKey: ['id_tad'], gist: ['geom'], btree: ['numero_tad', 'documento_hmac'] }),
    );

    // ---- quality facts
    const c = (await client.query(render(namedSql('queries/ibama_facts'), { classified }))).rows[0];
    facts.rejected = nonZero({
      bad_field_count: staged.badRows,
      no_key: c.no_key,
      bad_wkt: c.bad_wkt,
      geometry_unrepairable: c.geometry_unrepairable,
      outside_brazil: c.outside_brazil,
    });
    facts.dropped = nonZero({ duplicate_key: c.duplicate_key, no_geometry: c.no_geometry });
    facts.geometry = {
      invalid: repair.invalid,
      repaired: repair.repaired,
      rejected: c.polygons_unusable,
      empty: c.no_geometry,
      srid: staged.route === 'csv' ? 4326 : staged.layers[0]?.srid ?? null,
      sridAssumed: staged.layers.some((l) => l.sridAssumed),
      outsideBrazil: c.polygons_outside + c.points_outside,
    };
    const t = built.table;
    facts.fields = { missingOptional: staged.missingOptional.filter((n) => !n.startsWith('drop_')), unknown: staged.unknown, empty: await countNulls(client, t, EMPTY_FIELDS) };
    const dates = await client.query(
      `SELECT col, CASE WHEN etl.parse_date(v) > ${releaseDate} AND col <> 'ultima_atualizacao' THEN 'implausible' ELSE etl.date_kind(v) END AS kind, count(*)::int AS n
         FROM ${stage} CROSS JOIN LATERAL (VALUES ${DATE_FIELDS.map((f) => `('${f}', nullif(btrim(${ident(f)}), ''))`).join(', ')}) d(col, v)
        GROUP BY 1, 2`,
    );
    for (const d of dates.rows) {
      if (d.kind === 'placeholder') facts.dates.placeholders[d.col] = d.n;
      if (d.kind === 'bad') facts.dates.unparseable[d.col] = d.n;
      if (d.kind === 'implausible') addCounts(facts, 'implausible', { [d.col]: d.n });
    }
    // Numbers that did not parse (NULL, text kept in extra) and overflowed ones (asterisks: no value).
    const area = (await client.query(
      `SELECT count(*) FILTER (WHERE btrim(area_embargada) <> '' AND etl.parse_number(area_embargada) IS NULL AND NOT etl.is_overflow(area_embargada))::int AS unparsed,
              count(*) FILTER (WHERE etl.is_overflow(area_embargada))::int AS overflowed FROM ${stage}`,
    )).rows[0];
    addCounts(facts, 'unparsed', { area_embargada_ha: area.unparsed });
    addCounts(facts, 'overflowed', { area_embargada_ha: area.overflowed });
    if (staged.route === 'shp') {
      for (const l of staged.layers) addCounts(facts, 'overflowed', await countShapefileOverflows(l.file));
    }
    // Statuses the rule does not know (contract §3): counted as active, listed by value.
    const unknownStatus = await client.query(
      `SELECT coalesce(nullif(btrim(s.status_formulario), ''), '∅') || ' / ' || coalesce(nullif(btrim(s.x_des_status_formulario_aie), ''), '∅') AS status, count(*)::int AS n
         FROM ${classified} c JOIN ${stage} s ON s.src_seq = c.src_seq
        WHERE c.verdict IN ('poligono', 'ponto') AND NOT etl.ibama_flag(s.cancelado) AND NOT etl.ibama_flag(s.desembargado)
          AND NOT etl.ibama_status_conhecido(etl.ibama_status(s.status_formulario), s.x_des_status_formulario_aie)
        GROUP BY 1 ORDER BY 2 DESC, 1`,
    );
    const fffd = await client.query(`SELECT count(*)::int AS n FROM ${stage} WHERE concat_ws(' ', ${TEXT_FIELDS.map(ident).join(', ')}) LIKE '%' || chr(65533) || '%'`);
    facts.encoding = {
      name: staged.route === 'csv' ? staged.csvEncoding : staged.layers[0]?.encoding ?? null,
      assumed: staged.layers.some((l) => l.encodingAssumed),
      replacementChars: staged.route === 'csv' ? fffd.rows[0].n : staged.replacementChars,
    };
    facts.layers = staged.layers.map(describeLayer);

    const problems = await client.query(
      `SELECT poly_problem AS p, count(*)::int AS n FROM ${classified}
        WHERE verdict NOT IN ('no_key', 'duplicate_key') AND poly_problem IS NOT NULL GROUP BY 1 ORDER BY 1`,
    );
    const loaded = (
      await client.query(
        `SELECT count(*) FILTER (WHERE ativo)::int AS ativos,
                count(*) FILTER (WHERE documento_tipo = 'cpf')::int AS cpf,
                count(*) FILTER (WHERE documento_tipo = 'cnpj')::int AS cnpj,
                count(*) FILTER (WHERE documento IS NOT NULL AND documento_tipo IS NULL)::int AS outro,
                count(*) FILTER (WHERE documento IS NULL)::int AS ausente,
                (SELECT count(*)::int FROM (SELECT 1 FROM ${t} GROUP BY numero_tad HAVING count(*) > 1) x) AS grupos,
                (SELECT coalesce(sum(n), 0)::int FROM (SELECT count(*) AS n FROM ${t} GROUP BY numero_tad HAVING count(*) > 1) x) AS repetidos
           FROM ${t}`,
      )
    ).rows[0];
    const stamps = (
      await client.query(
        `SELECT count(DISTINCT btrim(ultima_atualizacao))::int AS distintos, min(btrim(ultima_atualizacao)) AS min, max(btrim(ultima_atualizacao)) AS max
           FROM ${stage} WHERE nullif(btrim(ultima_atualizacao), '') IS NOT NULL`,
      )
    ).rows[0];
    const rowsLoaded = built.rows;
    const embargos: EmbargoFacts = {
      route: staged.route,
      poligono: c.poligono,
      ponto: c.ponto,
      ponto_share: rowsLoaded ? c.ponto / rowsLoaded : 0,
      ativos: loaded.ativos,
      ponto_em_vez_de_poligono: c.ponto_em_vez_de_poligono,
      problemas_poligono: Object.fromEntries(problems.rows.map((r) => [r.p, r.n])),
      numero_tad_repetido: loaded.repetidos,
      documentos: { cpf: loaded.cpf, cnpj: loaded.cnpj, outro: loaded.outro, ausente: loaded.ausente },
      ultima_atualizacao: stamps,
      status_desconhecido: Object.fromEntries(unknownStatus.rows.map((r) => [r.status, r.n])),
      hmac_key: key.source,
    };

    if (staged.badRows) facts.notes.push(`${staged.badRows} CSV rows with the wrong field count rejected (lines ${staged.badRowSamples.join(', ')}${staged.badRows > staged.badRowSamples.length ? ', …' : ''})`);
    if (c.no_geometry) facts.notes.push(`${c.no_geometry} terms have neither a polygon nor a usable point (lon/lat empty or 0/0): not loaded`);
    if (c.ponto_em_vez_de_poligono) facts.notes.push(`${c.ponto_em_vez_de_poligono} terms loaded with their point because their polygon was unusable (see geom_problema)`);
    if (loaded.repetidos) facts.notes.push(`${loaded.repetidos} loaded terms share their NUM_TAD with another term (${loaded.grupos} numbers): numero_tad is not unique`);
    if (unknownStatus.rows.length) facts.notes.push(`terms counted as active because their status is not known to be inactive (contract §3): ${unknownStatus.rows.map((r) => `"${r.status}" × ${r.n}`).join(', ')}`);
    if (facts.dates.implausible) facts.notes.push(`dates after the release date ${releaseDate.slice(1, 11)} loaded as NULL (text kept in extra): ${JSON.stringify(facts.dates.implausible)}`);
    if (stamps.distintos > 1) facts.notes.push(`ULTIMA_ATUALIZACAO_RELATORIO differs between rows (${stamps.distintos} values, ${stamps.min} … ${stamps.max})`);
    if (key.source === 'development') facts.notes.push('documento_hmac computed with the development key: set AGRO_HMAC_KEY in production');
    if (staged.route === 'csv') facts.notes.push('CSV coordinates and WKT taken as EPSG:4326 (the file declares no CRS)');
    if (facts.geometry.sridAssumed) facts.notes.push('a layer had no .prj: EPSG:4674 (SIRGAS 2000) assumed');
    if (facts.fields.unknown.length) facts.notes.push(`unknown columns kept in extra: ${facts.fields.unknown.join(', ')}`);

    const rowsRead = staged.rows + staged.badRows;
    return {
      rowsRead,
      rowsLoaded,
      rowsRejected: sum(facts.rejected),
      facts: Object.assign(facts, { embargos }) as QualityFacts,
      fingerprint: staged.fingerprint,
    };
  } finally {
    client.release();
  }
}

export const ibamaEmbargos: Pipeline & { key: string } = {
  name: 'ibama-embargos',
  scopedByUf: false,
  relations: ['ibama_embargos'],
  mainRelation: 'ibama_embargos',
  key: 'id_tad',
  fetch: fetchIbama,
  async releaseDate(ctx, files) {
    const source = await resolveSource(ctx, files[0]);
    if (source.route === 'csv') {
      const stamp = isoDate(await csvReleaseStamp(source.csv));
      if (stamp) return stamp;
    }
    return lastModifiedDay(files[0]);
  },
  load,
};
