// The facts name unknown codes with their counts, the most frequent first (SICAR's ind_status,
// ind_tipo, cod_tema; IBAMA's statuses and cancel/lift flags): a broken file whose codes differ
// on every row (a shifted column) names CODES_NAMED of them and counts the rest, instead of a
// note and a report key per row.
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { termCounts } from '../pipelines/ibama-embargos/queries.ts';
import { propertyFacts, themeFacts } from '../pipelines/sicar/queries.ts';
import { CODES_NAMED } from '../src/etl/quality.ts';
import type { ShapeTables } from '../src/etl/shape.ts';
import type { Sql } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

let db: TestDb;
const ROWS = 3_000;

beforeAll(async () => {
  db = await testDatabase();
  // Every row its own unknown ind_status ('S<i>'), except 'AA' ×3 and 'BB' ×2; ind_tipo: 'T1' on 10 rows.
  await db.pool.query(`CREATE TABLE public.typed_imovel AS
    SELECT 'GO-' || i AS car, NULL::date AS updated, i::bigint AS src_seq, 'ok'::text AS verdict,
           false AS num_area_unparsed, false AS mod_fiscal_unparsed, false AS num_area_overflow, false AS mod_fiscal_overflow,
           NULL::text AS dat_criaca_kind, NULL::text AS dat_atuali_kind,
           CASE WHEN i <= 3 THEN 'AA' WHEN i <= 5 THEN 'BB' ELSE 'S' || i END AS unknown_status,
           CASE WHEN i <= 10 THEN 'T1' END AS unknown_tipo
      FROM generate_series(1, ${ROWS}) i`);
  await db.pool.query(`CREATE TABLE public.typed_apps AS
    SELECT false AS area_unparsed, 'ok'::text AS verdict,
           CASE WHEN i <= 4 THEN 'ZZ' ELSE 'S' || i END AS unknown_status,
           CASE WHEN i <= 4 THEN 'APP_NOVO' WHEN i <= 100 THEN 'APP_RIO' ELSE 'C' || i END AS cod_tema
      FROM generate_series(1, ${ROWS}) i`);
  await db.pool.query(`CREATE TABLE public.classified_terms AS
    SELECT 'ok'::text AS verdict, 'ponto'::text AS geom_origem, NULL::text AS geom_problema, false AS pt_outside, true AS ativo,
           NULL::text AS documento, NULL::text AS documento_tipo, i::text AS numero_tad, NULL::text AS release_stamp,
           CASE WHEN i <= 3 THEN 'EM ANALISE' ELSE 'STATUS ' || i END AS status_desconhecido,
           CASE WHEN i <= 2 THEN 'SIT_CANCELADO "X"' END AS flag_desconhecido, false AS replacement_char, false AS documento_completado, false AS documento_escrito
      FROM generate_series(1, ${ROWS}) i`);
}, 120_000);

afterAll(async () => {
  await db?.drop();
});

describe('unknown codes in the facts', () => {
  test('AREA_IMOVEL: the most frequent codes per field, the others counted', async () => {
    const c = await db.pool.connect();
    try {
      const f = await propertyFacts(c, 'public.typed_imovel' as Sql);
      const status = f.unknownCodes.filter((u) => u.field === 'ind_status');
      expect(status).toHaveLength(CODES_NAMED);
      expect(status.slice(0, 2)).toEqual([{ field: 'ind_status', code: 'AA', n: 3 }, { field: 'ind_status', code: 'BB', n: 2 }]);
      expect(f.unknownCodes.filter((u) => u.field === 'ind_tipo')).toEqual([{ field: 'ind_tipo', code: 'T1', n: 10 }]);
      const distinct = ROWS - 5 + 2;
      expect(f.moreCodes).toEqual([{ field: 'ind_status', codes: distinct - CODES_NAMED, n: ROWS - 5 - (CODES_NAMED - 2) }]);
    } finally {
      c.release();
    }
  });

  test('a theme: status codes and cod_tema outside the vocabulary, named up to the cap', async () => {
    const c = await db.pool.connect();
    try {
      const f = await themeFacts(c, 'public.typed_apps' as Sql, ['APP_RIO']);
      expect(f.unknownStatus).toHaveLength(CODES_NAMED);
      expect(f.unknownStatus[0]).toEqual({ code: 'ZZ', n: 4 });
      expect(f.moreStatus).toEqual({ codes: ROWS - 4 + 1 - CODES_NAMED, n: ROWS - 4 - (CODES_NAMED - 1) });
      expect(f.unknownCodes).toHaveLength(CODES_NAMED);
      expect(f.unknownCodes[0]).toEqual({ code: 'APP_NOVO', n: 4 });
      expect(f.moreCodes).toEqual({ codes: ROWS - 100 + 1 - CODES_NAMED, n: ROWS - 100 - (CODES_NAMED - 1) });
      // A theme within the cap: everything named, nothing more.
      await c.query(`CREATE TEMP TABLE few AS SELECT * FROM public.typed_apps WHERE cod_tema = 'APP_NOVO'`);
      const few = await themeFacts(c, 'few' as Sql, ['APP_RIO']);
      expect(few.unknownCodes).toEqual([{ code: 'APP_NOVO', n: 4 }]);
      expect(few.moreCodes).toBeNull();
      expect(few.moreStatus).toBeNull();
    } finally {
      c.release();
    }
  });

  test('IBAMA: unknown statuses and flags named up to the cap, the others counted', async () => {
    const c = await db.pool.connect();
    try {
      const f = await termCounts(c, { classified: 'public.classified_terms' } as unknown as ShapeTables);
      expect(f.status_desconhecido).toHaveLength(CODES_NAMED);
      expect(f.status_desconhecido[0]).toEqual(['EM ANALISE', 3]);
      expect(f.status_nao_listados).toEqual({ codigos: ROWS - 3 + 1 - CODES_NAMED, termos: ROWS - 3 - (CODES_NAMED - 1) });
      expect(f.flag_desconhecido).toEqual([['SIT_CANCELADO "X"', 2]]);
      expect(f.flag_nao_listados).toEqual({ codigos: 0, termos: 0 });
    } finally {
      c.release();
    }
  });
});
