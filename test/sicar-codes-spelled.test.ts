// SICAR status and type codes as a source may spell them (SOURCES §2.4: the WFS may return
// labels instead of AT/IRU), through a real AREA_IMOVEL zip and a run against PostGIS:
// labels in any case, with or without accents, map to the codes of §2.5; a code that is
// none of them is NULL in its column, counted, and its text kept in the row's `extra`.
import fs from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { buildLayerZip, type LayerRow } from '../fixtures/readers.ts';
import { AREA_IMOVEL_FIELDS, SICAR_FIXTURES } from '../fixtures/sicar.ts';
import { sicar } from '../pipelines/sicar/index.ts';
import type { QualityReport } from '../src/etl/quality.ts';
import { runPipeline } from '../src/etl/run.ts';
import type { TestDb } from './helpers/db.ts';
import { usesTestDatabase } from './helpers/hooks.ts';

let db: TestDb;
let tmp: string;
usesTestDatabase((d, t) => ((db = d), (tmp = t)), 'sicar-codes-');

/** Status and type as written, in the order of GO's fixture rows (cycled). */
const SPELLED: [string, string][] = [
  ['Ativo', 'Imóvel Rural'],
  ['PENDENTE', 'IMOVEL_RURAL'],
  ['cancelado', 'Assentamento de Reforma Agrária'],
  ['Suspenso', 'Povos e Comunidades Tradicionais'],
  ['Em retificação', 'Imóvel Urbano'],
];
const WANT: Record<string, [string | null, string | null]> = {
  'Ativo': ['ativo', null], 'PENDENTE': ['pendente', null], 'cancelado': ['cancelado', null], 'Suspenso': ['suspenso', null], 'Em retificação': [null, null],
  'Imóvel Rural': [null, 'imovel_rural'], 'IMOVEL_RURAL': [null, 'imovel_rural'], 'Assentamento de Reforma Agrária': [null, 'assentamento'],
  'Povos e Comunidades Tradicionais': [null, 'territorio_tradicional'], 'Imóvel Urbano': [null, null],
};

test('spelled-out status and type labels map to the codes; an unknown one is NULL, counted and kept in extra', async () => {
  const fields = AREA_IMOVEL_FIELDS.map((f) => (f.name === 'ind_status' || f.name === 'ind_tipo' ? { ...f, length: 60 } : f));
  // Every copy of a CAR number (the fixture repeats some) gets the same labels.
  const cars = [...new Set(SICAR_FIXTURES.GO.areaImovel.map((r) => String(r.attributes.cod_imovel).trim().toUpperCase()))];
  const labels = (car: unknown) => SPELLED[cars.indexOf(String(car).trim().toUpperCase()) % SPELLED.length];
  const rows: LayerRow[] = SICAR_FIXTURES.GO.areaImovel.map((r) => ({
    geometry: r.geometry,
    attributes: { ...r.attributes, ind_status: labels(r.attributes.cod_imovel)[0], ind_tipo: labels(r.attributes.cod_imovel)[1] },
  }));
  const dir = path.join(tmp, 'GO');
  fs.mkdirSync(dir, { recursive: true });
  await buildLayerZip(path.join(dir, 'GO_AREA_IMOVEL.zip'), 'GO_AREA_IMOVEL', fields, rows, { encoding: 'utf8', cpg: 'UTF-8' });
  const out = await runPipeline({ cfg: db.cfg, pool: db.pool, log: db.log }, sicar, { source: dir, uf: 'GO', force: true });
  expect(out.error).toBeUndefined();
  const got = (await db.pool.query(`SELECT c.car, c.situacao, c.tipo, t.extra FROM serving.car_imovel c JOIN "current".car_imovel t USING (car) WHERE c.uf = 'GO'`)).rows;
  expect(got.length).toBeGreaterThanOrEqual(SPELLED.length);
  for (const r of got) {
    const [status, tipo] = labels(r.car);
    expect([r.situacao, r.tipo], r.car).toEqual([WANT[status][0], WANT[tipo][1]]);
    // The text of a code that maps to nothing stays with the row.
    expect(r.extra?.situacao, r.car).toBe(WANT[status][0] === null ? status : undefined);
    expect(r.extra?.tipo, r.car).toBe(WANT[tipo][1] === null ? tipo : undefined);
  }
  const q: QualityReport = (await db.pool.query('SELECT quality FROM etl.snapshots WHERE snapshot_id = $1', [out.snapshot_id])).rows[0].quality;
  expect(JSON.stringify(q.facts)).toContain('Em retificação');
  expect(JSON.stringify(q.facts)).toContain('Imóvel Urbano');
});
