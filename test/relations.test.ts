// Declarations and templates agree: every relation a shaped pipeline declares lists exactly the
// columns (names, order, types) of its snap.<relation>__template, checked without loading; a
// declaration that disagrees is caught; and adding a column is the declaration plus one line of
// migration (etl.add_relation_column), proven end to end on the FUNAI fixture.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { FUNAI_FIXTURE, buildFunaiZip } from '../fixtures/funai-tis.ts';
import { FUNAI_TIS, funaiTis } from '../pipelines/funai-tis/index.ts';
import { RELATIONS as CNPJ_RELATIONS, SOCIOS } from '../pipelines/receita-cnpj/relations.ts';
import { indexStatements } from '../src/etl/load-steps.ts';
import { PIPELINES } from '../pipelines/registry.ts';
import { OVERLAYS } from '../src/etl/overlaps.ts';
import { declaredShape, defineRelation, type ColumnDef, type Relation } from '../src/etl/relation.ts';
import { runPipeline } from '../src/etl/run.ts';
import { shapedPipeline, type InputsSpec, type ShapedPipeline } from '../src/etl/shape.ts';
import { buildSnapshot, checkDeclaredShape, templateShape } from '../src/etl/sql/shape.ts';
import { sqlText } from '../src/sql.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const shaped = PIPELINES.filter((p): p is ShapedPipeline => 'spec' in p && !!(p as ShapedPipeline).spec?.relation);
/** Pipelines of several inputs and relations on the shape (sicar). */
const several = PIPELINES.flatMap((p) => ('spec' in p && 'inputs' in (p.spec as object) ? [{ name: p.name, spec: p.spec as InputsSpec }] : []));

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe('relation declarations', () => {
  test('the shaped pipelines include the national layers', () => {
    expect(shaped.map((p) => p.name)).toEqual(expect.arrayContaining(['funai-tis', 'cnuc-ucs', 'incra-quilombos']));
  });

  for (const p of shaped) {
    test(`${p.name}: the declaration of ${p.spec.relation.name} is its template`, async () => {
      expect(declaredShape(p.spec.relation)).toBe(await templateShape(db.pool, p.spec.relation.name));
    });
  }

  test('the pipelines of several inputs include sicar, with both its relations', () => {
    expect(several.map((p) => [p.name, p.spec.relations.map((o) => o.relation.name)])).toEqual(expect.arrayContaining([['sicar', ['car_tema', 'car_imovel']]]));
  });

  for (const p of several) {
    for (const { relation } of p.spec.relations) {
      test(`${p.name}: the declaration of ${relation.name} is its template`, async () => {
        expect(declaredShape(relation)).toBe(await templateShape(db.pool, relation.name));
      });
    }
  }

  // The CNPJ month: one relation per file family, copied straight from positional records.
  for (const rel of CNPJ_RELATIONS) {
    test(`receita-cnpj: the declaration of ${rel.name} is its template`, async () => {
      expect(declaredShape(rel)).toBe(await templateShape(db.pool, rel.name));
      await expect(checkDeclaredShape(db.pool, rel)).resolves.toBeUndefined();
    });
  }

  test('a positional declaration: fields in record order, positions without gaps, each with its conversion', async () => {
    expect(SOCIOS.positional.map((f) => f.at)).toEqual([...SOCIOS.positional.keys()]);
    expect(SOCIOS.positional.map((f) => f.name).slice(0, 4)).toEqual(['cnpj_basico', 'identificador_de_socio', 'nome_socio', 'cnpj_cpf_do_socio']);
    const cols = (extra: ColumnDef[]): ColumnDef[] => [...extra, { name: 'extra', type: 'jsonb', role: 'extra' as const }, { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' as const }];
    expect(() => defineRelation({ name: 'gap', columns: cols([{ name: 'a', type: 'text', cell: 'text', at: 0 }, { name: 'b', type: 'text', cell: 'text', at: 2 }]), indexes: {} })).toThrow(/positions must run 0\.\.1/);
    expect(() => defineRelation({ name: 'nocell', columns: cols([{ name: 'a', type: 'text', at: 0 }]), indexes: {} })).toThrow(/needs its conversion/);
    // A streamed column is not staged nor converted by the engine.
    expect(defineRelation({ name: 'ok', columns: cols([{ name: 'a', type: 'text', cell: 'text', at: 0 }]), indexes: {} }).staging).toEqual([]);
    // A declaration whose template disagrees fails before anything is copied.
    const moved = defineRelation({ ...SOCIOS, columns: [SOCIOS.columns[1], SOCIOS.columns[0], ...SOCIOS.columns.slice(2)] });
    await expect(checkDeclaredShape(db.pool, moved)).rejects.toThrow(/does not match its declaration/);
  });

  test('declared indexes: btree keys, named btree and trigram expressions, named <table>_<suffix>', () => {
    expect(indexStatements('snap.t__s1', { btree: ['a', { name: 'doc', columns: ['b'] }], trigram: [{ name: 'nome_trgm', on: 'etl.cnpj_busca(nome)' }] })).toEqual([
      { name: 'a', sql: 'CREATE INDEX "t__s1_a" ON snap.t__s1 ("a")' },
      { name: 'doc', sql: 'CREATE INDEX "t__s1_doc" ON snap.t__s1 ("b")' },
      { name: 'nome_trgm', sql: 'CREATE INDEX "t__s1_nome_trgm" ON snap.t__s1 USING gin (etl.cnpj_busca(nome) gin_trgm_ops)' },
    ]);
  });

  test('a declaration that disagrees with its template is caught', async () => {
    const swapped: Relation = defineRelation({ ...FUNAI_TIS, columns: [FUNAI_TIS.columns[1], FUNAI_TIS.columns[0], ...FUNAI_TIS.columns.slice(2)] });
    expect(declaredShape(swapped)).not.toBe(await templateShape(db.pool, 'funai_tis'));
    const retyped = defineRelation({ ...FUNAI_TIS, columns: FUNAI_TIS.columns.map((c) => (c.name === 'fase' ? { ...c, type: 'integer' } : c)) });
    expect(declaredShape(retyped)).not.toBe(await templateShape(db.pool, 'funai_tis'));
  });

  test('a declaration that cannot be built fails when it is made', () => {
    expect(() => defineRelation({ ...FUNAI_TIS, columns: FUNAI_TIS.columns.filter((c) => c.role !== 'extra') })).toThrow(/extra and snapshot_id/);
    expect(() => defineRelation({ ...FUNAI_TIS, columns: [...FUNAI_TIS.columns, { name: 'x', type: 'point' as string, from: ['x'] }] })).toThrow(/name a conversion/);
    expect(() => defineRelation({ ...FUNAI_TIS, fields: [{ name: 'nome', from: ['nome'], keep: 'extra' }] })).toThrow(/nome declared twice/);
  });

  test('more conversions than jsonb_build_object takes arguments: every raw text is kept', async () => {
    const names = Array.from({ length: 60 }, (_, i) => `n${i}`);
    const rel = defineRelation({
      name: 'wide',
      columns: [
        { name: 'id', type: 'text', from: ['id'] },
        ...names.map((n) => ({ name: n, type: 'double precision', from: [n] })),
        { name: 'extra', type: 'jsonb', role: 'extra' },
        { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
      ],
      indexes: {},
    });
    const client = await db.pool.connect();
    try {
      await client.query(`CREATE TEMP TABLE wide_stage (src_seq bigint, id text, ${names.map((n) => `${n} text`).join(', ')}, extra jsonb)`);
      await client.query(`INSERT INTO wide_stage VALUES (1, 'a', ${names.map((_, i) => (i % 2 ? `'${i}'` : `'x${i}'`)).join(', ')}, '{"u": 1}')`);
      await buildSnapshot(client, {
        rel, target: sqlText('pg_temp.wide'), kept: sqlText('(SELECT 1::bigint AS src_seq)'), stage: sqlText('pg_temp.wide_stage'),
        joins: sqlText(''), values: {}, asOf: '2025-01-01', snapshotId: 7,
      });
      const r = (await client.query('SELECT * FROM pg_temp.wide')).rows[0];
      expect(Object.keys(r.extra).length).toBe(31); // 30 values that are not numbers, and the unmapped column
      expect(r).toMatchObject({ id: 'a', n0: null, n1: 1, n59: 59, snapshot_id: 7 });
      expect(r.extra).toMatchObject({ u: 1, n0: 'x0', n58: 'x58' });
    } finally {
      client.release();
    }
  });

  test('the overlays are the layers’ own declarations', () => {
    expect(OVERLAYS.find((o) => o.camada === 'ti')).toEqual({ camada: 'ti', kind: 'area', idColumn: 'codigo', dataset: 'funai-tis', relation: 'funai_tis' });
    expect(new Set(OVERLAYS.map((o) => o.camada))).toEqual(new Set(['embargo', 'embargo_icmbio', 'uc', 'ti', 'quilombo', 'municipio', 'rodovia']));
  });

  test('adding a column: the declaration plus etl.add_relation_column, over a published snapshot', async () => {
    const source = path.join(ROOT, 'fixtures/funai-tis/tis_poligonais.zip');
    const first = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, funaiTis, { source, asOf: '2025-06-01' });
    expect(first.status).toBe('published');

    // The migration line, then the declaration's new last column (the phase in upper case).
    await db.pool.query(`SELECT etl.add_relation_column('funai_tis', 'fase_maiuscula', 'text')`);
    const withColumn = defineRelation({ ...FUNAI_TIS, columns: [...FUNAI_TIS.columns, { name: 'fase_maiuscula', type: 'text', sql: 'upper(btrim(s.fase))' }] });
    expect(declaredShape(withColumn)).toBe(await templateShape(db.pool, 'funai_tis'));
    // The published snapshot gained the column too (NULL), so current.funai_tis keeps answering.
    const before = await db.pool.query('SELECT count(*)::int AS n, count(fase_maiuscula)::int AS filled FROM "current".funai_tis');
    expect(before.rows[0]).toEqual({ n: first.rows_loaded, filled: 0 });

    // The next release (another file: the same one would be 'unchanged') loads the column.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'relations-'));
    const next = await buildFunaiZip(tmp, { rows: FUNAI_FIXTURE.slice(1) });
    const pipeline = shapedPipeline({ ...funaiTis.spec, relation: withColumn });
    const second = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, pipeline, { source: next, asOf: '2025-06-02', force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
    expect(second.status).toBe('published');
    const after = await db.pool.query(`SELECT codigo, fase, fase_maiuscula FROM "current".funai_tis WHERE fase IS NOT NULL ORDER BY codigo`);
    expect(after.rows.length).toBeGreaterThan(0);
    for (const r of after.rows) expect(r.fase_maiuscula).toBe(r.fase.trim().toUpperCase());
  });
});
