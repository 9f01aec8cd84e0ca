// ICMBio embargoes (embargoes inside federal conservation units), one national snapshot per
// release of ICMBio's `embargos_icmbio.zip` shapefile (SOURCES §3 "Related: ICMBio
// embargoes"; the URL is UNVERIFIED: AGRO_SOURCE_ICMBIO_EMBARGOS or --source override it,
// a manual drop of the zip works). CRS from the .prj (SIRGAS 2000 expected; EPSG:4674
// without one). One typed pass (sql/queries/icmbio_typed.sql) types each polygon once: key,
// document, repaired geometry, verdict and the declared columns.
//
// Key (`id_embargo`): num_emb, with '/' || serie when the row has a series: embargo numbers
// restart per series, as IBAMA's NUM_TAD/SER_TAD do. Copies of a key: the one read last wins
// (the layer carries no change date), the others dropped and counted (dropped.duplicate_key);
// numbers shared by loaded embargoes of different series are counted (numero_repetido).
//
// cpf_cnpj and autuado are personal data, handled as IBAMA's CPF_CNPJ_EMBARGADO and
// NOME_EMBARGADO (SOURCES §1.6): restricted columns, never logged nor in the report's
// examples; documento_hmac is keyed by configuration (the same key, so documents match
// across both embargo sources). Bare digits that lost their leading zeros are completed when
// the check digits agree (etl.ibama_documento, the same reading as IBAMA's).
import { defineRelation } from '../../src/etl/relation.ts';
import { shapedPipeline } from '../../src/etl/shape.ts';
import { typedColumns } from '../../src/etl/sql/typed.ts';
import { classifyEmbargoes, embargoCounts } from './queries.ts';

/** The official file name and the ones it is published under (`embargos_icmbio_shp.zip` seen in consumers' code). */
export const ICMBIO_FILE_NAME = 'embargos_icmbio.zip';

