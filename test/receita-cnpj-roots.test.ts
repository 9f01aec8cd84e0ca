// A cnpj_basico that lost its leading zeros ('4129283' for '04129283', as a spreadsheet
// writes it) was loaded as written and counted nowhere: the company or partner row then
// matches no establishment, silently. It is still kept as written (the source's text), and
// counted in the report (cnpj.cnpj_basico_invalido, absent when none) with a note.
import { expect, it } from 'vitest';
import { buildReceitaMonth, RECEITA_FIXTURE_MONTH } from '../fixtures/receita-cnpj.ts';
import type { CnpjFacts } from '../pipelines/receita-cnpj/facts.ts';
import { receitaCnpj } from '../pipelines/receita-cnpj/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let root: string;
usesTestDatabase((d, t) => ((db = d), (root = t)), 'cnpj-roots-');

it('company and partner rows whose cnpj_basico is not 8 characters are kept as written and counted', async () => {
  const q = (f: string[]) => f.map((x) => `"${x}"`).join(';');
  await buildReceitaMonth(root, RECEITA_FIXTURE_MONTH, 'base', {
    EMPRECSV: [q(['4129283', 'EMPRESA SEM ZERO LTDA', '2062', '49', '1000,00', '03', ''])],
    SOCIOCSV: [q(['4129283', '2', 'JOSE SEM ZERO', '***123456**', '49', '20210301', '', '***000000**', '', '00', '5'])],
  });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, receitaCnpj, { source: root });
  expect(out.error).toBeUndefined();
  expect(out.status).toBe('published');
  expect((await db.pool.query(`SELECT cnpj_basico FROM serving.cnpj_empresas WHERE razao_social = 'EMPRESA SEM ZERO LTDA'`)).rows).toEqual([{ cnpj_basico: '4129283' }]);
  const report: QualityReport & { facts: { cnpj: CnpjFacts } } = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(report.facts.cnpj.cnpj_basico_invalido).toEqual({ empresas: 1, socios: 1 });
  expect(report.facts.notes.join('\n')).toMatch(/cnpj_basico not 8 characters .*: 1 company rows, 1 partner rows/);
}, 240_000);
