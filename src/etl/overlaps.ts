// Overlaps between CAR properties and the territorial layers (embargoes, conservation
// units, indigenous lands, quilombola areas), municipality shares and road distance.
// Rows are kept per (CAR state snapshot, layer snapshot) pair in derived.car_overlaps.
// Only missing pairs are computed: publishing CAR GO computes GO × each current layer;
// publishing a layer computes it × each current state. Pairs are computed before the
// publish transaction; the publish transaction fills any pair a concurrent publish
// made necessary, so the serving views never show a current pair without its rows.
import type pg from 'pg';
import { ident, withTransaction } from '../db/pool.ts';
import type { Logger } from '../log.ts';
import { namedSql, render } from '../sql.ts';
import * as catalog from './catalog.ts';
import { qualifiedSnapshotTable } from './names.ts';

export interface Overlay {
  camada: string;
  dataset: string;
  relation: string;
  idColumn: string;
  kind: 'area' | 'distance';
  /** SQL boolean expression for the `ativo` flag (embargoes). */
  active?: string;
  /** SQL filter on the layer's rows. */
  filter?: string;
}

export const OVERLAYS: Overlay[] = [
  { camada: 'embargo', dataset: 'ibama-embargos', relation: 'ibama_embargos', idColumn: 'numero_tad', kind: 'area', active: 'ativo' },
  { camada: 'uc', dataset: 'cnuc-ucs', relation: 'cnuc_ucs', idColumn: 'codigo', kind: 'area' },
  { camada: 'ti', dataset: 'funai-tis', relation: 'funai_tis', idColumn: 'codigo', kind: 'area' },
  { camada: 'quilombo', dataset: 'incra-quilombos', relation: 'incra_quilombos', idColumn: 'codigo', kind: 'area' },
  { camada: 'municipio', dataset: 'ibge-municipios', relation: 'ibge_municipios', idColumn: 'geocodigo', kind: 'area', filter: 'is_municipio' },
  { camada: 'rodovia', dataset: 'dnit-snv', relation: 'dnit_snv', idColumn: 'codigo', kind: 'distance' },
];

const CAR_DATASET = 'sicar';
const PAIR_LOCK = 727002;

export function involvesOverlaps(dataset: string): boolean {
  return dataset === CAR_DATASET || OVERLAYS.some((o) => o.dataset === dataset);
}

export interface Pair {
  carSnapshotId: number;
  layerSnapshotId: number;
  overlay: Overlay;
}

export interface Prospective {
  dataset: string;
  scope: string;
  snapshotId: number;
}

/** Pairs the current snapshots (with `prospective` taking its scope's place) need and do not have. */
export async function missingPairs(db: pg.ClientBase | pg.Pool, prospective?: Prospective): Promise<Pair[]> {
  const r = await db.query('SELECT dataset, scope, snapshot_id FROM etl.current');
  const current = new Map<string, number>(r.rows.map((x) => [`${x.dataset}|${x.scope}`, x.snapshot_id]));
  if (prospective) current.set(`${prospective.dataset}|${prospective.scope}`, prospective.snapshotId);
  const cars = [...current].filter(([k]) => k.startsWith(`${CAR_DATASET}|`)).map(([, id]) => id);
  const pairs: Pair[] = [];
  for (const overlay of OVERLAYS) {
    const layer = current.get(`${overlay.dataset}|`);
    if (layer === undefined) continue;
    for (const car of cars) pairs.push({ carSnapshotId: car, layerSnapshotId: layer, overlay });
  }
  if (pairs.length === 0) return [];
  const done = await db.query(
    'SELECT car_snapshot_id, layer_snapshot_id FROM derived.overlap_pairs WHERE car_snapshot_id = ANY($1) AND layer_snapshot_id = ANY($2)',
    [[...new Set(pairs.map((p) => p.carSnapshotId))], [...new Set(pairs.map((p) => p.layerSnapshotId))]],
  );
  const have = new Set(done.rows.map((d) => `${d.car_snapshot_id}|${d.layer_snapshot_id}`));
  return pairs.filter((p) => !have.has(`${p.carSnapshotId}|${p.layerSnapshotId}`));
}

