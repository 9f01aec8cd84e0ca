// Golden in/out per pipeline: each committed fixture (in) loads into a fresh database; the
// snapshot (normalised GeoJSON) and the quality facts (out) must equal test/golden/<pipeline>/.
// Regenerate: UPDATE_GOLDEN=1 npx vitest run test/golden.test.ts (then review the diff).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { findPipeline } from '../pipelines/registry.ts';
import { runPipeline } from '../src/etl/run.ts';
import { qualifiedSnapshotTable } from '../src/etl/names.ts';
import { expectGolden, factsJson, snapshotGeoJson, snapshotJsonLines } from './helpers/golden.ts';
import { testDatabase, type TestDb } from './helpers/db.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const AS_OF = '2025-06-01';

/** pipeline → its fixture (in), relation and key. The as-of date is fixed: file dates would vary by checkout. */
interface GoldenCase {
  pipeline: string;
  fixture: string;
  relation: string;
  key: string;
  name?: string;
  asOf?: string;
  /** A multi-relation snapshot: every relation's rows as JSON lines (<relation>.jsonl) instead of out.geojson. */
  relations?: string[];
  /** Loaded first (the snapshot reads it, e.g. receita-cnpj's municipality crosswalk reads ibge-municipios). */
  needs?: { pipeline: string; fixture: string };
}

const CASES: GoldenCase[] = [
  { pipeline: 'funai-tis', fixture: 'fixtures/funai-tis/tis_poligonais.zip', relation: 'funai_tis', key: 'codigo' },
  { pipeline: 'cnuc-ucs', fixture: 'fixtures/cnuc-ucs/shp_cnuc_2024_10.zip', relation: 'cnuc_ucs', key: 'codigo' },
  { pipeline: 'incra-quilombos', fixture: 'fixtures/incra-quilombos/Áreas de Quilombolas.zip', relation: 'incra_quilombos', key: 'codigo' },
  { pipeline: 'incra-quilombos', fixture: 'fixtures/incra-quilombos-overflow/Áreas de Quilombolas.zip', relation: 'incra_quilombos', key: 'codigo', name: 'incra-quilombos-overflow' },
  { pipeline: 'ibge-municipios', fixture: 'fixtures/ibge-municipios/BR_Municipios_2024.zip', relation: 'ibge_municipios', key: 'geocodigo' },
  { pipeline: 'dnit-snv', fixture: 'fixtures/dnit-snv/202507A.zip', relation: 'dnit_snv', key: 'codigo' },
  // The CNPJ fixture month (37 zips, the folder of months: the newest is taken), as of its first day.
  {
    pipeline: 'receita-cnpj', fixture: 'fixtures/receita-cnpj', relation: 'cnpj_estabelecimentos', key: 'cnpj', asOf: '2026-10-01', name: 'receita-cnpj-month',
    relations: ['cnpj_empresas', 'cnpj_estabelecimentos', 'cnpj_socios', 'cnpj_simples', 'cnpj_cnaes', 'cnpj_motivos', 'cnpj_municipios', 'cnpj_naturezas', 'cnpj_paises', 'cnpj_qualificacoes'],
    needs: { pipeline: 'ibge-municipios', fixture: 'fixtures/ibge-municipios/BR_Municipios_2024.zip' },
  },
];

let db: TestDb;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.drop();
});

describe('golden in/out', () => {
  for (const c of CASES) {
    const name = c.name ?? c.pipeline;
    test(name, async () => {
      const pipeline = findPipeline(c.pipeline)!;
      if (c.needs) await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, findPipeline(c.needs.pipeline)!, { source: path.join(ROOT, c.needs.fixture), asOf: AS_OF, force: true });
      const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, pipeline, { source: path.join(ROOT, c.fixture), asOf: c.asOf ?? AS_OF, force: true });
      expect(out.snapshot_id).not.toBeNull();
      const q = await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id]);
      const dir = path.join(ROOT, 'test/golden', name);
      if (c.relations) {
        for (const r of c.relations) expectGolden(path.join(dir, `${r}.jsonl`), await snapshotJsonLines(db.pool, qualifiedSnapshotTable(r, out.snapshot_id!)));
      } else expectGolden(path.join(dir, 'out.geojson'), await snapshotGeoJson(db.pool, qualifiedSnapshotTable(c.relation, out.snapshot_id!), c.key));
      expectGolden(path.join(dir, 'facts.json'), factsJson(q.rows[0].quality.facts));
    });
  }
});
