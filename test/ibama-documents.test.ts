// IBAMA's documents (SOURCES §1.6: "apparently unmasked", UNVERIFIED). A document the source
// publishes masked ('***.456.789-**' as Receita masks CPFs, or '123.***.***-00') is not its
// visible digits: read as digits it was published as a 5- or 6-digit "document" ('456789')
// with an HMAC that any other person with the same visible digits shares. Through a real run
// against PostGIS: a masked document is kept as written without punctuation, asterisks
// included, has no type and no HMAC, and the report counts it (documentos.mascarado).
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { IBAMA_TERMS, ibamaCsv, type IbamaTerm } from '../fixtures/ibama-embargos.ts';
import { ibamaEmbargos, type EmbargoFacts } from '../pipelines/ibama-embargos/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'ibama-documents-');

test('a masked document is kept as written (asterisks and all), without type or HMAC, and counted', async () => {
  const loaded = IBAMA_TERMS.filter((t) => t.role === 'filler' && /\d/.test(t.row.CPF_CNPJ_EMBARGADO ?? ''));
  const [cpf, cnpj, plain] = loaded.map((t) => t.id);
  const changes: Record<string, Partial<IbamaTerm['row']>> = {
    [cpf]: { CPF_CNPJ_EMBARGADO: '***.456.789-**' },
    [cnpj]: { CPF_CNPJ_EMBARGADO: '123.***.***-00' },
  };
  const terms = IBAMA_TERMS.map((t) => (changes[t.id] ? { ...t, row: { ...t.row, ...changes[t.id] } } : t));
  const file = path.join(tmp, 'termo_embargo.csv');
  fs.writeFileSync(file, ibamaCsv({ terms }), 'utf8');
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, ibamaEmbargos, { source: file });
  expect(out.status).toBe('published');
  const row = async (id: string) => {
    const num = terms.find((t) => t.id === id)!.row.NUM_TAD;
    return (await db.pool.query(`SELECT documento, documento_tipo, documento_hmac FROM "current".ibama_embargos WHERE numero_tad = $1`, [num])).rows[0];
  };
  expect(await row(cpf)).toEqual({ documento: '***456789**', documento_tipo: null, documento_hmac: null });
  expect(await row(cnpj)).toEqual({ documento: '123******00', documento_tipo: null, documento_hmac: null });
  // An unmasked document is read as before.
  const p = await row(plain);
  expect(p.documento).toMatch(/^\d{11}$|^\d{14}$/);
  expect(p.documento_hmac).toMatch(/^[0-9a-f]{64}$/);

  const q: QualityReport & { facts: { embargos: EmbargoFacts } } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(q.facts.embargos.documentos.mascarado).toBe(2);
  expect(q.facts.notes.join('\n')).toMatch(/2 documents are masked in the source/);
  // Masked documents never reach the report's text in clear either.
  expect(JSON.stringify(q)).not.toMatch(/456\.?789/);
});
