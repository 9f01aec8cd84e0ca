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

/** pipeline → its fixture (in), relation and key (and scope). The as-of date is fixed: file dates would vary by checkout. */
interface GoldenCase {
  pipeline: string;
  fixture: string;
  relation: string;
  key: string;
  name?: string;
  asOf?: string;
  /** The scope of a per-state pipeline (sicar). */
  uf?: string;
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
  // IBAMA's two routes, as of the fixture's release (its terms run to 2026); the rules variant has electronic statuses and future dates.
  { pipeline: 'ibama-embargos', fixture: 'fixtures/ibama-embargos/termo_embargo.csv', relation: 'ibama_embargos', key: 'id_tad', asOf: '2026-10-28' },
  { pipeline: 'ibama-embargos', fixture: 'fixtures/ibama-embargos/shapefile/adm_embargo_a.zip', relation: 'ibama_embargos', key: 'id_tad', asOf: '2026-10-28', name: 'ibama-embargos-shp' },
  { pipeline: 'ibama-embargos', fixture: 'fixtures/ibama-embargos/variants/termo_embargo_regras.csv', relation: 'ibama_embargos', key: 'id_tad', asOf: '2026-10-28', name: 'ibama-embargos-regras' },
  // ICMBio's embargoes in federal conservation units, as of the fixture's release (one row dated after it).
  { pipeline: 'icmbio-embargos', fixture: 'fixtures/icmbio-embargos/embargos_icmbio.zip', relation: 'icmbio_embargos', key: 'id_embargo', asOf: '2024-11-30' },
  { pipeline: 'zarc', fixture: 'fixtures/zarc', relation: 'zarc_risco', key: 'chave' },
  { pipeline: 'car-titulares', fixture: 'fixtures/car-titulares/titulares.csv', relation: 'car_titulares', key: 'car' },
  // SICAR, one state: AREA_IMOVEL (split in two layers) and the three themes; both relations.
  { pipeline: 'sicar', fixture: 'fixtures/sicar/GO', relation: 'car_imovel', key: 'car', uf: 'GO', name: 'sicar-GO' },
  { pipeline: 'sicar', fixture: 'fixtures/sicar/GO', relation: 'car_tema', key: 'car', uf: 'GO', name: 'sicar-GO-car_tema' },
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
      const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, pipeline, { source: path.join(ROOT, c.fixture), asOf: c.asOf ?? AS_OF, force: true, ...(c.uf ? { uf: c.uf } : {}) });
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