/** The subdivided copy of a layer snapshot, built once and registered with its snapshot (so retention drops it). */
async function layerSub(client: pg.ClientBase, overlay: Overlay, layerSnapshotId: number): Promise<string> {
  const sub = qualifiedSnapshotTable(`${overlay.relation}_sub`, layerSnapshotId);
  await client.query('SELECT pg_advisory_xact_lock($1, $2)', [PAIR_LOCK, -layerSnapshotId]);
  if ((await client.query('SELECT to_regclass($1) AS r', [sub])).rows[0].r) return sub;
  await catalog.addSnapshotTable(client, layerSnapshotId, sub);
  await client.query(
    render(namedSql('queries/overlap_layer_sub'), {
      sub,
      layer: qualifiedSnapshotTable(overlay.relation, layerSnapshotId),
      id: ident(overlay.idColumn),
      active: overlay.active ? ident(overlay.active) : 'NULL::boolean',
      filter: overlay.filter ? ident(overlay.filter) : 'true',
    }),
  );
  await client.query(`CREATE INDEX ON ${sub} USING gist (geom)`);
  await client.query(`ANALYZE ${sub}`);
  return sub;
}

/** Computes one pair on a client that is already inside a transaction. */
export async function computePair(client: pg.ClientBase, pair: Pair): Promise<number> {
  await client.query('SELECT pg_advisory_xact_lock($1, $2)', [pair.carSnapshotId, pair.layerSnapshotId]);
  const done = await client.query('SELECT rows FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [pair.carSnapshotId, pair.layerSnapshotId]);
  if (done.rowCount) return done.rows[0].rows;
  const t0 = Date.now();
  const sub = await layerSub(client, pair.overlay, pair.layerSnapshotId);
  const out = `stage.${ident(`ov_${pair.carSnapshotId}_${pair.layerSnapshotId}`)}`;
  const car = qualifiedSnapshotTable('car_imovel', pair.carSnapshotId);
  await client.query(`DROP TABLE IF EXISTS ${out}`);
  const sqlName = pair.overlay.kind === 'area' ? 'queries/overlap_area_pair' : 'queries/overlap_distance_pair';
  await client.query(render(namedSql(sqlName), { out, car, sub }));
  const ins = await client.query(
    `INSERT INTO derived.car_overlaps (car_snapshot_id, layer_snapshot_id, camada, car, uf, feicao_id, area_sobreposta_ha, percentual, distancia_km, ativo)
     SELECT $1, $2, $3, car, uf, fid, area_sobreposta_ha, percentual, ${pair.overlay.kind === 'distance' ? 'distancia_km' : 'NULL'}, ativo FROM ${out}`,
    [pair.carSnapshotId, pair.layerSnapshotId, pair.overlay.camada],
  );
  await client.query(`DROP TABLE ${out}`);
  await client.query(
    'INSERT INTO derived.overlap_pairs (car_snapshot_id, layer_snapshot_id, camada, rows, duration_ms) VALUES ($1, $2, $3, $4, $5)',
    [pair.carSnapshotId, pair.layerSnapshotId, pair.overlay.camada, ins.rowCount ?? 0, Date.now() - t0],
  );
  return ins.rowCount ?? 0;
}

/** Computes every pair `prospective` would need once current, each in its own transaction (a checkpoint). */
export async function ensureOverlaps(pool: pg.Pool, log: Logger, prospective?: Prospective): Promise<{ pairs: number; rows: number }> {
  let rows = 0;
  const pairs = await missingPairs(pool, prospective);
  for (const p of pairs) {
    const t0 = Date.now();
    const n = await withTransaction(pool, (c) => computePair(c, p));
    rows += n;
    log.info({ camada: p.overlay.camada, car_snapshot_id: p.carSnapshotId, layer_snapshot_id: p.layerSnapshotId, rows: n, ms: Date.now() - t0 }, 'overlaps computed');
  }
  return { pairs: pairs.length, rows };
}

/** Inside a publish transaction: fills pairs that a concurrent publish made necessary. */
export async function fillMissingPairs(client: pg.ClientBase): Promise<number> {
  let n = 0;
  for (const p of await missingPairs(client)) n += await computePair(client, p);
  return n;
}

/** Forgets the overlap rows of a snapshot that is being dropped or failed. */
export async function forgetOverlaps(db: pg.ClientBase | pg.Pool, snapshotId: number): Promise<void> {
  await db.query('DELETE FROM derived.car_overlaps WHERE car_snapshot_id = $1 OR layer_snapshot_id = $1', [snapshotId]);
  await db.query('DELETE FROM derived.overlap_pairs WHERE car_snapshot_id = $1 OR layer_snapshot_id = $1', [snapshotId]);
}