/** snap.icmbio_embargos: columns in template order, with the DBF's names (and the 10-character spellings other exports use). */
export const ICMBIO_EMBARGOS = defineRelation({
  name: 'icmbio_embargos',
  columns: [
    { name: 'id_embargo', type: 'text', sql: 'c.id_embargo' },
    { name: 'numero_embargo', type: 'text', from: ['num_emb', 'numero_emb', 'numero_embargo'], required: true, sql: 'c.numero' },
    { name: 'serie_embargo', type: 'text', from: ['serie'], sql: 'c.serie' },
    { name: 'origem', type: 'text', from: ['origem'], counted: true },
    { name: 'numero_auto_infracao', type: 'text', from: ['numero_ai'], convert: 'code' },
    // Bare digits (completed when they lost leading zeros); the type by check digits; the HMAC keyed by configuration.
    { name: 'documento', type: 'text', from: ['cpf_cnpj'], counted: true, personal: true, sql: 'c.doc' },
    { name: 'documento_tipo', type: 'text', sql: 'etl.documento_tipo(c.doc)' },
    // None for a document the source masks ('***456789**'): it is no one's key.
    { name: 'documento_hmac', type: 'text', personal: true, sql: "CASE WHEN strpos(c.doc, '*') = 0 THEN etl.ibama_hmac(c.doc, current_setting('agro.hmac_key')) END" },
    { name: 'nome_autuado', type: 'text', from: ['autuado'], counted: true, personal: true },
    { name: 'descricao_infracao', type: 'text', from: ['desc_infra'], counted: true },
    { name: 'descricao_sancao', type: 'text', from: ['desc_sanc'] },
    { name: 'artigo_1', type: 'text', from: ['artigo_1'] },
    { name: 'artigo_2', type: 'text', from: ['artigo_2'] },
    { name: 'tipo_infracao', type: 'text', from: ['tipo_infra'], counted: true },
    { name: 'nome_uc', type: 'text', from: ['nome_uc'], counted: true },
    { name: 'cnuc', type: 'text', from: ['cnuc'], counted: true },
    { name: 'municipio', type: 'text', from: ['municipio'], counted: true },
    { name: 'uf', type: 'text', from: ['uf'], convert: 'upper', counted: true },
    // The engine's date rules: not a date → NULL, text kept in extra, counted; after as_of → NULL, counted.
    { name: 'data_embargo', type: 'date', from: ['data'], counted: true },
    { name: 'ano', type: 'integer', from: ['ano'], counted: true },
    { name: 'observacao', type: 'text', from: ['obs'] },
    { name: 'julgamento', type: 'text', from: ['julgamento'], counted: true },
    // geodesic, as the other national layers
    { name: 'area_calculada_ha', type: 'double precision', sql: 'ST_Area(c.g::geography) / 10000' },
    { name: 'geom', type: 'geometry(MultiPolygon,4326)', sql: 'c.g' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  indexes: { primaryKey: ['id_embargo'], gist: ['geom'], btree: ['numero_embargo', 'documento_hmac', 'cnuc'] },
});

/** What this pipeline adds to the report's facts. */
export interface IcmbioFacts {
  /**
   * Documents of the loaded embargoes. mascarado: masked in the source, kept as written, no type
   * nor HMAC; outro: neither a CPF nor a CNPJ by its check digits; zeros_completados: bare digits
   * that had lost their leading zeros, completed (also counted as cpf/cnpj).
   */
  documentos: { cpf: number; cnpj: number; outro: number; mascarado: number; zeros_completados: number; ausente: number };
  /** Loaded embargoes sharing their num_emb with another (different series). */
  numero_repetido: number;
  /** Loaded embargoes without a conservation unit (nome_uc and cnuc empty). */
  sem_uc: number;
  /** Where cfg.hmacKey came from (AGRO_HMAC_KEY or the development key). */
  hmac_key: 'env' | 'development';
}

export const icmbioEmbargos = shapedPipeline({
  name: 'icmbio-embargos',
  relation: ICMBIO_EMBARGOS,
  source: { fileName: ICMBIO_FILE_NAME, pattern: /^embargos_icmbio.*\.zip$/i, ext: /\.zip$/i, what: ICMBIO_FILE_NAME, fileDates: true },
  // SIRGAS 2000 when the zip has no .prj; a .prj is read and obeyed (the engine's CRS rules).
  read: { srid: 4674, maxDepth: 3 },
  repairPolygons: true,
  typed: true,
  dropped: ['duplicate_key'],
  classify: ({ client, ctx, t, asOf, snapshotId }) => classifyEmbargoes(client, t, { columns: typedColumns(ICMBIO_EMBARGOS, asOf, snapshotId), hmacKey: ctx.cfg.hmacKey }),
  overlay: { camada: 'embargo_icmbio', kind: 'area', idColumn: 'id_embargo' },
  async facts({ client, ctx, t, facts }) {
    const c = await embargoCounts(client, t);
    const hmacKey = ctx.cfg.hmacKeySource;
    const icmbio: IcmbioFacts = {
      documentos: { cpf: 0, cnpj: 0, outro: 0, mascarado: 0, ausente: 0, ...c.documentos, zeros_completados: c.zeros_completados },
      numero_repetido: c.repetidos,
      sem_uc: c.sem_uc,
      hmac_key: hmacKey,
    };
    if (c.repetidos) facts.notes.push(`${c.repetidos} loaded embargoes share their num_emb with another of a different series (${c.grupos} numbers): the key is num_emb/serie`);
    const masked = icmbio.documentos.mascarado;
    if (masked) facts.notes.push(`${masked} documents are masked in the source: kept as written (asterisks included), without type or documento_hmac`);
    if (c.zeros_completados) facts.notes.push(`${c.zeros_completados} documents had lost their leading zeros (bare digits read as a number): completed, as their check digits agree`);
    if (hmacKey === 'development') facts.notes.push('documento_hmac computed with the development key: set AGRO_HMAC_KEY in production');
    if (facts.fields.unknown.length) facts.notes.push(`unknown columns kept in extra: ${facts.fields.unknown.join(', ')}`);
    return { icmbio };
  },
});
