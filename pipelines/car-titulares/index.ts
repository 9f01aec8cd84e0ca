// car-titulares: who holds a CAR property. Public CAR data names no owner (SOURCES §12.1),
// so the declared links come from an operator-supplied extract, one national snapshot per
// extract: CSV `car;documento;nome;vinculo` (header row; `;` expected, another delimiter and
// UTF-8, latin1 or UTF-16 are detected by the one CSV reader, src/etl/csv-records.ts),
// vinculo ∈ proprietario | possuidor (contract §3). `--source` is the CSV (file, file:// or
// http(s):// URL) or a folder holding `titulares.csv` (or exactly one .csv).
//
// On the one shape: the relation is declared once below; the read stages the CSV by header
// (read.csv); the classify types each row once in SQL (sql/queries/titulares_classify.sql,
// ShapeSpec.typed: the build copies the kept rows):
// CAR number upper-cased and checked (etl.car_number_ok), document reduced to its stored
// form and checked by its check digits (etl.cpf_ok / etl.cnpj_ok, alphanumeric CNPJs
// included), vinculo checked. Invalid rows are rejected with a reason; exact duplicates of
// (car, documento, vinculo) are dropped and counted. CAR numbers that no current CAR
// snapshot holds are reported, not rejected (the extract may cover states not loaded).
//
// Inferred links (IBAMA embargoes on the property) are not stored here: they are a view on
// current data (derived.car_titulares_inferidos), so they never go stale; serving.car_titulares
// shows both.
//
// The extract is personal data: no document is ever logged or written to the quality report
// (rows are referred to by record number); columns beyond the four are reported by name and
// not loaded (the relation has no extra column); documento_hmac is the equality lookup key,
// computed in the classify from a transaction-local setting (the key is never in SQL text).
import { resolveHmacKey, type HmacKey } from '../../src/documents.ts';
import { defineRelation } from '../../src/etl/relation.ts';
import { csvFiles, fetchCsv, type CsvSource } from '../../src/etl/shape-csv.ts';
import { shapedPipeline } from '../../src/etl/shape.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { classifyTitulares, titularesCounts, verdictRecords } from './queries.ts';

/** The file looked for when --source names a folder (else its only .csv). */
export const DEFAULT_FILE = 'titulares.csv';

/**
 * snap.car_titulares: columns in template order with their accepted header spellings (lower
 * case; the BOM is stripped before matching). The classify types every column (`c`).
 */
