// car-titulares: who holds a CAR property. Public CAR data names no owner (SOURCES §12.1),
// so the declared links come from an operator-supplied extract, one national snapshot per
// extract: CSV `car;documento;nome;vinculo` (header row; `;` expected, another delimiter and
// UTF-8, latin1 or UTF-16 are detected by the one CSV reader, src/etl/csv-records.ts),
// vinculo ∈ proprietario | possuidor (contract §3). `--source` is the CSV (file, file:// or
// http(s):// URL) or a folder holding `titulares.csv` (or exactly one .csv).
//
// Rows are staged as text by header and normalised in SQL (sql/queries/titulares_*.sql):
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
// not loaded; documento_hmac is the equality lookup key.
import fs from 'node:fs';
import path from 'node:path';
import { resolveHmacKey, type HmacKey } from '../../src/documents.ts';
import { AgroError, ERRORS, isAgroError } from '../../src/errors.ts';
import { fetchSource, isHttp, localPath, type FetchedFile } from '../../src/etl/download.ts';
import { checkSnapshotTable, indexSnapshotTable } from '../../src/etl/load-steps.ts';
import type { LoadResult, Pipeline, RunContext, SnapshotTarget } from '../../src/etl/pipeline.ts';
import { addVerdicts, emptyFacts, sum, type QualityFacts } from '../../src/etl/quality.ts';
import { lastModifiedDay } from '../../src/etl/source-files.ts';
import { csvEncodingName } from '../../src/etl/csv-records.ts';
import { stageCsv, type CsvStageResult } from '../../src/etl/stage-csv.ts';
import type { FieldSpec } from '../../src/etl/stage-vector.ts';
import { maskCpfsInText } from '../../src/privacy.ts';
import { namedSql, render } from '../../src/sql.ts';

/** The file looked for when --source names a folder. */
export const DEFAULT_FILE = 'titulares.csv';

/** Canonical staging name ← accepted header spellings (lower case; the BOM is stripped before matching). */
export const TITULARES_FIELDS: FieldSpec[] = [
  { name: 'car', aliases: ['car', 'cod_imovel', 'numero_car'], required: true },
  { name: 'documento', aliases: ['documento', 'cpf_cnpj'], required: true },
  { name: 'nome', aliases: ['nome', 'nome_titular'] },
  { name: 'vinculo', aliases: ['vinculo', 'vínculo', 'tipo_vinculo'], required: true },
];

/** Rejection reasons (facts.rejected) besides stageCsv's wrong field count. */
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

async function fetchExtract(ctx: RunContext): Promise<FetchedFile[]> {
  const src = ctx.options.source ?? ctx.cfg.sources['car-titulares'];
  if (!src) {
    throw new AgroError('usage', 'car-titulares needs --source <CSV or folder holding titulares.csv> (or AGRO_SOURCE_CAR_TITULARES): the holder extract is supplied by the operator, there is no public source');
  }
  let uri = src;
  if (!isHttp(src)) {
    const p = localPath(src);
    if (fs.statSync(p, { throwIfNoEntry: false })?.isDirectory()) {
      const csvs = fs.readdirSync(p).filter((n) => /\.csv$/i.test(n)).sort();
      const name = csvs.includes(DEFAULT_FILE) ? DEFAULT_FILE : csvs.length === 1 ? csvs[0] : null;
      if (!name) throw new AgroError('source_not_found', `${p} holds no ${DEFAULT_FILE}${csvs.length ? ` and ${csvs.length} other .csv files` : ''}`);
      uri = path.join(p, name);
    }
  }
  const file = await fetchSource(uri, { destDir: ctx.rawDir, userAgent: ctx.cfg.userAgent, expect: 'csv', log: (m) => ctx.log.info(m) });
  if (!file) throw new AgroError('source_not_found', uri);
  return [file];
}

/** Errors of the CSV reader may quote a cell: CPFs are masked before the message reaches the ledger or a log. */
function scrubbed(e: unknown): unknown {
  if (!isAgroError(e)) return e instanceof Error ? new Error(maskCpfsInText(e.message)) : e;
  const prefix = `${ERRORS[e.code].message}: `;
  const detail = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
  return new AgroError(e.code, maskCpfsInText(detail), e.details);
}

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

