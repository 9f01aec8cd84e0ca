// Overlaps between CAR properties and the territorial layers (embargoes, conservation
// units, indigenous lands, quilombola areas), municipality shares and road distance.
// Rows are kept per (CAR state snapshot, layer snapshot) pair in derived.car_overlaps.
// Only missing pairs are computed: publishing CAR GO computes GO × each current layer;
// publishing a layer computes it × each current state; a backfill also the pairs the as_of
// reads of its dates need (historicalPairs). Pairs are computed before the
// publish transaction on two connections (both cores: an area pair split in two, a road
// pair on worker threads of this process beside the other connection's work); the publish
// transaction fills any pair a concurrent publish made necessary, so the serving views
// never show a current pair without its rows. How each kind of pair is computed, and
// why, is in sql/queries/overlap_*.sql, src/etl/road-distance/ and bench/README.md (overlaps).
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { ident, withTransaction } from '../db/pool.ts';
import type { Logger } from '../log.ts';
import { sqlText, tableName } from '../sql.ts';
import { areaHits, areaPair, areaPieces, createLinePieces, type AreaPairTables } from './sql/overlaps.ts';
import { distancePair, RoadSession } from './road-distance/pair.ts';
import { threadsForCores } from './road-distance/threads.ts';
import * as catalog from './catalog.ts';
import { qualifiedSnapshotTable } from './names.ts';
import { settledLater } from './two-connections.ts';
import { PIPELINES } from '../../pipelines/registry.ts';

export interface Overlay {
  camada: string;
  dataset: string;
  relation: string;
  idColumn: string;
  kind: 'area' | 'distance';
  /** SQL boolean expression for the `ativo` flag (embargoes). */
  active?: string;
  /**
   * SQL filter on the layer's rows: a boolean expression over the row `l`, written only with
   * columns every snapshot of the layer has (pieces of an older snapshot are built with it too).
   * Changing it needs a migration that forgets the pairs computed with the old one and drops
   * the line pieces cut with it (as sql/0108 does for the road distance).
   */
  filter?: string;
}

/** The overlays, each declared by its layer's pipeline (Pipeline.overlay), in registry order. */
export const OVERLAYS: Overlay[] = PIPELINES.flatMap((p) => (p.overlay ? [p.overlay] : []));

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
  return withoutDone(db, pairs);
}

interface Dated {
  snapshot_id: number;
  dataset: string;
  scope: string;
  as_of: string;
  is_current: boolean;
}

/**
 * The pairs as_of reads need once `prospective` is kept (a backfill): over the dates it answers
 * for in its own series (its as-of up to the next snapshot of its scope), with the snapshot each
 * of those dates reads on the other side (every CAR state for a layer, every layer for a state).
 * Those are the only pairs a new snapshot adds to the history; missing ones are returned.
 */
export async function historicalPairs(db: pg.ClientBase | pg.Pool, prospective: Prospective): Promise<Pair[]> {
  const datasets = [CAR_DATASET, ...OVERLAYS.map((o) => o.dataset)];
  const r = await db.query(
    `SELECT s.snapshot_id, s.dataset, s.scope, to_char(s.as_of, 'YYYY-MM-DD') AS as_of, c.snapshot_id IS NOT NULL AS is_current
       FROM etl.snapshots s LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
      WHERE s.dataset = ANY ($1) AND (s.status = ANY ($2) OR s.snapshot_id = $3)`,
    [datasets, catalog.ANSWERING_STATUSES, prospective.snapshotId],
  );
  const all = r.rows as Dated[];
  const self = all.find((s) => s.snapshot_id === prospective.snapshotId);
  if (!self) return [];
  const seriesOf = (dataset: string, scope: string) => all.filter((s) => s.dataset === dataset && s.scope === scope);
  const own = seriesOf(self.dataset, self.scope);
  // another snapshot of the same date answers instead (the current one, or one loaded later): this one adds nothing
  if (catalog.answeringOn(own, self.as_of) !== self) return [];
  const until = own.filter((s) => s.as_of > self.as_of).map((s) => s.as_of).sort()[0] ?? null;
  const within = (d: string) => d >= self.as_of && (until === null || d < until);
  /** Each snapshot of the other series read on a date `self` answers for. */
  const readBeside = (other: Dated[]) => {
    const dates = [self.as_of, ...other.map((s) => s.as_of).filter(within)];
    return [...new Map(dates.flatMap((d) => catalog.answeringOn(other, d) ?? []).map((s) => [s.snapshot_id, s])).values()];
  };
  const pairs: Pair[] = [];
  if (self.dataset === CAR_DATASET) {
    for (const overlay of OVERLAYS) {
      for (const l of readBeside(seriesOf(overlay.dataset, ''))) pairs.push({ carSnapshotId: self.snapshot_id, layerSnapshotId: l.snapshot_id, overlay });
    }
  } else {
    const overlay = OVERLAYS.find((o) => o.dataset === self.dataset)!;
    for (const scope of new Set(all.filter((s) => s.dataset === CAR_DATASET).map((s) => s.scope))) {
      for (const c of readBeside(seriesOf(CAR_DATASET, scope))) pairs.push({ carSnapshotId: c.snapshot_id, layerSnapshotId: self.snapshot_id, overlay });
    }
  }
  return withoutDone(db, pairs);
}