export const CAR_TITULARES = defineRelation({
  name: 'car_titulares',
  withoutExtra: 'personal data: columns beyond car, documento, nome and vinculo are reported by name and not loaded',
  columns: [
    { name: 'car', type: 'text', from: ['car', 'cod_imovel', 'numero_car'], required: true, sql: 'c.car' },
    { name: 'documento', type: 'text', from: ['documento', 'cpf_cnpj'], required: true, personal: true, sql: 'c.documento' },
    { name: 'tipo_documento', type: 'text', sql: 'c.tipo_documento' },
    { name: 'nome', type: 'text', from: ['nome', 'nome_titular'], counted: true, personal: true, sql: 'c.nome' },
    { name: 'vinculo', type: 'text', from: ['vinculo', 'vínculo', 'tipo_vinculo'], required: true, sql: 'c.vinculo' },
    // 'declarado'; the extract and the snapshot; keyed by the configured HMAC key (a transaction-local setting of the classify).
    { name: 'origem', type: 'text', sql: 'c.origem' },
    { name: 'evidencia', type: 'jsonb', sql: 'c.evidencia' },
    { name: 'documento_hmac', type: 'text', personal: true, sql: 'c.documento_hmac' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  orderBy: 'c.car, c.src_seq',
  indexes: { primaryKey: ['car', 'documento', 'vinculo'], btree: ['documento_hmac'] },
});

/** Canonical staging name ← accepted header spellings. */
export const TITULARES_FIELDS = CAR_TITULARES.staging;

/** Rejection reasons (facts.rejected) besides the CSV reader's wrong field count. */
export const REJECT_REASONS = ['bad_car_number', 'bad_document', 'bad_vinculo'] as const;

/** Pipeline-specific facts, kept in the report JSON under `titulares`. */
export interface TitularesFacts {
  por_vinculo: { proprietario: number; possuidor: number };
  por_tipo_documento: { cpf: number; cnpj: number };
  cnpj_alfanumerico: number;
  /** Distinct CAR numbers and documents among the loaded links. */
  cars: number;
  documentos: number;
  /** Links whose CAR number is in no current CAR snapshot, their distinct CARs and the UFs of those. */
  car_ausente: { vinculos: number; cars: number; ufs: string[] };
  /** UFs with a current CAR snapshot when the extract was loaded. */
  ufs_car_carregadas: string[];
  /** Data-record numbers (1-based, header excluded) of rejected and dropped rows, first 20 per reason. */
  registros: Record<string, number[]>;
  hmac_key: HmacKey['source'];
}

/** The extract: a CSV file or URL, or a folder holding titulares.csv (or exactly one .csv). */
const SOURCE: CsvSource = {
  fileName: DEFAULT_FILE,
  ext: /\.csv$/i,
  what: `${DEFAULT_FILE} (or exactly one .csv)`,
  hint: 'the holder extract is supplied by the operator, there is no public source',
};

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

export const carTitulares = shapedPipeline({
  name: 'car-titulares',
  relation: CAR_TITULARES,
  // An extract carries no date of its own: the server's Last-Modified, else the run date (or --as-of).
  source: { ...SOURCE, filesDate: (files) => lastModifiedDay(files[0]) },
  fetch: (ctx) => fetchCsv(ctx, 'car-titulares', SOURCE),
  // No layers: the extract is delimited text.
  read: { srid: 4674, csv: { delimiter: ';', badRows: 'reject' } },
  typed: true,
  personalData: true,
  classify: ({ client, ctx, t, snapshotId }) => classifyTitulares(client, t, { snapshotId, hmacKey: resolveHmacKey(ctx.cfg).key }),
  dropped: ['duplicate'],
  // Counted per row (a row holding U+FFFD), below.
  replacementChars: 'own',
  async facts({ client, ctx, t, target, facts, staged }) {
    // Counts and record numbers only: never a document.
    const [file] = csvFiles(staged);
    // The CSV reader numbers lines with the header as 1 and gives src_seq to well-formed rows
    // only: map both to data-record numbers (exact while every bad row is sampled).
    const badRecords = file.badRowSamples.map((r) => r - 1).sort((a, b) => a - b);
    const recordOf = (seq: number) => badRecords.reduce((r, b) => (b <= r ? r + 1 : r), seq);
    const registros: Record<string, number[]> = {};
    for (const v of await verdictRecords(client, t.classified)) if (v.verdict !== 'ok') registros[v.verdict] = v.registros.map(recordOf);
    if (file.badRows) registros.bad_field_count = badRecords;
    const f = await titularesCounts(client, { target, classified: t.classified });
    facts.encoding.replacementChars = f.fffd;
    const hmac = resolveHmacKey(ctx.cfg).source;
    const titulares: TitularesFacts = {
      por_vinculo: { proprietario: f.proprietario, possuidor: f.possuidor },
      por_tipo_documento: { cpf: f.cpf, cnpj: f.cnpj },
      cnpj_alfanumerico: f.cnpj_alfanumerico,
      cars: f.cars,
      documentos: f.documentos,
      car_ausente: { vinculos: f.ausentes_vinculos, cars: f.ausentes_cars, ufs: f.ausentes_ufs },
      ufs_car_carregadas: f.ufs_car,
      registros,
      hmac_key: hmac,
    };

    const n = facts.notes;
    n.push(`links loaded: ${f.proprietario} proprietario, ${f.possuidor} possuidor (${f.cpf} CPF, ${f.cnpj} CNPJ of which ${f.cnpj_alfanumerico} alphanumeric) on ${plural(f.cars, 'CAR', 'CARs')}`);
    for (const [reason, recs] of Object.entries(registros)) {
      const total = facts.rejected[reason] ?? facts.dropped[reason] ?? recs.length;
      n.push(`${reason}: ${total} ${reason === 'duplicate' ? 'dropped' : 'rejected'} (${recs.length === 1 && total === 1 ? 'record' : 'records'} ${recs.join(', ')}${total > recs.length ? ', …' : ''})`);
    }
    if (f.ausentes_vinculos) {
      const loaded = f.ufs_car.length ? `CAR states loaded: ${f.ufs_car.join(', ')}` : 'no CAR snapshot is loaded';
      n.push(`${plural(f.ausentes_vinculos, 'link names', 'links name')} ${plural(f.ausentes_cars, 'CAR number', 'CAR numbers')} (${f.ausentes_ufs.join(', ')}) found in no current CAR snapshot (${loaded}): kept, the extract may cover states not loaded`);
    }
    if (staged.unknown.length) n.push(`columns not loaded (only car, documento, nome, vinculo are kept from this personal-data extract): ${staged.unknown.join(', ')}`);
    if (f.fffd) n.push(`${f.fffd} rows hold U+FFFD: the file is probably not UTF-8`);
    if (hmac === 'development') n.push('documento_hmac computed with the development key: set AGRO_HMAC_KEY in production');
    return { titulares };
  },
});