async function load(ctx: RunContext, files: FetchedFile[], target: SnapshotTarget): Promise<LoadResult> {
  const facts = emptyFacts();
  const stage = ctx.stagingTable('extrato');
  const classified = ctx.stagingTable('classificado');
  const hmac = resolveHmacKey(ctx.cfg);
  const client = await ctx.pool.connect();
  try {
    const staged: CsvStageResult = await ctx.stage(
      'read',
      async () => {
        try {
          return await stageCsv(client, stage, files[0].path, TITULARES_FIELDS, { delimiter: ';', columns: 'header', badRows: 'reject' });
        } catch (e) {
          throw scrubbed(e);
        }
      },
      (r) => r.rows + r.badRows,
      (r) => ({ rows: r.rows, bad_rows: r.badRows, bad_row_lines: r.badRowSamples, unknown: r.unknown }),
    );

    const built = await ctx.stage(
      'normalise',
      async () => {
        await client.query(render(namedSql('queries/titulares_classify'), { classified, stage }));
        const table = await target.table('car_titulares');
        await client.query('BEGIN');
        try {
          // Transaction-local: the key never outlives the statement that needs it.
          await client.query(`SELECT set_config('agro.hmac_key', $1, true)`, [hmac.key]);
          await client.query(render(namedSql('queries/titulares_build'), { target: table, classified, snapshot_id: String(target.snapshotId) }));
          await client.query('COMMIT');
        } catch (e) {
          await client.query('ROLLBACK').catch(() => {});
          throw e;
        }
        const rows = await checkSnapshotTable(client, 'car_titulares', table);
        return { table, rows };
      },
      (r) => r.rows,
    );

    await ctx.stage('index', () =>
      indexSnapshotTable(client, built.table, { primaryKey: ['car', 'documento', 'vinculo'], btree: ['documento_hmac'] }),
    );

    // ---- quality facts (counts and record numbers only: never a document)
    const verdicts = await client.query(
      `SELECT verdict, count(*)::int AS n, ((array_agg(src_seq ORDER BY src_seq))[1:20])::int[] AS registros
         FROM ${classified} GROUP BY verdict ORDER BY verdict`,
    );
    // stageCsv numbers records with the header as 1 and gives src_seq to well-formed rows
    // only: map both to data-record numbers (exact while every bad row is sampled).
    const badRecords = staged.badRowSamples.map((r) => r - 1).sort((a, b) => a - b);
    const recordOf = (seq: number) => badRecords.reduce((r, b) => (b <= r ? r + 1 : r), seq);
    addVerdicts(facts, Object.fromEntries(verdicts.rows.map((v) => [v.verdict, v.n])), { dropped: ['duplicate'] });
    const registros: Record<string, number[]> = {};
    for (const v of verdicts.rows) if (v.verdict !== 'ok') registros[v.verdict] = (v.registros as number[]).map(recordOf);
    if (staged.badRows) {
      facts.rejected.bad_field_count = staged.badRows;
      registros.bad_field_count = badRecords;
    }
    const f = (await client.query(render(namedSql('queries/titulares_facts'), { target: built.table, classified }))).rows[0];
    facts.fields = { missingOptional: staged.missingOptional, unknown: staged.unknown, empty: { nome: f.sem_nome } };
    facts.encoding = { name: csvEncodingName(staged.format.encoding), assumed: false, replacementChars: f.fffd };
    const titulares: TitularesFacts = {
      por_vinculo: { proprietario: f.proprietario, possuidor: f.possuidor },
      por_tipo_documento: { cpf: f.cpf, cnpj: f.cnpj },
      cnpj_alfanumerico: f.cnpj_alfanumerico,
      cars: f.cars,
      documentos: f.documentos,
      car_ausente: { vinculos: f.ausentes_vinculos, cars: f.ausentes_cars, ufs: f.ausentes_ufs },
      ufs_car_carregadas: f.ufs_car,
      registros,
      hmac_key: hmac.source,
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
    if (hmac.source === 'development') n.push('documento_hmac computed with the development key: set AGRO_HMAC_KEY in production');

    return {
      rowsRead: staged.rows + staged.badRows,
      rowsLoaded: built.rows,
      rowsRejected: sum(facts.rejected),
      facts: Object.assign(facts, { titulares }) as QualityFacts,
      fingerprint: staged.fingerprint,
    };
  } finally {
    client.release();
  }
}

export const carTitulares: Pipeline = {
  name: 'car-titulares',
  scopedByUf: false,
  relations: ['car_titulares'],
  mainRelation: 'car_titulares',
  fetch: fetchExtract,
  async releaseDate(_ctx, files) {
    // An extract carries no date of its own: the server's Last-Modified, else the run date (or --as-of).
    return lastModifiedDay(files[0]);
  },
  load,
};