/** The pairs not recorded in derived.overlap_pairs yet. */
async function withoutDone(db: pg.ClientBase | pg.Pool, pairs: Pair[]): Promise<Pair[]> {
  if (pairs.length === 0) return [];
  const done = await db.query(
    'SELECT car_snapshot_id, layer_snapshot_id FROM derived.overlap_pairs WHERE car_snapshot_id = ANY($1) AND layer_snapshot_id = ANY($2)',
    [[...new Set(pairs.map((p) => p.carSnapshotId))], [...new Set(pairs.map((p) => p.layerSnapshotId))]],
  );
  const have = new Set(done.rows.map((d) => `${d.car_snapshot_id}|${d.layer_snapshot_id}`));
  return pairs.filter((p) => !have.has(`${p.carSnapshotId}|${p.layerSnapshotId}`));
}

/** How many statements a pair is split into: the machine has two cores. */
export const DERIVE_PARTS = 2;

/**
 * The road distance is computed in this process, on worker threads (src/etl/road-distance):
 * one part, one road pair at a time, while the other connection keeps the database busy
 * with area pairs (roadThreads leaves it a core).
 */
const partsOf = (pair: Pair) => (pair.overlay.kind === 'distance' ? 1 : DERIVE_PARTS);

/**
 * A computation's part tables carry its own tag: a manual publish or rollback computes its pairs
 * outside any lock, as a run's derive does, so two of them at once (or one beside a run) may
 * compute the same pair; each builds its own tables, and finishPair records the pair once.
 */
export interface Tagged extends Pair {
  tag: string;
}

const tagged = (pair: Pair): Tagged => ({ ...pair, tag: randomBytes(3).toString('hex') });

const partTable = (pair: Tagged, part: number, step = '') =>
  `stage.${ident(`ov_${pair.carSnapshotId}_${pair.layerSnapshotId}_${part}${step && '_' + step}_${pair.tag}`)}`;

/**
 * The pieces of a line layer snapshot (roads), built once and registered with the snapshot
 * (so retention drops them); the road distance reads them into memory, so no index. Area
 * layers have no copy:
 * their pair statement cuts the large features it needs.
 */
async function linePieces(client: pg.ClientBase, overlay: Overlay, layerSnapshotId: number): Promise<string> {
  const pieces = qualifiedSnapshotTable(`${overlay.relation}_sub`, layerSnapshotId);
  await client.query('SELECT pg_advisory_xact_lock($1, $2)', [PAIR_LOCK, -layerSnapshotId]);
  if ((await client.query('SELECT to_regclass($1) AS r', [pieces])).rows[0].r) return pieces;
  await catalog.addSnapshotTable(client, layerSnapshotId, pieces);
  await createLinePieces(client, {
    pieces: tableName(pieces),
    layer: tableName(qualifiedSnapshotTable(overlay.relation, layerSnapshotId)),
    id: sqlText(ident(overlay.idColumn)),
    filter: sqlText(overlay.filter ?? 'true'),
  });
  return pieces;
}

/** Condition selecting share `part` of `parts` by hashing a text expression. */
const share = (expr: string, part: number, parts: number) =>
  parts === 1 ? 'true' : `(hashtext(${expr}) & 2147483647) % ${parts} = ${part}`;

/**
 * One part of a pair into its own unlogged table (autocommitted: parts run on separate
 * connections; finishPair moves their rows into derived.car_overlaps in one transaction).
 * Area layers are split by feature; the road distance is one part.
 */
async function computePart(client: pg.ClientBase, pair: Tagged, part: number, parts: number, roads?: RoadSession): Promise<void> {
  const out = partTable(pair, part);
  const car = qualifiedSnapshotTable('car_imovel', pair.carSnapshotId);
  const o = pair.overlay;
  await client.query(`DROP TABLE IF EXISTS ${out}`);
  if (o.kind === 'distance') {
    const pieces = qualifiedSnapshotTable(`${o.relation}_sub`, pair.layerSnapshotId);
    await distancePair(client, { out: tableName(out), car: tableName(car), pieces: tableName(pieces), part: sqlText(share('c.car', part, parts)), session: roads });
  } else {
    const vars: AreaPairTables = {
      car: tableName(car),
      layer: tableName(qualifiedSnapshotTable(o.relation, pair.layerSnapshotId)),
      id: sqlText(`l.${ident(o.idColumn)}`),
      active: sqlText(o.active ? `l.${ident(o.active)}` : 'NULL::boolean'),
      filter: sqlText(o.filter ?? 'true'),
      part: sqlText(share(`l.${ident(o.idColumn)}::text`, part, parts)),
      hits: tableName(partTable(pair, part, 'hits')),
      pieces: tableName(partTable(pair, part, 'pieces')),
      out: tableName(out),
    };
    await client.query(`DROP TABLE IF EXISTS ${vars.hits}, ${vars.pieces}`);
    await areaHits(client, vars);
    await areaPieces(client, vars);
    await client.query(`ANALYZE ${vars.hits}, ${vars.pieces}`);
    await areaPair(client, vars);
    await client.query(`DROP TABLE ${vars.hits}, ${vars.pieces}`);
  }
}

/**
 * Inside a transaction: moves the parts' rows into derived.car_overlaps and records the
 * pair (unless a concurrent run recorded it first), then drops the parts.
 */
async function finishPair(client: pg.ClientBase, pair: Tagged, parts: number, durationMs: number): Promise<number> {
  const tables = Array.from({ length: parts }, (_, k) => partTable(pair, k));
  await client.query('SELECT pg_advisory_xact_lock($1, $2)', [pair.carSnapshotId, pair.layerSnapshotId]);
  const done = await client.query('SELECT rows FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [pair.carSnapshotId, pair.layerSnapshotId]);
  let rows: number = done.rowCount ? done.rows[0].rows : 0;
  if (!done.rowCount) {
    // Rows of a pair forgotten so it is computed again (a changed rule, migration 0108) were
    // served until now: they go in the transaction that brings their successors.
    await client.query('DELETE FROM derived.car_overlaps WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [pair.carSnapshotId, pair.layerSnapshotId]);
    const ins = await client.query(
      `INSERT INTO derived.car_overlaps (car_snapshot_id, layer_snapshot_id, camada, car, uf, feicao_id, area_sobreposta_ha, percentual, distancia_km, ativo)
       SELECT $1, $2, $3, car, uf, fid, area_sobreposta_ha, percentual, ${pair.overlay.kind === 'distance' ? 'distancia_km' : 'NULL'}, ativo
       FROM (${tables.map((t) => `SELECT * FROM ${t}`).join(' UNION ALL ')}) p`,
      [pair.carSnapshotId, pair.layerSnapshotId, pair.overlay.camada],
    );
    rows = ins.rowCount ?? 0;
    await client.query(
      'INSERT INTO derived.overlap_pairs (car_snapshot_id, layer_snapshot_id, camada, rows, duration_ms) VALUES ($1, $2, $3, $4, $5)',
      [pair.carSnapshotId, pair.layerSnapshotId, pair.overlay.camada, rows, Math.round(durationMs)],
    );
  }
  for (const t of tables) await client.query(`DROP TABLE IF EXISTS ${t}`);
  return rows;
}

async function isDone(db: pg.ClientBase | pg.Pool, pair: Pair): Promise<boolean> {
  const r = await db.query('SELECT 1 FROM derived.overlap_pairs WHERE car_snapshot_id = $1 AND layer_snapshot_id = $2', [pair.carSnapshotId, pair.layerSnapshotId]);
  return (r.rowCount ?? 0) > 0;
}

/** Computes one pair on a client that is already inside a transaction (one part, serially). */
export async function computePair(client: pg.ClientBase, untagged: Pair): Promise<number> {
  const pair = tagged(untagged);
  if (await isDone(client, pair)) return finishPair(client, pair, 1, 0);
  const t0 = Date.now();
  if (pair.overlay.kind === 'distance') await linePieces(client, pair.overlay, pair.layerSnapshotId);
  await computePart(client, pair, 0, 1);
  return finishPair(client, pair, 1, Date.now() - t0);
}

/** Road threads: a core each, less the one the area pairs' connection keeps busy when there are any. */
function roadThreads(areaPairsBeside: boolean): number {
  return Math.max(1, threadsForCores() - (areaPairsBeside ? 1 : 0));
}

/** Heavier tasks first, so that the two connections finish together. */
const weight = (o: Overlay) => (o.kind === 'distance' ? 3 : o.filter ? 2 : 1);

/**
 * Computes every pair `prospective` would need once current. Each pair is split into
 * DERIVE_PARTS statements run on DERIVE_PARTS connections (both cores); a pair is
 * recorded, with its rows, in one transaction once its parts are done (a checkpoint).
 */
export async function ensureOverlaps(pool: pg.Pool, log: Logger | undefined, prospective?: Prospective, o: { history?: boolean } = {}): Promise<{ pairs: number; rows: number }> {
  const needed = await missingPairs(pool, prospective);
  // a backfill: also the pairs the as_of reads of the dates it answers for need
  if (o.history && prospective) needed.push(...(await historicalPairs(pool, prospective)));
  const pairs = [...new Map(needed.map((p) => [`${p.carSnapshotId}|${p.layerSnapshotId}`, p])).values()].map(tagged);
  if (pairs.length === 0) return { pairs: 0, rows: 0 };
  const parts = DERIVE_PARTS;
  // Line pieces (roads) come first; the distance parts wait for them.
  const prep = new Map<number, { overlay: Overlay; ready?: Promise<unknown> }>();
  for (const p of pairs) if (p.overlay.kind === 'distance') prep.set(p.layerSnapshotId, { overlay: p.overlay });
  type Task = { prep: number } | { pair: Tagged; part: number };
  const queue: Task[] = [
    ...[...prep.keys()].map((id) => ({ prep: id })),
    ...[...pairs].sort((a, b) => weight(b.overlay) - weight(a.overlay)).flatMap((pair) => Array.from({ length: partsOf(pair) }, (_, part) => ({ pair, part }))),
  ];
  const state = new Map<Tagged, { left: number; ms: number; t0: number }>(pairs.map((p) => [p, { left: partsOf(p), ms: 0, t0: Date.now() }]));
  let rows = 0;
  // One road distance at a time, its threads and each road layer's pieces serving every CAR
  // state of the run. While area pairs run beside it, the database's connection has a core
  // of its own: on 2 cores, one road thread beside the area pairs finished the bench's derive
  // stage in 18.6–19.0 s against 19.3–19.4 s with two (whose CPU a property rose from ~44 to
  // ~77 µs each), with less CPU and 50 MB less memory.
  let inProcess: Promise<void> | undefined;
  const roads = new RoadSession({ count: roadThreads(pairs.some((p) => p.overlay.kind !== 'distance')) });
  const ready = (t: Task) =>
    'prep' in t || t.pair.overlay.kind !== 'distance' || (prep.get(t.pair.layerSnapshotId)!.ready !== undefined && inProcess === undefined);
  const worker = async () => {
    for (;;) {
      const i = queue.findIndex(ready);
      if (i < 0) {
        if (queue.length === 0) return;
        await Promise.all([...prep.values()].map((x) => x.ready)); // the other worker is building pieces
        await inProcess; // or computing a road distance
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const [task] = queue.splice(i, 1);
      if ('prep' in task) {
        const entry = prep.get(task.prep)!;
        const gate = settledLater();
        entry.ready = gate.promise;
        try {
          await withTransaction(pool, (c) => linePieces(c, entry.overlay, task.prep));
          gate.resolve();
        } catch (e) {
          gate.reject(e);
          throw e;
        }
        continue;
      }
      const { pair, part } = task;
      // claimed before the first await, so the other worker sees it taken
      const done = pair.overlay.kind === 'distance' ? settledLater() : undefined;
      if (done) inProcess = done.promise;
      const st = state.get(pair)!;
      let t0 = Date.now();
      try {
        await prep.get(pair.layerSnapshotId)?.ready;
        t0 = Date.now();
        const c = await pool.connect();
        try {
          await computePart(c, pair, part, partsOf(pair), roads);
        } finally {
          c.release();
        }
      } finally {
        if (done) {
          inProcess = undefined;
          done.resolve();
        }
      }
      st.ms += Date.now() - t0;
      if (--st.left === 0) {
        const n = await withTransaction(pool, (tx) => finishPair(tx, pair, partsOf(pair), st.ms));
        rows += n;
        log?.info({ camada: pair.overlay.camada, car_snapshot_id: pair.carSnapshotId, layer_snapshot_id: pair.layerSnapshotId, rows: n, ms: Date.now() - st.t0, statement_ms: st.ms }, 'overlaps computed');
      }
    }
  };
  // On a failure the other worker stops after its current statement; then the parts go.
  const settled = await Promise.allSettled(Array.from({ length: parts }, () => worker().catch((e) => ((queue.length = 0), Promise.reject(e)))));
  await roads.close();
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    for (const p of pairs) for (let k = 0; k < parts; k++) await pool.query(`DROP TABLE IF EXISTS ${partTable(p, k)}, ${partTable(p, k, 'hits')}, ${partTable(p, k, 'pieces')}`).catch(() => {});
    throw failed.reason;
  }
  return { pairs: pairs.length, rows };
}

/** Inside a publish transaction: fills pairs that a concurrent publish made necessary. */
export async function fillMissingPairs(client: pg.ClientBase): Promise<number> {
  let n = 0;
  for (const p of await missingPairs(client)) n += await computePair(client, p);
  return n;
}

/** The part tables (partTable) of the pairs a snapshot is in: what a killed derive leaves in `stage`. */
async function dropPartTables(db: pg.ClientBase | pg.Pool, snapshotId: number): Promise<void> {
  const r = await db.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'stage' AND tablename LIKE 'ov\\_%'`);
  for (const { tablename } of r.rows as { tablename: string }[]) {
    const m = /^ov_(\d+)_(\d+)_\d+(?:_[a-z]+)?(?:_[0-9a-f]{6})?$/.exec(tablename); // partTable, tagged or (before tags) not
    if (m && (Number(m[1]) === snapshotId || Number(m[2]) === snapshotId)) await db.query(`DROP TABLE IF EXISTS stage.${ident(tablename)}`);
  }
}

/** Forgets the overlap rows (and any part tables left) of a snapshot that is being dropped or failed. */
export async function forgetOverlaps(db: pg.ClientBase | pg.Pool, snapshotId: number): Promise<void> {
  await dropPartTables(db, snapshotId);
  await db.query('DELETE FROM derived.car_overlaps WHERE car_snapshot_id = $1 OR layer_snapshot_id = $1', [snapshotId]);
  await db.query('DELETE FROM derived.overlap_pairs WHERE car_snapshot_id = $1 OR layer_snapshot_id = $1', [snapshotId]);
}
